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
// as the surface shrinks, so that it never grows unnoticed. (126 until
// WithHeadPoll, issue 44's choice between reads and prompt hand-offs for
// waiters that no wake-up reaches; 128 with WithSessions, its session.)
const maxExported = 128

// maxBeforeSemaphores bounds the names of every primitive but the Semaphore
// and the RWLock: the surface issue 32 counted (152 names at 3ae5ef7) and
// aimed to bring to 110 or fewer, before issue 31 added those two.
const maxBeforeSemaphores = 110 // 109 with WithHeadPoll, 110 with WithSessions

// semaphoreNames are the names the Semaphore and the RWLock add.
var semaphoreNames = []string{
	"Holder", "NewRWLock", "NewSemaphore", "RWLock", "RWLock.Lock", "RWLock.RLock",
	"RWLock.RUnlock", "RWLock.TryLock", "RWLock.TryRLock", "RWLock.Unlock",
	"Semaphore", "Semaphore.Acquire", "Semaphore.Release", "Semaphore.Resize",
	"Semaphore.TryAcquire", "SizeMismatchError", "SizeMismatchError.Error", "StateShared",
}

// TestExportedNames counts and prints the names the root package exports:
// its exported top-level identifiers and the exported methods of its
// exported types, as go doc lists them; and those of every primitive but
// the Semaphore and the RWLock.
func TestExportedNames(t *testing.T) {
	names := exportedNames(t, ".")
	base := slices.DeleteFunc(slices.Clone(names), func(n string) bool { return slices.Contains(semaphoreNames, n) })
	t.Logf("the root package exports %d names; %d without the Semaphore's and RWLock's %d", len(names), len(base), len(semaphoreNames))
	for _, n := range semaphoreNames {
		if !slices.Contains(names, n) {
			t.Errorf("semaphoreNames lists %s, which the package does not export", n)
		}
	}
	if len(names) > maxExported {
		t.Errorf("the root package exports %d names, more than %d: %s", len(names), maxExported, strings.Join(names, " "))
	}
	if len(base) > maxBeforeSemaphores {
		t.Errorf("without the Semaphore and RWLock, %d names, more than %d: %s", len(base), maxBeforeSemaphores, strings.Join(base, " "))
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
