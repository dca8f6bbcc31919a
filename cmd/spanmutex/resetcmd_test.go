//go:build unix

package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spanmutex/spanmutex"
	"github.com/spanmutex/spanmutex/internal/cmdline"
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

// TestResetRefusesSharedRows: reset (and reset --force) of a semaphore's
// or reader-writer lock's row is refused on one line, with "spanmutex:"
// once, that names the kind found (the library said "a Semaphore's or
// RWLock's", under "spanmutex: table Mutexes: spanmutex:"); the row is
// unchanged.
func TestResetRefusesSharedRows(t *testing.T) {
	needEmulator(t)
	t.Setenv(cmdline.EmulatorHostEnv, emu.Host())
	db, base := newDatabase(t), uniqueName(t)
	sem, rw := base+"-sem", base+"-rw"
	for _, args := range [][]string{{"--permits", "5", sem}, {"--rw", rw}} {
		if code, _, stderr := cli(t, append(append([]string{"lock", "--database", db}, args...), "--", "true")...); code != exitOK {
			t.Fatalf("lock %q: exit %d; stderr:\n%s", args, code, stderr)
		}
	}
	const runOnce = "not a run-once section: reset re-arms only those ('spanmutex run'); "
	for _, tc := range []struct {
		name, want string
	}{
		{sem, `spanmutex: "` + sem + `" is a semaphore of 5 permits, ` + runOnce +
			"a semaphore needs no reset: a holder silent past its lease loses its permits to the next waiter"},
		{rw, `spanmutex: "` + rw + `" is a reader-writer lock, ` + runOnce +
			"a reader-writer lock needs no reset: a holder silent past its lease loses it to the next waiter"},
	} {
		before := inspect(t, db, tc.name)
		for _, force := range [][]string{nil, {"--force"}} {
			args := append(append([]string{"reset", "--database", db}, force...), tc.name)
			code, stdout, stderr := cli(t, args...)
			if code != exitError || stdout != "" || stderr != tc.want+"\n" {
				t.Errorf("%q: exit %d, stdout %q, stderr:\n%s\nwant exit %d and the one line:\n%s", args, code, stdout, stderr, exitError, tc.want)
			}
		}
		if after := inspect(t, db, tc.name); after.State != spanmutex.StateShared || after.Token != before.Token || !after.UpdatedAt.Equal(before.UpdatedAt) {
			t.Errorf("%s: the row changed: %+v, then %+v", tc.name, before, after)
		}
	}
}
