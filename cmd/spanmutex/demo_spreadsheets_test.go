package main

import (
	"bytes"
	"context"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/internal/cmdline"
)

// sheetsDemoArgs are small figures for the spreadsheet demo in tests.
var sheetsDemoArgs = []string{"--sheets", "8", "--clicks", "60", "--duplicates", "3", "--workers", "3", "--lease", "1s", "--timeout", "3m"}

// sheetsRow matches a row of the demo's table of checks.
var sheetsRow = regexp.MustCompile(`(?m)^  (PASS|FAIL|INFO)  +(.+?)  +(.*)$`)

// sheetsTable returns the demo's table: verdict and detail by check.
func sheetsTable(t *testing.T, stdout string) map[string][2]string {
	t.Helper()
	rows := map[string][2]string{}
	for _, m := range sheetsRow.FindAllStringSubmatch(stdout, -1) {
		rows[m[2]] = [2]string{m[1], m[3]}
	}
	if len(rows) == 0 {
		t.Fatalf("no table of checks in the output:\n%s", stdout)
	}
	return rows
}

// sheetsDatabase creates a database with the mutex and requests tables.
func sheetsDatabase(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	reqs, err := ddl.RequestsStatements(ddl.DefaultRequestsTable)
	if err != nil {
		t.Fatal(err)
	}
	db, err := emu.NewDatabase(ctx, reqs...)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// TestDemoSpreadsheets runs "spanmutex demo spreadsheets" in-process with
// small figures, against a database of the test emulator and on an
// embedded emulator of its own, and checks its table.
func TestDemoSpreadsheets(t *testing.T) {
	needEmulator(t)
	runOnBothBackends(t, sheetsDatabase(t), noSheetsLeak, append([]string{"demo", "spreadsheets"}, sheetsDemoArgs...), func(t *testing.T, stdout, _ string) {
		for _, want := range []string{"DIED in the middle of the", "Summary: all 11 checks passed: 68 requests"} {
			if !strings.Contains(stdout, want) {
				t.Errorf("stdout does not contain %q:\n%s", want, stdout)
			}
		}
		rows := sheetsTable(t, stdout)
		for check, detail := range map[string]string{
			"every HTTP call answered as planned":                      "68 accepted (202) of 8 creates and 60 clicks; 0 unexpected answers",
			"every request finished: complete, or error with a reason": "68 complete, 0 error",
			"none lost: every accepted request exists and finished":    "0 of 68 accepted requests missing",
			"none stuck: nothing new or in-progress":                   "0 new, 0 in-progress",
			"zero double creates":                                      "0 in ",
			"zero updates before their create":                         "0 in ",
			"zero concurrent writers on one sheet":                     "0 in ",
			"zero stale-token writes":                                  "0 in ",
			"duplicate creates refused with 409":                       "3 of 3 refused; 8 of 8 sheets have exactly one create request",
			"every completed request is in its sheet, once":            "8 of 8 sheets created; clicks of completed updates: 0 missing, 0 applied more than once",
			"the killed worker's claim was recovered":                  "complete under a higher token",
		} {
			got, ok := rows[check]
			if !ok || got[0] != "PASS" || !strings.Contains(got[1], detail) {
				t.Errorf("check %q: got %q, want PASS with %q", check, got, detail)
			}
		}
		if got := rows["clicks grouped into updates"]; !strings.Contains(got[1], "60 clicks applied in") {
			t.Errorf("grouping row: %q", got)
		}
		if got := rows["throughput"]; !strings.Contains(got[1], "68 requests in") {
			t.Errorf("throughput row: %q", got)
		}
	})
}

// TestDemoSpreadsheetsCatchesZombieWrites breaks the demo on purpose: the
// killed worker, when it wakes up, writes to its sheet with its old token,
// as a handler that ignores its lost lease would. The store sees a write
// with a token lower than the one the recovering worker wrote with, and the
// demo must fail with that check.
func TestDemoSpreadsheetsCatchesZombieWrites(t *testing.T) {
	needEmulator(t)
	noSheetsLeak(t)
	t.Setenv(cmdline.EmulatorHostEnv, emu.Host())
	fs, o := sheetsDemoFlags()
	if err := fs.Parse(append(sheetsDemoArgs, "--database", sheetsDatabase(t))); err != nil {
		t.Fatal(err)
	}
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	o.zombieWrites = true
	var out, errOut bytes.Buffer
	code := runSheetsDemo(context.Background(), streams{Stdout: &out, Stderr: &errOut}, o)
	stdout := out.String()
	if code != exitError {
		t.Fatalf("exit %d, want %d; stdout:\n%s\nstderr:\n%s", code, exitError, stdout, errOut.String())
	}
	rows := sheetsTable(t, stdout)
	if got := rows["zero stale-token writes"]; got[0] != "FAIL" || !strings.Contains(got[1], "stale token on sheet") {
		t.Errorf("the stale-token check: got %q, want FAIL naming the write:\n%s", got, stdout)
	}
	for _, check := range []string{"zero concurrent writers on one sheet", "none lost: every accepted request exists and finished"} {
		if got := rows[check]; got[0] != "PASS" {
			t.Errorf("check %q: got %q, want PASS: the zombie broke only fencing", check, got)
		}
	}
	if !strings.Contains(stdout, "Summary: FAILED") {
		t.Errorf("no failed summary:\n%s", stdout)
	}
}

// TestDemoSpreadsheetsWithoutRequestsTable points the demo at a database
// that has the mutex tables but no requests table: it says so once, with
// how to create it, and exits 1 before sending anything.
func TestDemoSpreadsheetsWithoutRequestsTable(t *testing.T) {
	needEmulator(t)
	noSheetsLeak(t)
	t.Setenv(cmdline.EmulatorHostEnv, emu.Host())
	code, stdout, stderr := cli(t, "demo", "spreadsheets", "--database", newDatabase(t))
	if code != exitError || !strings.Contains(stderr, "spanmutex ddl --requests Requests") {
		t.Errorf("exit %d; stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if strings.Contains(stdout, "calls sent") {
		t.Errorf("the demo sent load without a requests table:\n%s", stdout)
	}
}

// TestDemoSpreadsheetsUsage checks that bad flags are usage errors (exit 2)
// that name the flag, before anything connects.
func TestDemoSpreadsheetsUsage(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--workers", "1"}, "--workers 1: want 2 to 64"},
		{[]string{"--sheets", "0"}, "--sheets 0: want 1 to 100000"},
		{[]string{"--clicks", "-1"}, "--clicks -1"},
		{[]string{"--duplicates", "11", "--sheets", "1"}, "--duplicates 11"},
		{[]string{"--senders", "0"}, "--senders 0"},
		{[]string{"--write", "3s", "--lease", "2s"}, "--write 3s: must be at least 0 and below --lease (2s)"},
		{[]string{"--timeout", "0s"}, "--timeout 0s"},
		{[]string{"--database", "nonsense"}, `--database "nonsense" is malformed`},
		{[]string{"extra"}, `unexpected argument "extra"`},
		{[]string{"--no-such-flag"}, "flag provided but not defined"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, stdout, stderr := cli(t, append([]string{"demo", "spreadsheets"}, tc.args...)...)
			if code != exitUsage || !strings.Contains(stderr, tc.want) || !strings.Contains(stderr, "spanmutex demo spreadsheets --help") || stdout != "" {
				t.Errorf("exit %d, want %d with %q; stdout:\n%s\nstderr:\n%s", code, exitUsage, tc.want, stdout, stderr)
			}
		})
	}
	// The scenario goes first.
	code, _, stderr := cli(t, "demo", "--instances", "3", "spreadsheets")
	if code != exitUsage || !strings.Contains(stderr, "put the scenario first") {
		t.Errorf("demo --instances 3 spreadsheets: exit %d, stderr:\n%s", code, stderr)
	}
	// Help of the scenario, two ways.
	for _, args := range [][]string{{"demo", "spreadsheets", "--help"}, {"demo", "spreadsheets", "-h"}} {
		code, stdout, stderr := cli(t, args...)
		for _, want := range []string{"Usage: spanmutex demo spreadsheets [flags]", "--sheets int", "(default 200)", "--clicks int", "(default 2000)", "--kill", "Exit status:"} {
			if code != exitOK || stderr != "" || !strings.Contains(stdout, want) {
				t.Errorf("%v: exit %d, no %q in:\n%s%s", args, code, want, stdout, stderr)
			}
		}
	}
}

// TestSheetsPlan checks the load's plan: every call planned once, and each
// sheet's create before its other calls.
func TestSheetsPlan(t *testing.T) {
	for seed := range uint64(20) {
		ops := sheetsPlan(rand.New(rand.NewPCG(seed, seed)), 30, 300, 12)
		if len(ops) != 342 {
			t.Fatalf("seed %d: %d calls, want 342", seed, len(ops))
		}
		created := map[int]bool{}
		clicks := map[int]bool{}
		dups := 0
		for i, op := range ops {
			switch op.kind {
			case opCreateSheet:
				if created[op.sheet] {
					t.Fatalf("seed %d: sheet %d created twice", seed, op.sheet)
				}
				created[op.sheet] = true
			case opClick:
				clicks[op.click] = true
				fallthrough
			case opDuplicate:
				if !created[op.sheet] {
					t.Fatalf("seed %d: call %d on sheet %d comes before its create", seed, i, op.sheet)
				}
				if op.kind == opDuplicate {
					dups++
				}
			}
		}
		if len(created) != 30 || len(clicks) != 300 || dups != 12 {
			t.Fatalf("seed %d: %d creates, %d distinct clicks, %d duplicates", seed, len(created), len(clicks), dups)
		}
	}
}

// noSheetsLeak fails the test if goroutines of the spreadsheet demo are
// still running a few seconds after it ends.
func noSheetsLeak(t *testing.T) {
	t.Helper()
	noGoroutinesOf(t, "the spreadsheet demo", "main.(*sheetsDemo)", "main.(*sheetsService)", "main.(*sheetsWorker)", "sheets.(*Server)")
}
