package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/spanmutex/spanmutex"
	"github.com/spanmutex/spanmutex/emulator"
	"github.com/spanmutex/spanmutex/internal/cmdline/cmdlinetest"
	"github.com/spanmutex/spanmutex/internal/testutil"
)

// Shared by the integration tests; both stay unset under -short.
var (
	emu    *emulator.Emulator // the emulator of this test run
	binary string             // the spanmutex binary built from this package
)

// TestMain starts the emulator and builds the binary once, unless -short.
func TestMain(m *testing.M) {
	if os.Getenv(replicaEnv) != "" {
		// Started by the demo, run in-process by a test, as one of its
		// replicas: be spanmutex.
		os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	testutil.WidenParallel() // parses the flags
	os.Exit(testMain(m))
}

// testMain is TestMain's body, so that deferred clean-ups run before exit.
func testMain(m *testing.M) int {
	if testing.Short() {
		return m.Run()
	}
	var err error
	emu, err = cmdlinetest.StartEmulator()
	if err != nil {
		fmt.Fprintln(os.Stderr, err) // it says how to install the emulator
		return 1
	}
	defer emu.Close()
	dir, err := os.MkdirTemp("", "spanmutex-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "spanmutex")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, goTool(), "build", "-o", binary, ".")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// goTool returns the go command of the toolchain running the tests: go test
// puts its GOROOT/bin first on $PATH.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

// noLeak fails the test if, within a few seconds of its end, goroutines
// started by this package's demo or children are still running.
func noLeak(t *testing.T) {
	t.Helper()
	noGoroutinesOf(t, "this package", "main.(*child)", "main.(*demo)")
}

// runOnBothBackends runs args on both backends (cmdlinetest.Command.RunOnBothBackends).
func runOnBothBackends(t *testing.T, db string, leak func(*testing.T), args []string, check func(t *testing.T, stdout, stderr string)) {
	t.Helper()
	commandTests().RunOnBothBackends(t, db, leak, args, check)
}

// noGoroutinesOf fails the test if goroutines of what (naming one of
// markers) still run a few seconds after it ends.
var noGoroutinesOf = testutil.NoGoroutinesOf

// needEmulator skips integration tests under -short.
func needEmulator(t *testing.T) {
	t.Helper()
	commandTests().NeedEmulator(t)
}

// needBinary skips a test that starts an emulator of its own when there is
// no emulator binary.
func needBinary(t *testing.T) {
	t.Helper()
	commandTests().NeedBinary(t)
}

// newDatabase creates a fresh database holding the mutex table.
func newDatabase(t *testing.T) string {
	t.Helper()
	return commandTests().NewDatabase(t)
}

// cli runs the command line in-process and returns its exit status and output.
func cli(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return commandTests().Call(t, args...)
}

// commandTests is what the helpers above share with the tests of the other
// commands (internal/cmdline/cmdlinetest).
func commandTests() *cmdlinetest.Command {
	return &cmdlinetest.Command{Emu: emu, Run: func(ctx context.Context, s streams, args []string) int {
		return run(ctx, args, s.Stdout, s.Stderr)
	}}
}

// inspect returns name's row in db, or fails the test if there is none.
func inspect(t *testing.T, db, name string) spanmutex.Record {
	t.Helper()
	rows := inspectAll(t, db, name)
	if len(rows) != 1 {
		t.Fatalf("want one row for %q in %s, got %d", name, db, len(rows))
	}
	return rows[0]
}

// inspectAll returns the rows of db's mutex table for name ("" for all).
func inspectAll(t *testing.T, db, name string) []spanmutex.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, err := emu.NewClient(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	rows, err := spanmutex.Inspect(ctx, client, name)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// readLines returns the lines of a file, or none if it does not exist.
func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	text := strings.TrimRight(string(b), "\n")
	if text == "" {
		return nil
	}
	return strings.Split(text, "\n")
}

// uniqueName returns a mutex name no other test uses.
func uniqueName(t *testing.T) string {
	t.Helper()
	return strings.NewReplacer("/", "-", " ", "_").Replace(t.Name()) + "-" + fmt.Sprint(time.Now().UnixNano())
}
