package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spanmutex/spanmutex/internal/cmdline"
)

// TestUsageErrors feeds bad command lines to run in-process: each exits 2,
// writes nothing on stdout, and names the problem on stderr. None of them
// connects anywhere: validation comes first.
func TestUsageErrors(t *testing.T) {
	const db = "projects/spanmutex-test/instances/spanmutex/databases/exists"
	long := strings.Repeat("a", 257)
	cases := []struct {
		name string
		env  string // $SPANMUTEX_DATABASE
		args []string
		want string // in stderr
	}{
		{"no subcommand", db, nil, "no subcommand"},
		{"unknown subcommand", db, []string{"frobnicate"}, `unknown subcommand "frobnicate"`},
		{"torture, now a command of its own", db, []string{"torture"}, "spanmutex-torture (go run ./cmd/spanmutex-torture)"},
		{"bench, now a command of its own", db, []string{"bench", "--contenders", "1"}, "spanmutex-bench (go run ./cmd/spanmutex-bench)"},
		{"top-level flag", db, []string{"--verbose"}, "unknown flag --verbose"},
		{"help of unknown", db, []string{"help", "frobnicate"}, `unknown subcommand "frobnicate"`},
		{"run without NAME", db, []string{"run"}, "missing NAME"},
		{"run without NAME before --", db, []string{"run", "--", "true"}, "missing NAME"},
		{"run without --", db, []string{"run", "x"}, `missing "-- COMMAND"`},
		{"run with COMMAND but no --", db, []string{"run", "x", "true"}, `missing "--" between NAME and COMMAND`},
		{"run without COMMAND", db, []string{"run", "x", "--"}, "missing COMMAND"},
		{"run with two names", db, []string{"run", "x", "y", "--", "true"}, "more than one NAME"},
		{"empty database", "", []string{"run", "x", "--", "true"}, "no database given"},
		{"empty database flag", db, []string{"run", "--database", "", "x", "--", "true"}, "no database given"},
		{"malformed database", db, []string{"run", "--database", "foo/bar", "x", "--", "true"}, `--database "foo/bar" is malformed`},
		{"malformed database env", "projects/p/instances/i/databases/d", []string{"run", "x", "--", "true"}, "$SPANMUTEX_DATABASE"},
		{"bad instance id", db, []string{"run", "--database", "projects/my-project/instances/I/databases/d1", "x", "--", "true"}, `instance id "I"`},
		{"zero lease", db, []string{"run", "--lease", "0", "x", "--", "true"}, "--lease 0s: must be positive"},
		{"negative lease", db, []string{"run", "--lease", "-1s", "x", "--", "true"}, "--lease -1s: must be positive"},
		{"lease above MaxLease", db, []string{"lock", "--lease", "100000h", "x", "--", "true"}, "--lease 100000h0m0s: must be 100ms to 1h0m0s"},
		{"lease below MinLease", db, []string{"run", "--lease", "1ns", "x", "--", "true"}, "--lease 1ns: must be 100ms to 1h0m0s"},
		{"reset lease above MaxLease", db, []string{"reset", "--lease", "2h", "x"}, "--lease 2h0m0s: must be 100ms to 1h0m0s"},
		{"unparsable lease", db, []string{"run", "--lease", "abc", "x", "--", "true"}, `invalid value "abc" for flag -lease`},
		{"zero max attempts", db, []string{"run", "--max-attempts", "0", "x", "--", "true"}, "--max-attempts 0"},
		{"staleness below lease", db, []string{"run", "--staleness", "1s", "x", "--", "true"}, "--staleness 1s"},
		{"invalid table", db, []string{"run", "--table", "bad-name", "x", "--", "true"}, `--table: invalid table name "bad-name"`},
		{"invalid UTF-8 name", db, []string{"run", "\xff", "--", "true"}, "not valid UTF-8"},
		{"name too long", db, []string{"run", long, "--", "true"}, "257 characters long"},
		{"control character in owner", db, []string{"run", "--owner", "a\nb", "x", "--", "true"}, "--owner"},
		{"unknown flag", db, []string{"run", "--frob", "x", "--", "true"}, "flag provided but not defined: -frob"},
		{"the old --watermark", db, []string{"run", "--watermark", "3s", "x", "--", "true"}, "flag provided but not defined: -watermark (--watermark was renamed --lease)"},
		{"lead without --", db, []string{"lead", "x"}, `missing "-- COMMAND"`},
		{"lead with --owner", db, []string{"lead", "--owner", "o", "x", "--", "true"}, "flag provided but not defined: -owner"},
		{"lead with a bad value", db, []string{"lead", "--value", "a\nb", "x", "--", "true"}, "--value"},
		{"lead with a bad name", db, []string{"lead", long, "--", "true"}, "257 characters long"},
		{"lock with --permits 0", db, []string{"lock", "--permits", "0", "x", "--", "true"}, "--permits 0: must be at least 1: it is the semaphore's size"},
		{"lock with negative --permits", db, []string{"lock", "--permits", "-2", "x", "--", "true"}, "--permits -2: must be at least 1"},
		{"lock with unparsable --permits", db, []string{"lock", "--permits", "many", "x", "--", "true"}, `invalid value "many" for flag -permits`},
		{"lock with --permits and --shared", db, []string{"lock", "--permits", "2", "--shared", "x", "--", "true"}, "--permits goes with neither --shared nor --rw"},
		{"lock with --rw and --permits", db, []string{"lock", "--rw", "x", "--permits", "2", "--", "true"}, "--permits goes with neither --shared nor --rw"},
		{"lock with --weight above --permits", db, []string{"lock", "--permits", "2", "--weight", "3", "x", "--", "true"}, "--weight 3: must be 1 to --permits (2)"},
		{"lock with --weight 0", db, []string{"lock", "--permits", "2", "--weight", "0", "x", "--", "true"}, "--weight 0: must be 1 to --permits (2)"},
		{"lock with --weight alone", db, []string{"lock", "--weight", "2", "x", "--", "true"}, "--weight 2 goes with --permits N"},
		{"lock with --weight and --shared", db, []string{"lock", "--shared", "--weight", "1", "x", "--", "true"}, "--weight 1 goes with --permits N"},
		{"lead with --permits", db, []string{"lead", "--permits", "2", "x", "--", "true"}, "flag provided but not defined: -permits"},
		{"resize without --permits", db, []string{"resize", "x"}, "missing --permits N"},
		{"resize with --permits 0", db, []string{"resize", "--permits", "0", "x"}, "--permits 0: must be at least 1"},
		{"resize without NAME", db, []string{"resize", "--permits", "2"}, "want exactly one NAME, got 0"},
		{"resize with two names", db, []string{"resize", "--permits", "2", "a", "b"}, "want exactly one NAME, got 2"},
		{"resize with a bad name", db, []string{"resize", "--permits", "2", long}, "257 characters long"},
		{"resize with bad table", db, []string{"resize", "--table", "1x", "--permits", "2", "x"}, "invalid table name"},
		{"status with two names", db, []string{"status", "a", "b"}, "too many arguments"},
		{"status with bad table", db, []string{"status", "--table", "1x"}, "invalid table name"},
		{"ddl with bad table", db, []string{"ddl", "--table", "x y"}, "invalid table name"},
		{"ddl with a table too long for its sessions", db, []string{"ddl", "--table", strings.Repeat("x", 121)}, "--table: table name"},
		{"ddl --upgrade with a table too long for its sessions", db, []string{"ddl", "--upgrade", "--table", strings.Repeat("x", 121)}, "use at most 120"},
		{"ddl with an argument", db, []string{"ddl", "Mutexes"}, `unexpected argument "Mutexes"`},
		{"ddl with a bad requests table", db, []string{"ddl", "--requests", "1x"}, "invalid table name"},
		{"ddl with a stream and no tables", db, []string{"ddl", "--change-stream", "S"}, "--change-stream and --watch go together"},
		{"ddl with a bad watched table", db, []string{"ddl", "--change-stream", "S", "--watch", "A,b c"}, "invalid table name"},
		{"demo with too few instances", db, []string{"demo", "--instances", "2"}, "--instances 2"},
		{"demo with slow work", db, []string{"demo", "--work", "5s"}, "--work 5s"},
		{"demo with malformed database", db, []string{"demo", "--database", "x"}, `--database "x" is malformed`},
		{"emulator with an argument", db, []string{"emulator", "now"}, `unexpected argument "now"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(cmdline.DatabaseEnv, tc.env)
			code, stdout, stderr := cli(t, tc.args...)
			if code != exitUsage {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, exitUsage, stderr)
			}
			if !strings.Contains(stderr, tc.want) {
				t.Errorf("stderr does not name the problem %q:\n%s", tc.want, stderr)
			}
			if !strings.Contains(stderr, "--help' for usage") {
				t.Errorf("stderr does not point at the help:\n%s", stderr)
			}
			if strings.Count(stderr, "\n") != 1 {
				t.Errorf("stderr is not one line:\n%s", stderr)
			}
			if stdout != "" {
				t.Errorf("stdout is not empty:\n%s", stdout)
			}
		})
	}
}

// TestRunMissingDatabase points run at a database that does not exist on
// the emulator: exit 1, a message that says so, COMMAND not run, no row.
func TestRunMissingDatabase(t *testing.T) {
	needEmulator(t)
	t.Setenv(cmdline.EmulatorHostEnv, emu.Host())
	name := uniqueName(t)
	file := filepath.Join(t.TempDir(), "ran")
	missing := emu.Instance() + "/databases/never-created"
	code, _, stderr := cli(t, "run", "--database", missing, name, "--", "touch", file)
	if code != exitError {
		t.Errorf("exit %d, want %d; stderr:\n%s", code, exitError, stderr)
	}
	if !strings.Contains(stderr, "does not exist") || !strings.Contains(stderr, missing) {
		t.Errorf("stderr does not say that %s does not exist:\n%s", missing, stderr)
	}
	if _, err := os.Stat(file); err == nil {
		t.Error("COMMAND ran")
	}
	if rows := inspectAll(t, emu.Database(), name); len(rows) != 0 {
		t.Errorf("a row was written to the default database: %+v", rows)
	}
}
