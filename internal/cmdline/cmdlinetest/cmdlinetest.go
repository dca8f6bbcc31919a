// Package cmdlinetest runs the spanmutex commands in-process in their tests,
// against the emulator of the test run.
package cmdlinetest

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/spanmutex/spanmutex/emulator"
	"github.com/spanmutex/spanmutex/internal/cmdline"
)

// Command is what the tests of one command share: the emulator of the test
// run, and the command line, run in-process.
type Command struct {
	// Emu is the emulator of this test run; nil under -short.
	Emu *emulator.Emulator
	// Run runs the command line args and returns its exit status.
	Run func(ctx context.Context, s cmdline.Streams, args []string) int
}

// Main is a command's TestMain: unless -short, it starts the emulator the
// tests share (Emu), runs them and stops it. It returns the exit status.
func (c *Command) Main(m *testing.M) int {
	flag.Parse()
	if testing.Short() {
		return m.Run()
	}
	emu, err := StartEmulator()
	if err != nil {
		fmt.Fprintln(os.Stderr, err) // it says how to install the emulator
		return 1
	}
	defer emu.Close()
	c.Emu = emu
	return m.Run()
}

// StartEmulator starts (or attaches to) the emulator a test run shares,
// within two minutes; its error says how to install one.
func StartEmulator() (*emulator.Emulator, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return emulator.Start(ctx)
}

// NeedEmulator skips integration tests under -short.
func (c *Command) NeedEmulator(t *testing.T) {
	t.Helper()
	if c.Emu == nil {
		t.Skip("-short: skipping a test that needs the Cloud Spanner emulator")
	}
}

// NeedBinary skips a test that starts an emulator of its own when there is
// no emulator binary (the tests may be attached to $SPANNER_EMULATOR_HOST).
func (c *Command) NeedBinary(t *testing.T) {
	t.Helper()
	c.NeedEmulator(t)
	if _, err := emulator.FindBinary(); err != nil {
		t.Skip(err)
	}
}

// NewDatabase creates a fresh database holding the mutex table.
func (c *Command) NewDatabase(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := c.Emu.NewDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// Call runs the command line in-process and returns its exit status and
// output.
func (c *Command) Call(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = c.Run(context.Background(), cmdline.Streams{Stdout: &out, Stderr: &errOut}, args)
	return code, out.String(), errOut.String()
}

// RunOnBothBackends runs the command line args in-process twice, each as a
// subtest: with --database db (a database of the test emulator), and with
// neither a database nor $SPANNER_EMULATOR_HOST, the default path, which
// starts an embedded emulator. leak registers the subtest's goroutine-leak
// check. A run must exit 0 and say which backend it used; check then reads
// its output.
func (c *Command) RunOnBothBackends(t *testing.T, db string, leak func(*testing.T), args []string, check func(t *testing.T, stdout, stderr string)) {
	t.Helper()
	c.NeedEmulator(t)
	cases := []struct {
		name string
		host string // $SPANNER_EMULATOR_HOST
		args []string
		want string
	}{
		{"database flag", c.Emu.Host(), []string{"--database", db}, "Using database "},
		{"embedded emulator", "", nil, "Started the Cloud Spanner emulator"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.host == "" {
				c.NeedBinary(t)
			}
			leak(t)
			t.Setenv(cmdline.EmulatorHostEnv, tc.host)
			t.Setenv(cmdline.DatabaseEnv, "")
			code, stdout, stderr := c.Call(t, append(append([]string(nil), args...), tc.args...)...)
			if code != 0 {
				t.Fatalf("%s exited %d; stdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, stdout, stderr)
			}
			if !strings.Contains(stdout, tc.want) {
				t.Errorf("stdout does not contain %q:\n%s", tc.want, stdout)
			}
			check(t, stdout, stderr)
		})
	}
}
