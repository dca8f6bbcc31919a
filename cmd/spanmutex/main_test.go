package main

import (
	"bytes"
	"context"
	"flag"
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
	flag.Parse()
	os.Exit(testMain(m))
}

// testMain is TestMain's body, so that deferred clean-ups run before exit.
func testMain(m *testing.M) int {
	if testing.Short() {
		return m.Run()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var err error
	emu, err = emulator.Start(ctx)
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

// runOnBothBackends runs the command line args in-process twice, each as a
// subtest: with --database db (a database of the test emulator), and with
// neither a database nor $SPANNER_EMULATOR_HOST, the default path, which
// starts an embedded emulator. leak registers the subtest's goroutine-leak
// check. A run must exit 0 and say which backend it used; check then reads
// its output.
func runOnBothBackends(t *testing.T, db string, leak func(*testing.T), args []string, check func(t *testing.T, stdout, stderr string)) {
	t.Helper()
	needEmulator(t)
	cases := []struct {
		name string
		host string // $SPANNER_EMULATOR_HOST
		args []string
		want string
	}{
		{"database flag", emu.Host(), []string{"--database", db}, "Using database "},
		{"embedded emulator", "", nil, "Started the Cloud Spanner emulator"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.host == "" {
				needBinary(t)
			}
			leak(t)
			t.Setenv(emulatorHostEnv, tc.host)
			t.Setenv(databaseEnv, "")
			code, stdout, stderr := cli(t, append(append([]string(nil), args...), tc.args...)...)
			if code != exitOK {
				t.Fatalf("%s exited %d; stdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, stdout, stderr)
			}
			if !strings.Contains(stdout, tc.want) {
				t.Errorf("stdout does not contain %q:\n%s", tc.want, stdout)
			}
			check(t, stdout, stderr)
		})
	}
}

// noGoroutinesOf fails the test if goroutines of what (naming one of
// markers) still run a few seconds after it ends.
var noGoroutinesOf = testutil.NoGoroutinesOf

// needEmulator skips integration tests under -short.
func needEmulator(t *testing.T) {
	t.Helper()
	if emu == nil {
		t.Skip("-short: skipping a test that needs the Cloud Spanner emulator")
	}
}

// needBinary skips a test that starts an emulator of its own when there is
// no emulator binary (the tests may be attached to $SPANNER_EMULATOR_HOST).
func needBinary(t *testing.T) {
	t.Helper()
	needEmulator(t)
	if _, err := emulator.FindBinary(); err != nil {
		t.Skip(err)
	}
}

// newDatabase creates a fresh database holding the mutex table.
func newDatabase(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := emu.NewDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// cli runs the command line in-process and returns its exit status and output.
func cli(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// inspect returns name's row in db, or fails the test if there is none.
func inspect(t *testing.T, db, name string) spanmutex.Status {
	t.Helper()
	rows := inspectAll(t, db, name)
	if len(rows) != 1 {
		t.Fatalf("want one row for %q in %s, got %d", name, db, len(rows))
	}
	return rows[0]
}

// inspectAll returns the rows of db's mutex table for name ("" for all).
func inspectAll(t *testing.T, db, name string) []spanmutex.Status {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, err := emu.NewClient(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	rows, err := spanmutex.Inspect(ctx, client, "", name)
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
