package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/spanmutex/spanmutex/internal/cmdline"
	"github.com/spanmutex/spanmutex/internal/defaults"
)

// TestStatus shows a DONE row with its name, state and token, and a row
// that does not exist as an empty table.
func TestStatus(t *testing.T) {
	needEmulator(t)
	t.Setenv(cmdline.EmulatorHostEnv, emu.Host())
	db, name := newDatabase(t), uniqueName(t)
	if code, _, stderr := cli(t, "run", "--database", db, "--owner", "status-test", name, "--", "true"); code != 0 {
		t.Fatalf("run: exit %d; stderr:\n%s", code, stderr)
	}

	code, stdout, stderr := cli(t, "status", "--database", db)
	if code != 0 {
		t.Fatalf("status: exit %d; stderr:\n%s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "NAME") {
		t.Fatalf("want a header and one row, got:\n%s", stdout)
	}
	row := regexp.MustCompile(`^` + regexp.QuoteMeta(name) + `\s+DONE\s+status-test\s+1\s+1\s+\d+\.\ds\s+-$`)
	if !row.MatchString(lines[1]) {
		t.Errorf("row %q does not match %v", lines[1], row)
	}

	t.Setenv(cmdline.DatabaseEnv, db) // the default for --database
	code, stdout, stderr = cli(t, "status", "no-such-name")
	if code != 0 || strings.Count(stdout, "\n") != 1 || !strings.Contains(stderr, "never been started") {
		t.Errorf("status of a missing name: exit %d, stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}

// TestDDL prints the schema, under the default and under another name.
func TestDDL(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "CREATE TABLE Mutexes ("},
		{nil, "CREATE TABLE MutexesSessions ("},
		{[]string{"--table", "JobLocks"}, "CREATE TABLE JobLocks ("},
		{[]string{"--table", "JobLocks"}, "CREATE TABLE JobLocksSessions ("},
	} {
		code, stdout, stderr := cli(t, append([]string{"ddl"}, tc.args...)...)
		if code != 0 || !strings.Contains(stdout, tc.want) || !strings.Contains(stdout, "PRIMARY KEY (Name)") || stderr != "" {
			t.Errorf("ddl %v: exit %d, stdout:\n%s\nstderr:\n%s", tc.args, code, stdout, stderr)
		}
	}
}

// TestDDLPostgreSQL prints the PostgreSQL schema: the same tables, with
// quoted identifiers.
func TestDDLPostgreSQL(t *testing.T) {
	code, stdout, stderr := cli(t, "ddl", "--dialect", "postgresql", "--table", "JobLocks", "--requests", "Requests")
	for _, want := range []string{`CREATE TABLE "JobLocks" (`, `CREATE TABLE "JobLocksQueue" (`, `CREATE TABLE "Fences" (`, `CREATE TABLE "JobLocksSessions" (`, `CREATE TABLE "Requests" (`,
		`PRIMARY KEY ("Name")`, `"RenewedAt" spanner.commit_timestamp`, `WHERE "CreateOf" IS NOT NULL;`} {
		if code != 0 || !strings.Contains(stdout, want) || stderr != "" {
			t.Errorf("ddl --dialect postgresql: want %q; exit %d, stdout:\n%s\nstderr:\n%s", want, code, stdout, stderr)
		}
	}
	code, stdout, _ = cli(t, "ddl", "--dialect", "postgresql", "--upgrade", "--table", "Locks")
	if code != 0 || !strings.Contains(stdout, `ALTER TABLE "LocksQueue" ADD COLUMN "WakeAddr" varchar(64);`) ||
		!strings.Contains(stdout, `ALTER TABLE "Locks" ADD COLUMN "Session" varchar(36);`) || !strings.Contains(stdout, `CREATE TABLE "LocksSessions" (`) {
		t.Errorf("ddl --dialect postgresql --upgrade: exit %d, stdout:\n%s", code, stdout)
	}
	code, stdout, _ = cli(t, "ddl", "--dialect", "postgresql", "--change-stream", "OrdersStream", "--watch", "Orders,OrderItems")
	if code != 0 || !strings.Contains(stdout, `CREATE CHANGE STREAM "OrdersStream" FOR "Orders", "OrderItems";`) || !strings.Contains(stdout, `CREATE TABLE "CaptureCheckpoints" (`) {
		t.Errorf("ddl --dialect postgresql --change-stream: exit %d, stdout:\n%s", code, stdout)
	}
	// "--dialect", not just "--": every usage error ends "Run '... --help' for usage."
	if code, _, stderr := cli(t, "ddl", "--dialect", "mysql"); code != exitUsage || !strings.Contains(stderr, "--dialect") {
		t.Errorf("ddl --dialect mysql: exit %d, stderr:\n%s", code, stderr)
	}
}

// TestHelp checks that every way of asking for help works, on stdout with
// exit 0, and that the help is complete.
func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		code, stdout, stderr := cli(t, args...)
		if code != 0 || stderr != "" {
			t.Errorf("%v: exit %d, stderr:\n%s", args, code, stderr)
		}
		for _, c := range subcommands() {
			if !strings.Contains(stdout, "\n  "+c.name+" ") {
				t.Errorf("%v does not list subcommand %q:\n%s", args, c.name, stdout)
			}
		}
	}
	wants := map[string][]string{
		"run":      {"Usage: spanmutex run [flags] NAME -- COMMAND [ARGS...]", "--lease duration", "(default " + defaults.Lease.String() + ")", "--max-attempts int", "--database string", "--table string", "--owner string", "--staleness duration", "--verbose", "Exit status:", "75", "SPANMUTEX_TOKEN", "Examples:"},
		"ddl":      {"Usage: spanmutex ddl [--table TABLE]", `(default "Mutexes")`, "Examples:"},
		"emulator": {"Usage: spanmutex emulator [flags]", "--fault-injection", "export SPANNER_EMULATOR_HOST", "Examples:"},
		"demo":     {"Usage: spanmutex demo [flags]", "--instances int", "(default 8)", "--lease duration", "Examples:"},
		"help":     {"Usage: spanmutex help [SUBCOMMAND]"},
		"lead":     {"Usage: spanmutex lead [flags] NAME -- COMMAND [ARGS...]", "--value string", "--lease duration", "--listen string"},
		"lock":     {"--owner string", "--lease duration", "--permits int", "--weight int", "(default 1)", "--shared", "--rw", "spanmutex lock --shared index"},
		"resize":   {"Usage: spanmutex resize [flags] --permits N NAME", "--permits int", "--database string", "--table string", "Exit status:", "Examples:"},
		"status":   {"Usage: spanmutex status [flags] [NAME]", "--database string", "--table string", "SHARED", "Examples:"},
	}
	unwants := map[string][]string{
		"lead": {"--owner"}, // a candidate is recorded under its --value
	}
	for _, c := range subcommands() {
		for _, args := range [][]string{{c.name, "--help"}, {c.name, "-h"}, {"help", c.name}} {
			code, stdout, stderr := cli(t, args...)
			if code != 0 || stderr != "" {
				t.Errorf("%v: exit %d, stderr:\n%s", args, code, stderr)
			}
			for _, want := range wants[c.name] {
				if !strings.Contains(stdout, want) {
					t.Errorf("%v does not contain %q:\n%s", args, want, stdout)
				}
			}
			for _, unwanted := range unwants[c.name] {
				if strings.Contains(stdout, unwanted) {
					t.Errorf("%v lists %q, which it does not take:\n%s", args, unwanted, stdout)
				}
			}
		}
	}
}
