//go:build unix

package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestLockExcludesProcesses: 8 "spanmutex lock" processes started at once,
// and 8 "spanmutex lead" processes, each run a COMMAND that appends a begin
// line, works, and appends an end line to one file. Every COMMAND runs, each
// alone: the lines come in begin/end pairs of one token, with tokens
// strictly increasing; a leader's COMMAND sees its --value.
func TestLockExcludesProcesses(t *testing.T) {
	needEmulator(t)
	t.Parallel()
	for _, sub := range []string{"lock", "lead"} {
		t.Run(sub, func(t *testing.T) { excludesProcesses(t, sub) })
	}
}

// excludesProcesses is TestLockExcludesProcesses for subcommand sub.
func excludesProcesses(t *testing.T, sub string) {
	db, name := newDatabase(t), uniqueName(t)
	file := filepath.Join(t.TempDir(), "log")
	const n = 8
	procs := make([]*process, n)
	for i := range procs {
		args := []string{sub, "--database", db}
		if sub == "lead" {
			args = append(args, "--value", fmt.Sprintf("v%d", i))
		}
		// The sleep is COMMAND's work, so that overlaps would show.
		procs[i] = startProcess(t, []string{"FILE=" + file, fmt.Sprintf("ME=%d", i)},
			append(args, name, "--", "sh", "-c",
				`echo "begin $SPANMUTEX_TOKEN $ME $SPANMUTEX_OWNER" >> "$FILE"; sleep 0.2; echo "end $SPANMUTEX_TOKEN $ME" >> "$FILE"; exit $((ME % 3))`)...)
	}
	for i, p := range procs {
		if code := p.wait(t, 3*time.Minute); code != i%3 {
			t.Errorf("process %d exited %d, want COMMAND's %d; stderr:\n%s", i, code, i%3, p.stderr.String())
		}
	}
	lines := readLines(t, file)
	if len(lines) != 2*n {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), 2*n, strings.Join(lines, "\n"))
	}
	seen, last := map[string]bool{}, int64(0)
	for i := 0; i < len(lines); i += 2 {
		b, e := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if b[0] != "begin" || e[0] != "end" || b[1] != e[1] || b[2] != e[2] {
			t.Fatalf("COMMANDs overlapped: lines %d-%d are %q, %q:\n%s", i, i+1, lines[i], lines[i+1], strings.Join(lines, "\n"))
		}
		if sub == "lead" && (len(b) < 4 || b[3] != "v"+b[2]) {
			t.Errorf("line %q: a leader's COMMAND should see its --value v%s as SPANMUTEX_OWNER", lines[i], b[2])
		}
		token, err := strconv.ParseInt(b[1], 10, 64)
		if err != nil || token <= last {
			t.Errorf("token %q after %d: want strictly increasing tokens", b[1], last)
		}
		last = token
		seen[b[2]] = true
	}
	if len(seen) != n {
		t.Errorf("%d distinct processes ran COMMAND, want %d", len(seen), n)
	}
}

// TestLockLostStopsCommand freezes a holder (SIGSTOP) past the lease, so
// that a waiter takes the lock over; when it resumes, it finds the lock
// lost, sends COMMAND SIGTERM, says so and exits 76.
func TestLockLostStopsCommand(t *testing.T) {
	needEmulator(t)
	t.Parallel()
	db, name := newDatabase(t), uniqueName(t)
	ran := filepath.Join(t.TempDir(), "ran")
	holder, _, got := loseToTakeover(t, "lock", db, name, []string{"FILE=" + ran}, `echo "ran $SPANMUTEX_TOKEN" >> "$FILE"`)
	if code := holder.wait(t, 30*time.Second); code != exitLeaseLost {
		t.Errorf("resumed holder exited %d, want %d; stderr:\n%s", code, exitLeaseLost, holder.stderr.String())
	}
	for _, want := range []string{"sent COMMAND SIGTERM", "was lost while COMMAND ran"} {
		if !strings.Contains(holder.stderr.String(), want) {
			t.Errorf("holder's stderr does not say %q:\n%s", want, holder.stderr.String())
		}
	}
	if lines := readLines(t, got); len(lines) != 1 || lines[0] != "got-term" {
		t.Errorf("the holder's COMMAND wrote %q; want \"got-term\"", lines)
	}
	if lines := readLines(t, ran); len(lines) != 1 || lines[0] != "ran 2" {
		t.Errorf("the second COMMAND wrote %q; want \"ran 2\"", lines)
	}
}

// TestLeadCampaignsAgainAfterLosingLeadership freezes a leader past the
// lease, so that another candidate takes over and resigns; when it
// resumes, "lead" stops its COMMAND, campaigns again, and runs COMMAND again
// under the new term's token. A SIGTERM then ends it with COMMAND's status.
func TestLeadCampaignsAgainAfterLosingLeadership(t *testing.T) {
	needEmulator(t)
	t.Parallel()
	db, name := newDatabase(t), uniqueName(t)
	leader, _, got := loseToTakeoverWith(t, "lead", db, name,
		`echo "start $SPANMUTEX_TOKEN" >> "$FILE"; trap 'echo got-term >> "$FILE"; exit 3' TERM; touch "$READY"; while :; do sleep 0.1; done`,
		nil, "true")
	want := []string{"start 1", "got-term", "start 3"} // term 2 was the other candidate's
	waitForLines(t, leader, got, len(want), 30*time.Second)
	if err := leader.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := leader.wait(t, 30*time.Second); code != 3 {
		t.Errorf("lead exited %d, want COMMAND's 3; stderr:\n%s", code, leader.stderr.String())
	}
	want = append(want, "got-term")
	if lines := readLines(t, got); !slices.Equal(lines, want) {
		t.Errorf("COMMAND wrote %q, want %q; stderr:\n%s", lines, want, leader.stderr.String())
	}
	for _, say := range []string{"was lost while COMMAND ran", "campaigning for " + strconv.Quote(name) + " again"} {
		if !strings.Contains(leader.stderr.String(), say) {
			t.Errorf("lead's stderr does not say %q:\n%s", say, leader.stderr.String())
		}
	}
}

// TestLockForwardsSignals sends SIGTERM to "spanmutex lock" while COMMAND
// runs: COMMAND gets it, lock exits with COMMAND's status, and the lock is
// released: the next "lock" gets it at once.
func TestLockForwardsSignals(t *testing.T) {
	needEmulator(t)
	t.Parallel()
	db, name, dir := newDatabase(t), uniqueName(t), t.TempDir()
	ready, got := filepath.Join(dir, "READY"), filepath.Join(dir, "got")
	p := startProcess(t, []string{"READY=" + ready, "FILE=" + got}, "lock", "--database", db, name, "--", "sh", "-c",
		`trap 'echo got-term >> "$FILE"; exit 3' TERM; touch "$READY"; while :; do sleep 0.1; done`)
	waitForFile(t, p, ready, 30*time.Second)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 30*time.Second); code != 3 {
		t.Fatalf("exit %d, want COMMAND's 3; stderr:\n%s", code, p.stderr.String())
	}
	if lines := readLines(t, got); len(lines) != 1 || lines[0] != "got-term" {
		t.Errorf("COMMAND wrote %q; want \"got-term\"", lines)
	}
	began := time.Now()
	next := startProcess(t, nil, "lock", "--database", db, name, "--", "true")
	if code := next.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("next lock: exit %d; stderr:\n%s", code, next.stderr.String())
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Errorf("the next lock took %v: the interrupted one was not released", took)
	}
}
