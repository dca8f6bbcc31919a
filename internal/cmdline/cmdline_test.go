package cmdline

import (
	"fmt"
	"slices"
	"strings"
	"testing"

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
		fs := NewFlagSet("test")
		x := fs.String("x", "def", "")
		pos, code, done := ParseFlags(Streams{}, "test", fs, HelpText{}, tc.args)
		if done || code != 0 || !slices.Equal(pos, tc.wantPos) || *x != tc.wantFlag {
			t.Errorf("%q: positional %q, x=%q, done=%v; want %q, x=%q", tc.args, pos, *x, done, tc.wantPos, tc.wantFlag)
		}
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
		if err := ValidateDatabasePath(path); (err == nil) != ok {
			t.Errorf("ValidateDatabasePath(%q) = %v; want ok=%v", path, err, ok)
		}
	}
}

// TestExplainConnection adds where the client connects to errors that may
// mean Spanner is unreachable, and only to those.
func TestExplainConnection(t *testing.T) {
	t.Setenv(EmulatorHostEnv, "127.0.0.1:1")
	unreachable := fmt.Errorf("spanmutex: table Mutexes: %w", status.Error(codes.DeadlineExceeded, "context deadline exceeded"))
	if got := ExplainConnection(unreachable).Error(); !strings.Contains(got, "SPANNER_EMULATOR_HOST=127.0.0.1:1") {
		t.Errorf("ExplainConnection(%v) = %q; want the emulator host named", unreachable, got)
	}
	other := fmt.Errorf("x: %w", status.Error(codes.PermissionDenied, "no"))
	if got := ExplainConnection(other); got != other {
		t.Errorf("ExplainConnection(%v) = %v; want it unchanged", other, got)
	}
}
