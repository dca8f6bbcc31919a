package spanmutex

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// floor is the room of every root file that belongs to no primitive: what
// all of them share (doc/design.md §2).
const floor = "floor"

// primitiveRooms maps a file name's prefix to the primitive whose room the
// file is in: "lock.go" and "lock_store.go" are the Lock's, and so on. Every
// other root file is the floor's.
var primitiveRooms = []struct{ prefix, room string }{
	{"mutex", "mutex"},
	{"lock", "lock"},
	{"semaphore", "semaphore"},
	{"rwlock", "semaphore"}, // an RWLock is a Semaphore (§4.12)
	{"election", "election"},
}

// builtOn names the primitive a primitive is built on, through that
// primitive's exported API only: an Election is a Lock whose holder is the
// leader (§6).
var builtOn = map[string]string{"election": "lock"}

// roomOf is the room of the root file named name.
func roomOf(name string) string {
	base := strings.TrimSuffix(filepath.Base(name), ".go")
	for _, p := range primitiveRooms {
		if base == p.prefix || strings.HasPrefix(base, p.prefix+"_") {
			return p.room
		}
	}
	return floor
}

// TestPrimitivesShareOnlyTheFloor fails when the edge between the
// primitives leaks (issue 43): when a primitive's file uses an identifier
// (type, function, method, field, constant, variable) defined in another
// primitive's files, other than the exported API of the primitive it is
// built on, or when a floor file uses anything defined in a primitive's
// files. What they share belongs on the floor. Tests are not checked.
func TestPrimitivesShareOnlyTheFloor(t *testing.T) {
	fset := token.NewFileSet()
	files := parsePackage(t, fset, ".")
	cross, err := crossings(fset, files, exportDataImporter(t, fset))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cross {
		t.Error(c)
	}
	if len(cross) > 0 {
		t.Errorf("%d identifiers cross between rooms: move what they share to the floor (doc/design.md §2)", len(cross))
	}
}

// crossings type-checks files (one package) and returns, sorted, one line
// per identifier used across the edge: where it is first used, by which
// room, and where it is defined.
func crossings(fset *token.FileSet, files []*ast.File, imp types.Importer) ([]string, error) {
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}}
	conf := types.Config{Importer: imp}
	pkg, err := conf.Check(files[0].Name.Name, fset, files, info)
	if err != nil {
		return nil, err
	}
	type use struct {
		room string
		obj  types.Object
	}
	first := map[use]token.Position{}
	for id, obj := range info.Uses {
		if obj.Pkg() != pkg || !obj.Pos().IsValid() {
			continue
		}
		at, def := fset.Position(id.Pos()), fset.Position(obj.Pos())
		from, to := roomOf(at.Filename), roomOf(def.Filename)
		if !leaks(from, to, obj) {
			continue
		}
		u := use{from, obj}
		if p, ok := first[u]; !ok || posBefore(at, p) {
			first[u] = at
		}
	}
	var out []string
	for u, at := range first {
		def := fset.Position(u.obj.Pos())
		out = append(out, fmt.Sprintf("%s: %s uses %s, defined in %s (%s)", posString(at), u.room, u.obj.Name(), posString(def), roomOf(def.Filename)))
	}
	slices.Sort(out)
	return out, nil
}

// leaks reports whether a file of room from may not use obj, defined in a
// file of room to.
func leaks(from, to string, obj types.Object) bool {
	switch {
	case from == to, to == floor:
		return false
	case from == floor:
		return true
	default:
		return builtOn[from] != to || !obj.Exported()
	}
}

func posBefore(a, b token.Position) bool {
	if a.Filename != b.Filename {
		return a.Filename < b.Filename
	}
	return a.Offset < b.Offset
}

func posString(p token.Position) string {
	return fmt.Sprintf("%s:%d:%d", filepath.Base(p.Filename), p.Line, p.Column)
}

// parsePackage parses the package in dir, without its tests.
func parsePackage(t *testing.T, fset *token.FileSet, dir string) []*ast.File {
	t.Helper()
	pkgs, err := parser.ParseDir(fset, dir, func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	pkg := pkgs["spanmutex"]
	var files []*ast.File
	for _, name := range slices.Sorted(maps.Keys(pkg.Files)) {
		files = append(files, pkg.Files[name])
	}
	return files
}

// exportDataImporter imports the root package's dependencies from the
// export data the go command builds (go list -export), as
// golang.org/x/tools/go/packages does, without depending on it.
func exportDataImporter(t *testing.T, fset *token.FileSet) types.Importer {
	t.Helper()
	cmd := exec.Command("go", "list", "-export", "-deps", "-f", "{{if .Export}}{{.ImportPath}}={{.Export}}{{end}}", ".")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -export: %v\n%s", err, stderr.Bytes())
	}
	export := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if path, file, ok := strings.Cut(sc.Text(), "="); ok {
			export[path] = file
		}
	}
	return importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		file, ok := export[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(file)
	})
}
