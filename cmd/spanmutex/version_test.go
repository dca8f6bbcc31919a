//go:build unix

package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spanmutex/spanmutex"
)

// TestRunVersionReArms: "run --version V" runs COMMAND once per version:
// a second run of the same version finds it done, a new version runs it
// again with the next token.
func TestRunVersionReArms(t *testing.T) {
	needEmulator(t)
	t.Parallel()
	db, name := newDatabase(t), uniqueName(t)
	file := filepath.Join(t.TempDir(), "ran")
	steps := []struct{ version, want string }{
		{"release-1", "ran here"}, {"release-1", "already done"}, {"release-2", "ran here"}, {"release-2", "already done"},
	}
	for i, st := range steps {
		p := startProcess(t, []string{"FILE=" + file}, "run", "--database", db, "--version", st.version, name, "--",
			"sh", "-c", `echo "$SPANMUTEX_TOKEN" >> "$FILE"`)
		if code := p.wait(t, 60*time.Second); code != 0 || !strings.Contains(p.stderr.String(), st.want) {
			t.Fatalf("step %d (%s): exit %d, want 0 and %q; stderr:\n%s", i, st.version, code, st.want, p.stderr.String())
		}
	}
	if lines := readLines(t, file); strings.Join(lines, ",") != "1,2" {
		t.Errorf("COMMAND wrote tokens %q; want 1 then 2, once per version", lines)
	}
	if r := inspect(t, db, name); r.State != spanmutex.StateDone || r.Attempts != 1 || r.Version != "release-2" {
		t.Errorf("row is %s after %d attempts at version %q; want DONE after 1 at release-2", r.State, r.Attempts, r.Version)
	}
	p := startProcess(t, nil, "status", "--database", db, name)
	if code := p.wait(t, 30*time.Second); code != 0 || !strings.Contains(p.stdout.String(), "VERSION") || !strings.Contains(p.stdout.String(), "release-2") {
		t.Errorf("status: exit %d; stdout does not show the version:\n%s", code, p.stdout.String())
	}
}

// TestDDLUpgrade prints the ALTER TABLE statements for the columns added
// since the first release, and the CREATE TABLE of the sessions table.
func TestDDLUpgrade(t *testing.T) {
	code, stdout, stderr := cli(t, "ddl", "--upgrade", "--table", "Locks")
	want := "ALTER TABLE Locks ADD COLUMN LeaseMicros INT64;\n\nALTER TABLE Locks ADD COLUMN Version STRING(256);\n\nALTER TABLE Locks ADD COLUMN Queued BOOL;\n\n" +
		"ALTER TABLE LocksQueue ADD COLUMN LeaseMicros INT64;\n\nALTER TABLE LocksQueue ADD COLUMN WakeAddr STRING(64);\n\n" +
		"ALTER TABLE Locks ADD COLUMN Permits INT64;\n\nALTER TABLE LocksQueue ADD COLUMN Permits INT64;\n\nALTER TABLE LocksQueue ADD COLUMN Token INT64;\n\n" +
		"ALTER TABLE Locks ADD COLUMN Session STRING(36);\n\nALTER TABLE LocksQueue ADD COLUMN Session STRING(36);\n\n" +
		"CREATE TABLE LocksSessions (\n  SessionID STRING(36) NOT NULL,\n  Owner STRING(256),\n" +
		"  CreatedAt TIMESTAMP NOT NULL OPTIONS (allow_commit_timestamp = true),\n  RenewedAt TIMESTAMP NOT NULL OPTIONS (allow_commit_timestamp = true),\n" +
		"  LeaseMicros INT64 NOT NULL,\n) PRIMARY KEY (SessionID),\n  ROW DELETION POLICY (OLDER_THAN(RenewedAt, INTERVAL 1 DAY));\n"
	if code != exitOK || stdout != want {
		t.Errorf("ddl --upgrade: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	code, stdout, stderr = cli(t, "ddl", "--upgrade", "--table", "Locks", "--change-stream", "OrdersStream")
	if want += "\nALTER TABLE CaptureCheckpoints ADD COLUMN LeaseMicros INT64;\n"; code != exitOK || stdout != want {
		t.Errorf("ddl --upgrade --change-stream: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	code, _, stderr = cli(t, "ddl", "--upgrade", "--change-stream", "S", "--watch", "T")
	if code != exitUsage || !strings.Contains(stderr, "leave out --requests and --watch") {
		t.Errorf("ddl --upgrade --watch: exit %d, stderr %q", code, stderr)
	}
}
