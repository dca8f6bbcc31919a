package main

import (
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestParseFlags checks that flags and positional arguments may mix, and
// that "--" ends the flags.
func TestParseFlags(t *testing.T) {
	cases := []struct {
		args     []string
		wantPos  []string
		wantFlag string
	}{
		{[]string{"a"}, []string{"a"}, "def"},
		{[]string{"--x", "v", "a"}, []string{"a"}, "v"},
		{[]string{"a", "--x", "v"}, []string{"a"}, "v"},
		{[]string{"a", "--x=v", "b"}, []string{"a", "b"}, "v"},
		{[]string{"--", "--x", "v"}, []string{"--x", "v"}, "def"},
		{[]string{"a", "--", "-b"}, []string{"a", "-b"}, "def"},
	}
	for _, tc := range cases {
		fs := newFlagSet("test")
		x := fs.String("x", "def", "")
		pos, code, done := parseFlags(streams{}, "test", fs, helpText{}, tc.args)
		if done || code != 0 || !slices.Equal(pos, tc.wantPos) || *x != tc.wantFlag {
			t.Errorf("%q: positional %q, x=%q, done=%v; want %q, x=%q", tc.args, pos, *x, done, tc.wantPos, tc.wantFlag)
		}
	}
}

// TestSplitCommand splits at the first "--" only.
func TestSplitCommand(t *testing.T) {
	flagArgs, command, ok := splitCommand([]string{"--table", "T", "n", "--", "sh", "--", "x"})
	if !ok || !slices.Equal(flagArgs, []string{"--table", "T", "n"}) || !slices.Equal(command, []string{"sh", "--", "x"}) {
		t.Errorf("got %q %q %v", flagArgs, command, ok)
	}
	if _, _, ok := splitCommand([]string{"n", "sh"}); ok {
		t.Error("found a -- that is not there")
	}
}

// TestValidateDatabasePath checks the database path rules.
func TestValidateDatabasePath(t *testing.T) {
	for path, ok := range map[string]bool{
		"projects/spanmutex-test/instances/spanmutex/databases/db-1a2b3c4d-1":  true,
		"projects/example.com:my-project/instances/prod-1/databases/orders_db": true,
		"projects/my-project/instances/inst/databases/d":                       false, // database id too short
		"projects/p/instances/inst/databases/db1":                              false, // project id too short
		"projects/my-project/instances/Inst/databases/db1":                     false,
		"projects/my-project/instances/inst/databases/db1/":                    false,
		"projects/my-project/instances/inst":                                   false,
		"my-project/inst/db1":                                                  false,
		"":                                                                     false,
	} {
		if err := validateDatabasePath(path); (err == nil) != ok {
			t.Errorf("validateDatabasePath(%q) = %v; want ok=%v", path, err, ok)
		}
	}
}

// TestCommandStatus maps how COMMAND ended to the exit status a shell
// would report.
func TestCommandStatus(t *testing.T) {
	exitErr := func(script string) error {
		err := exec.Command("sh", "-c", script).Run()
		if err == nil {
			t.Fatalf("sh -c %q succeeded", script)
		}
		return fmt.Errorf("section: %w", err)
	}
	cases := []struct {
		err    error
		want   int
		failed bool
	}{
		{exitErr("exit 7"), 7, true},
		{exitErr("kill -TERM $$"), 128 + 15, true},
		{&startError{"x", exec.ErrNotFound}, 127, true},
		{&startError{"x", errors.New("permission denied")}, 126, true},
		{errors.New("other"), 0, false},
	}
	for _, tc := range cases {
		if got, failed := commandStatus(tc.err); got != tc.want || failed != tc.failed {
			t.Errorf("commandStatus(%v) = %d, %v; want %d, %v", tc.err, got, failed, tc.want, tc.failed)
		}
	}
}

// TestFormatting checks the status table's cell formatting.
func TestFormatting(t *testing.T) {
	if got := oneLine("a\n  b\tc", 10); got != "a b c" {
		t.Errorf("oneLine flattened to %q", got)
	}
	if got := oneLine("héllo wörld", 5); got != "héll…" {
		t.Errorf("oneLine cut to %q", got)
	}
	for d, want := range map[time.Duration]string{
		1234 * time.Millisecond:               "1.2s",
		90*time.Second + 400*time.Millisecond: "1m30s",
	} {
		if got := formatAge(d); got != want {
			t.Errorf("formatAge(%v) = %q, want %q", d, got, want)
		}
	}
}

// TestExplainConnection adds where the client connects to errors that may
// mean Spanner is unreachable, and only to those.
func TestExplainConnection(t *testing.T) {
	t.Setenv(emulatorHostEnv, "127.0.0.1:1")
	unreachable := fmt.Errorf("spanmutex: table Mutexes: %w", status.Error(codes.DeadlineExceeded, "context deadline exceeded"))
	if got := explainConnection(unreachable).Error(); !strings.Contains(got, "SPANNER_EMULATOR_HOST=127.0.0.1:1") {
		t.Errorf("explainConnection(%v) = %q; want the emulator host named", unreachable, got)
	}
	other := fmt.Errorf("x: %w", status.Error(codes.PermissionDenied, "no"))
	if got := explainConnection(other); got != other {
		t.Errorf("explainConnection(%v) = %v; want it unchanged", other, got)
	}
}
