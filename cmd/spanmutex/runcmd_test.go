//go:build unix

package main

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spanmutex/spanmutex"
)

// TestRunAcrossProcesses races 8 spanmutex processes on one name: COMMAND
// runs in exactly one of them and the other 7 report it already done.
func TestRunAcrossProcesses(t *testing.T) {
	needEmulator(t)
	t.Parallel()
	db, name := newDatabase(t), uniqueName(t)
	file := filepath.Join(t.TempDir(), "ran")
	const n = 8
	procs := make([]*process, n)
	for i := range procs {
		// The sleep is COMMAND's work, so that the others find it running.
		procs[i] = startProcess(t, []string{"FILE=" + file},
			"run", "--database", db, name, "--", "sh", "-c", `echo "$SPANMUTEX_TOKEN $SPANMUTEX_NAME" >> "$FILE"; sleep 0.3`)
	}
	ranHere, alreadyDone := 0, 0
	for i, p := range procs {
		if code := p.wait(t, 60*time.Second); code != 0 {
			t.Errorf("process %d exited %d; stderr:\n%s", i, code, p.stderr.String())
		}
		switch stderr := p.stderr.String(); {
		case strings.Contains(stderr, "ran here"):
			ranHere++
		case strings.Contains(stderr, "already done"):
			alreadyDone++
		default:
			t.Errorf("process %d says neither 'ran here' nor 'already done':\n%s", i, stderr)
		}
	}
	if ranHere != 1 || alreadyDone != n-1 {
		t.Errorf("%d processes ran COMMAND and %d found it already done; want 1 and %d", ranHere, alreadyDone, n-1)
	}
	if lines := readLines(t, file); len(lines) != 1 || lines[0] != "1 "+name {
		t.Errorf("COMMAND wrote %q; want exactly one line %q", lines, "1 "+name)
	}
	if r := inspect(t, db, name); r.State != spanmutex.StateDone || r.Token != 1 {
		t.Errorf("row is %s with token %d; want DONE with token 1", r.State, r.Token)
	}
}

// TestRunLosersWokenWhenDone: 8 processes race, listening for wake-ups by
// default (on the host's own address) or at --listen; the one that runs
// COMMAND (3 s) records DONE and wakes the others, which exit at once
// instead of at their next poll (by then up to 2 s apart).
func TestRunLosersWokenWhenDone(t *testing.T) {
	needEmulator(t)
	for _, tc := range []struct {
		name   string
		listen []string
	}{
		{"Default", nil},
		{"ListenFlag", []string{"--listen", "127.0.0.1:0"}},
	} {
		t.Run(tc.name, func(t *testing.T) { runLosersWoken(t, tc.listen) })
	}
}

func runLosersWoken(t *testing.T, listen []string) {
	db, name := newDatabase(t), uniqueName(t)
	end := filepath.Join(t.TempDir(), "end")
	const n = 8
	procs := make([]*process, n)
	for i := range procs {
		args := append(append([]string{"run"}, listen...), "--database", db, name, "--", "sh", "-c", `sleep 3; date +%s%N > "$END"`)
		procs[i] = startProcess(t, []string{"END=" + end}, args...)
	}
	var delays []time.Duration
	for i, p := range procs {
		if code := p.wait(t, 60*time.Second); code != 0 {
			t.Fatalf("process %d exited %d; stderr:\n%s", i, code, p.stderr.String())
		}
	}
	lines := readLines(t, end)
	if len(lines) != 1 {
		t.Fatalf("COMMAND ran %d times; want once", len(lines))
	}
	ns, err := strconv.ParseInt(lines[0], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	commandEnded := time.Unix(0, ns)
	for _, p := range procs {
		if strings.Contains(p.stderr.String(), "already done") {
			delays = append(delays, p.exited.Sub(commandEnded))
		}
	}
	slices.Sort(delays)
	if len(delays) != n-1 {
		t.Fatalf("%d processes found it already done; want %d", len(delays), n-1)
	}
	t.Logf("the %d losers exited %v to %v (median %v) after the winner's COMMAND ended (DONE's commit and the process exits included)",
		len(delays), delays[0].Round(time.Millisecond), delays[len(delays)-1].Round(time.Millisecond), delays[len(delays)/2].Round(time.Millisecond))
	if worst := delays[len(delays)-1]; worst > time.Second {
		t.Errorf("a loser exited %v after COMMAND ended: not woken (its polls are up to 2 s apart by then)", worst)
	}
}

// TestRunTakeover kills a holder with SIGKILL mid-COMMAND: a second process,
// started right away, takes over only after the lease by Spanner's
// clock, with a higher token, and runs COMMAND.
func TestRunTakeover(t *testing.T) {
	needEmulator(t)
	t.Parallel()
	db, name, dir := newDatabase(t), uniqueName(t), t.TempDir()
	ready, file := filepath.Join(dir, "READY"), filepath.Join(dir, "ran")
	const lease = 3 * time.Second

	holder := startProcess(t, []string{"READY=" + ready},
		"run", "--database", db, "--lease", lease.String(), name, "--", "sh", "-c", `touch "$READY"; exec sleep 60`)
	waitForFile(t, holder, ready, 30*time.Second)
	holder.killGroup()
	if code := holder.wait(t, 10*time.Second); code != -1 {
		t.Fatalf("killed holder exited %d; want death by signal", code)
	}
	second := startProcess(t, []string{"FILE=" + file},
		"run", "--database", db, "--lease", lease.String(), name, "--", "sh", "-c", `echo ran >> "$FILE"`)
	// The holder renewed its lease until it died: read its last renewal
	// now that it can write no more.
	before := inspect(t, db, name)
	if before.State != spanmutex.StateStarted {
		t.Fatalf("the dead holder's row is %s; want STARTED (no takeover yet)", before.State)
	}

	if code := second.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("second process exited %d; stderr:\n%s", code, second.stderr.String())
	}
	if !strings.Contains(second.stderr.String(), "ran here") {
		t.Errorf("second process's stderr does not say it ran here:\n%s", second.stderr.String())
	}
	if lines := readLines(t, file); len(lines) != 1 || lines[0] != "ran" {
		t.Errorf("COMMAND wrote %q; want one line \"ran\"", lines)
	}
	after := inspect(t, db, name)
	if after.State != spanmutex.StateDone || after.Token <= before.Token {
		t.Errorf("row is %s with token %d; want DONE with a token above %d", after.State, after.Token, before.Token)
	}
	// Spanner's clock: the takeover's commit timestamp against the dead
	// holder's last renewal. The second process started right after the
	// kill, so this also shows that it waited.
	if gap := after.StartedAt.Sub(before.RenewedAt); gap < lease {
		t.Errorf("takeover at %v, %v after the holder's renewal at %v; want at least the %v lease",
			after.StartedAt, gap, before.RenewedAt, lease)
	}
}

// TestRunExitStatus checks the exit statuses of run: COMMAND's own when it
// fails, 75 once the attempts are used up, 0 when already done.
func TestRunExitStatus(t *testing.T) {
	needEmulator(t)
	t.Parallel()
	db := newDatabase(t)

	failing := uniqueName(t) + "-failing"
	steps := []struct {
		flags      []string
		want       int
		wantState  spanmutex.State
		attempts   int64
		wantStderr string
	}{
		{nil, 7, spanmutex.StateFailed, 1, "exit status 7"},
		{[]string{"--max-attempts", "2"}, 7, spanmutex.StateFailed, 2, "exit status 7"},
		{[]string{"--max-attempts", "2"}, exitExhausted, spanmutex.StateFailed, 2, "gave up after 2 of 2 attempts"},
	}
	for i, st := range steps {
		args := append(append([]string{"run", "--database", db}, st.flags...), failing, "--", "sh", "-c", "exit 7")
		p := startProcess(t, nil, args...)
		if code := p.wait(t, 60*time.Second); code != st.want {
			t.Fatalf("step %d: exit %d, want %d; stderr:\n%s", i, code, st.want, p.stderr.String())
		}
		if !strings.Contains(p.stderr.String(), st.wantStderr) {
			t.Errorf("step %d: stderr does not say %q:\n%s", i, st.wantStderr, p.stderr.String())
		}
		if r := inspect(t, db, failing); r.State != st.wantState || r.Attempts != st.attempts {
			t.Errorf("step %d: row is %s after %d attempts; want %s after %d", i, r.State, r.Attempts, st.wantState, st.attempts)
		}
	}

	done := uniqueName(t) + "-done"
	for i, want := range []string{"ran here", "already done"} {
		p := startProcess(t, nil, "run", "--database", db, done, "--", "true")
		if code := p.wait(t, 60*time.Second); code != 0 {
			t.Fatalf("run %d of %q: exit %d; stderr:\n%s", i, done, code, p.stderr.String())
		}
		if !strings.Contains(p.stderr.String(), want) {
			t.Errorf("run %d of %q: stderr does not say %q:\n%s", i, done, want, p.stderr.String())
		}
	}
}

// TestRunForwardsSignals sends SIGTERM to spanmutex while COMMAND runs, as
// a pod eviction does: COMMAND receives it, its exit status is spanmutex's,
// and the row is given back (NEEDED, the attempt not counted, the signal
// recorded). Evictions never use up the attempts: with --max-attempts 1,
// after two interrupted runs (one COMMAND traps the signal and exits 3, one
// ignores it and is killed after --grace), a third run completes.
func TestRunForwardsSignals(t *testing.T) {
	needEmulator(t)
	t.Parallel()
	db, name, dir := newDatabase(t), uniqueName(t), t.TempDir()
	ready, file := filepath.Join(dir, "READY"), filepath.Join(dir, "got")
	cases := []struct {
		script    string
		want      int
		wantError string
	}{
		{`trap 'echo got-term >> "$FILE"; exit 3' TERM; touch "$READY"; while :; do sleep 0.1; done`, 3, "which exited with status 3"},
		{`trap 'echo got-term >> "$FILE"' TERM; touch "$READY"; while :; do sleep 0.1; done`, 128 + 9, "was killed (SIGKILL) after the 1s grace"},
	}
	for i, tc := range cases {
		_ = os.Remove(ready)
		p := startProcess(t, []string{"READY=" + ready, "FILE=" + file},
			"run", "--database", db, "--max-attempts", "1", "--grace", "1s", name, "--", "sh", "-c", tc.script)
		waitForFile(t, p, ready, 30*time.Second)
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if code := p.wait(t, 30*time.Second); code != tc.want {
			t.Fatalf("run %d: exit %d, want %d; stderr:\n%s", i, code, tc.want, p.stderr.String())
		}
		if !strings.Contains(p.stderr.String(), "is given back: NEEDED, this attempt not counted") {
			t.Errorf("run %d: stderr does not say the row was given back:\n%s", i, p.stderr.String())
		}
		r := inspect(t, db, name)
		if r.State != spanmutex.StateNeeded || r.Attempts != 0 || !strings.Contains(r.LastError, "SIGTERM was sent to spanmutex run") ||
			!strings.Contains(r.LastError, tc.wantError) {
			t.Errorf("run %d: row is %s after %d attempts with last error %q; want NEEDED after 0, saying SIGTERM and %q",
				i, r.State, r.Attempts, r.LastError, tc.wantError)
		}
	}
	if lines := readLines(t, file); len(lines) != 2 || lines[0] != "got-term" || lines[1] != "got-term" {
		t.Errorf("COMMAND wrote %q; want \"got-term\" twice", lines)
	}
	p := startProcess(t, nil, "run", "--database", db, "--max-attempts", "1", name, "--", "true")
	if code := p.wait(t, 30*time.Second); code != 0 || !strings.Contains(p.stderr.String(), "ran here") {
		t.Fatalf("run after two interruptions: exit %d; stderr:\n%s", code, p.stderr.String())
	}
	if r := inspect(t, db, name); r.State != spanmutex.StateDone || r.Attempts != 1 || r.Token != 3 {
		t.Errorf("row is %s after %d attempts, token %d; want DONE after 1, token 3", r.State, r.Attempts, r.Token)
	}
}

// TestRunLeaseLost freezes a holder (SIGSTOP) past the lease, so that
// another process takes over; when it resumes, it finds its lease lost,
// sends COMMAND SIGTERM, records nothing and exits 1.
func TestRunLeaseLost(t *testing.T) {
	needEmulator(t)
	t.Parallel()
	db, name := newDatabase(t), uniqueName(t)
	ran := filepath.Join(t.TempDir(), "ran")
	holder, second, got := loseToTakeover(t, "run", db, name, []string{"FILE=" + ran}, `echo ran >> "$FILE"`)
	if !strings.Contains(second.stderr.String(), "ran here") {
		t.Fatalf("second process: stderr does not say \"ran here\":\n%s", second.stderr.String())
	}
	if code := holder.wait(t, 30*time.Second); code != exitError {
		t.Errorf("resumed holder exited %d, want %d; stderr:\n%s", code, exitError, holder.stderr.String())
	}
	for _, want := range []string{"sent COMMAND SIGTERM", "was lost meanwhile, so nothing was recorded"} {
		if !strings.Contains(holder.stderr.String(), want) {
			t.Errorf("holder's stderr does not say %q:\n%s", want, holder.stderr.String())
		}
	}
	if lines := readLines(t, got); len(lines) != 1 || lines[0] != "got-term" {
		t.Errorf("the holder's COMMAND wrote %q; want \"got-term\"", lines)
	}
	if r := inspect(t, db, name); r.State != spanmutex.StateDone || r.Token != 2 {
		t.Errorf("row is %s with token %d; want the takeover's DONE with token 2", r.State, r.Token)
	}
}
