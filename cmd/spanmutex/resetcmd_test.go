//go:build unix

package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spanmutex/spanmutex"
)

// TestResetReArmsAnExhaustedRun: a run that gave up (exit 75) is re-armed by
// "spanmutex reset", and the next run runs COMMAND again; reset refuses a
// live holder and a DONE row, and leaves them unchanged.
func TestResetReArmsAnExhaustedRun(t *testing.T) {
	needEmulator(t)
	t.Parallel()
	db, name, dir := newDatabase(t), uniqueName(t), t.TempDir()
	file := filepath.Join(dir, "ran")

	steps := []struct {
		args []string
		want int
	}{
		{[]string{"run", "--database", db, "--max-attempts", "1", name, "--", "sh", "-c", "exit 7"}, 7},
		{[]string{"run", "--database", db, "--max-attempts", "1", name, "--", "sh", "-c", "exit 7"}, exitExhausted},
		{[]string{"reset", "--database", db, name}, exitOK},
	}
	for i, st := range steps {
		p := startProcess(t, nil, st.args...)
		if code := p.wait(t, 60*time.Second); code != st.want {
			t.Fatalf("step %d (%s): exit %d, want %d; stderr:\n%s", i, st.args[0], code, st.want, p.stderr.String())
		}
		if st.args[0] == "reset" && !strings.Contains(p.stderr.String(), "it was FAILED after 1 attempt(s)") {
			t.Errorf("reset's stderr does not say what it found:\n%s", p.stderr.String())
		}
	}
	if r := inspect(t, db, name); r.State != spanmutex.StateNeeded || r.Attempts != 0 || !strings.Contains(r.LastError, "reset from FAILED") {
		t.Errorf("after reset the row is %s after %d attempts, last error %q; want NEEDED after 0, saying it was reset", r.State, r.Attempts, r.LastError)
	}
	p := startProcess(t, []string{"FILE=" + file}, "run", "--database", db, "--max-attempts", "1", name, "--", "sh", "-c", `echo "$SPANMUTEX_TOKEN" >> "$FILE"`)
	if code := p.wait(t, 60*time.Second); code != 0 || !strings.Contains(p.stderr.String(), "ran here") {
		t.Fatalf("run after reset: exit %d; stderr:\n%s", code, p.stderr.String())
	}
	if lines := readLines(t, file); len(lines) != 1 || lines[0] != "2" {
		t.Errorf("COMMAND after the reset wrote %q; want token 2", lines)
	}

	code, stderr := runToEnd(t, "reset", "--database", db, name)
	if code != exitError || !strings.Contains(stderr, "it is DONE") {
		t.Errorf("reset of a DONE row: exit %d, stderr:\n%s", code, stderr)
	}

	// A live holder.
	held, ready := uniqueName(t)+"-held", filepath.Join(dir, "READY")
	holder := startProcess(t, []string{"READY=" + ready}, "run", "--database", db, held, "--", "sh", "-c", `touch "$READY"; exec sleep 60`)
	waitForFile(t, holder, ready, 30*time.Second)
	code, stderr = runToEnd(t, "reset", "--database", db, held)
	if code != exitError || !strings.Contains(stderr, "a live holder") || !strings.Contains(stderr, "is unchanged") {
		t.Errorf("reset of a live holder: exit %d, stderr:\n%s", code, stderr)
	}
	if r := inspect(t, db, held); r.State != spanmutex.StateStarted {
		t.Errorf("the live holder's row is %s; want STARTED, untouched", r.State)
	}

	// --force evicts it, says whom, and bumps the token.
	owner := inspect(t, db, held).Owner
	code, stderr = runToEnd(t, "reset", "--force", "--database", db, held)
	if code != exitOK || !strings.Contains(stderr, fmt.Sprintf("evicted holder %q (token 1), forced out", owner)) {
		t.Errorf("reset --force of a live-looking holder: exit %d, stderr:\n%s", code, stderr)
	}
	if r := inspect(t, db, held); r.State != spanmutex.StateNeeded || r.Token != 2 {
		t.Errorf("after reset --force the row is %s with token %d; want NEEDED with token 2", r.State, r.Token)
	}
}

// runToEnd runs the binary with args and returns its exit status and stderr.
func runToEnd(t *testing.T, args ...string) (int, string) {
	t.Helper()
	p := startProcess(t, nil, args...)
	code := p.wait(t, 60*time.Second)
	return code, p.stderr.String()
}
