package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spanmutex/spanmutex/ddl"
)

// sheetsDemoArgs are small figures for the spreadsheet demo in tests.
var sheetsDemoArgs = []string{"--sheets", "8", "--clicks", "60", "--duplicates", "3", "--workers", "3", "--watermark", "1s", "--timeout", "3m"}

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
	cases := []struct {
		name string
		host string // $SPANNER_EMULATOR_HOST
		args []string
		want string
	}{
		{"database flag", emu.Host(), []string{"--database", sheetsDatabase(t)}, "Using database "},
		{"embedded emulator", "", nil, "Started the Cloud Spanner emulator"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.host == "" {
				needBinary(t)
			}
			t.Setenv(emulatorHostEnv, tc.host)
			t.Setenv(databaseEnv, "")
			code, stdout, stderr := cli(t, append(append([]string{"demo", "spreadsheets"}, sheetsDemoArgs...), tc.args...)...)
			if code != exitOK {
				t.Fatalf("exit %d; stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
			}
			for _, want := range []string{tc.want, "DIED in the middle of the", "Summary: all 11 checks passed: 68 requests"} {
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
}

// TestDemoSpreadsheetsCatchesZombieWrites breaks the demo on purpose: the
// killed worker, when it wakes up, writes to its sheet with its old token,
// as a handler that ignores its lost lease would. The store sees a write
// with a token lower than the one the recovering worker wrote with, and the
// demo must fail with that check.
func TestDemoSpreadsheetsCatchesZombieWrites(t *testing.T) {
	needEmulator(t)
	t.Setenv(emulatorHostEnv, emu.Host())
	fs, o := sheetsDemoFlags()
	if err := fs.Parse(append(sheetsDemoArgs, "--database", sheetsDatabase(t))); err != nil {
		t.Fatal(err)
	}
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	o.zombieWrites = true
	var out, errOut bytes.Buffer
	code := runSheetsDemo(context.Background(), streams{stdout: &out, stderr: &errOut}, o)
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
