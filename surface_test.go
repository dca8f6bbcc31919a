package spanmutex

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"slices"
	"strings"
	"testing"
)

// maxExported bounds the root package's exported names: a ratchet, lowered
// as the surface shrinks (issue 32 aims at 110), so that it never grows
// unnoticed.
const maxExported = 126

// TestExportedNames counts and prints the names the root package exports:
// its exported top-level identifiers and the exported methods of its
// exported types, as go doc lists them.
func TestExportedNames(t *testing.T) {
	names := exportedNames(t, ".")
	t.Logf("the root package exports %d names", len(names))
	if len(names) > maxExported {
		t.Errorf("the root package exports %d names, more than %d: %s", len(names), maxExported, strings.Join(names, " "))
	}
}

// exportedNames parses the package in dir, without its tests.
func exportedNames(t *testing.T, dir string) []string {
	t.Helper()
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range pkgs["spanmutex"].Files {
		for _, d := range f.Decls {
			names = append(names, declNames(d)...)
		}
	}
	slices.Sort(names)
	return names
}

// declNames returns the exported names d declares: a function, a method of
// an exported type (as Type.Method), or the types, constants and variables
// of a declaration.
func declNames(d ast.Decl) []string {
	var out []string
	switch d := d.(type) {
	case *ast.FuncDecl:
		switch recv := receiverName(d); {
		case !d.Name.IsExported():
		case d.Recv == nil:
			out = append(out, d.Name.Name)
		case ast.IsExported(recv):
			out = append(out, recv+"."+d.Name.Name)
		}
	case *ast.GenDecl:
		for _, s := range d.Specs {
			switch s := s.(type) {
			case *ast.TypeSpec:
				if s.Name.IsExported() {
					out = append(out, s.Name.Name)
				}
			case *ast.ValueSpec:
				for _, n := range s.Names {
					if n.IsExported() {
						out = append(out, n.Name)
					}
				}
			}
		}
	}
	return out
}

// receiverName is the name of d's receiver type, "" for a function.
func receiverName(d *ast.FuncDecl) string {
	if d.Recv == nil {
		return ""
	}
	e := d.Recv.List[0].Type
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}
