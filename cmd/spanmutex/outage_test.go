//go:build unix

package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spanmutex/spanmutex"
	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/emulator"
)

// The outage tests kill (SIGKILL) an emulator of their own while "run" or
// "lock" holds NAME or waits for it, on both dialects, and check what the
// process prints, its exit status, and that it exits within the bound
// doc/cli.md states. Small --lease, --call-timeout and --max-failures keep
// each to seconds.

const (
	outageLease       = 2 * time.Second // --lease of a holder that loses Spanner
	outageCallTimeout = time.Second     // --call-timeout
	outageMaxFailures = 2               // --max-failures of a waiter
	// outageSlack is what a loaded machine (2 shared cores, -race) may add
	// to a bound: process start-up, scheduling.
	outageSlack = 3 * time.Second
)

// TestOutageWhileRunHolds: the lease is lost (renewals fail for --lease),
// COMMAND is sent SIGTERM, FAILED cannot be recorded, and "run" says so,
// exiting 1 as for any lease lost while COMMAND ran.
func TestOutageWhileRunHolds(t *testing.T) {
	onBothDialects(t, func(t *testing.T, e *emulator.Emulator) {
		p, took := killWhileHolding(t, e, "run")
		stderr := p.stderrText(t)
		if code := p.cmd.ProcessState.ExitCode(); code != 1 {
			t.Errorf("exit %d, want 1 (a lease lost while COMMAND ran); stderr:\n%s", code, stderr)
		}
		wantLines(t, stderr,
			`spanmutex: sent COMMAND SIGTERM: "held": lease with token 1 lost: renewals failed for a whole lease (2s)`,
			`spanmutex: COMMAND failed (exit status 143) after it was sent SIGTERM for the lost lease, and how it ended could not be recorded (below): "held" stays STARTED until a later run takes it over, once it has gone unrenewed for its lease (2s), as a new attempt (--max-attempts 3)`,
			`could not record FAILED`)
		if strings.Contains(stderr, "is recorded FAILED") {
			t.Errorf("claims FAILED was recorded:\n%s", stderr)
		}
		checkBound(t, took, outageLease+outageCallTimeout)
	})
}

// TestOutagePausedWhileRunHolds: the emulator is paused (SIGSTOP) past
// the lease, so the lease is lost and COMMAND sent SIGTERM, then resumed:
// FAILED is recorded after all, and "run" says so, exiting 1.
func TestOutagePausedWhileRunHolds(t *testing.T) {
	onBothDialects(t, func(t *testing.T, e *emulator.Emulator) {
		ready := filepath.Join(t.TempDir(), "READY")
		p := startFileProcess(t, e, []string{"READY=" + ready}, "run", "--database", e.Database(),
			"--lease", outageLease.String(), "--call-timeout", "5s",
			"held", "--", "sh", "-c", `touch "$READY"; while :; do sleep 0.1; done`)
		p.waitFor(t, 30*time.Second, func() bool { _, err := os.Stat(ready); return err == nil }, "COMMAND to start")
		if err := syscall.Kill(e.PID(), syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = syscall.Kill(e.PID(), syscall.SIGCONT) })
		p.waitFor(t, 30*time.Second, func() bool { return strings.Contains(p.stderrText(t), "sent COMMAND SIGTERM") }, "the lease to be lost")
		if err := syscall.Kill(e.PID(), syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		code := p.wait(t, time.Minute)
		stderr := p.stderrText(t)
		if code != 1 {
			t.Errorf("exit %d, want 1 (a lease lost while COMMAND ran); stderr:\n%s", code, stderr)
		}
		wantLines(t, stderr,
			`spanmutex: COMMAND failed (exit status 143) after it was sent SIGTERM for the lost lease; "held" is recorded FAILED; a later run retries it (1 of 3 attempts used)`)
		if r := inspectOn(t, e, "held"); r.State != spanmutex.StateFailed || r.Token != 1 {
			t.Errorf("row %+v, want FAILED under token 1", r)
		}
	})
}

// inspectOn returns name's row in e's default database.
func inspectOn(t *testing.T, e *emulator.Emulator, name string) spanmutex.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := spanmutex.Inspect(ctx, e.Client(), name)
	if err != nil || len(rows) != 1 {
		t.Fatalf("Inspect %q: %d rows, %v", name, len(rows), err)
	}
	return rows[0]
}

// TestOutageWhileLockHolds: the lock is lost the same way; "lock" exits 76
// and says why once.
func TestOutageWhileLockHolds(t *testing.T) {
	onBothDialects(t, func(t *testing.T, e *emulator.Emulator) {
		p, took := killWhileHolding(t, e, "lock")
		stderr := p.stderrText(t)
		if code := p.cmd.ProcessState.ExitCode(); code != exitLeaseLost {
			t.Errorf("exit %d, want %d; stderr:\n%s", code, exitLeaseLost, stderr)
		}
		wantLines(t, stderr,
			`spanmutex: sent COMMAND SIGTERM: "held": lease with token 1 lost: renewals failed for a whole lease (2s)`,
			`spanmutex: the lock "held" (token 1) was lost while COMMAND ran (above), so another holder may have run meanwhile`)
		if n := strings.Count(stderr, "renewals failed for a whole lease"); n != 1 {
			t.Errorf("the reason is told %d times, want once:\n%s", n, stderr)
		}
		checkBound(t, took, outageLease+outageCallTimeout)
	})
}

// TestOutageWhileRunWaits: the waiter gives up after --max-failures failed
// calls with exit 69, naming the host and the last error, and no advice
// about attempts.
func TestOutageWhileRunWaits(t *testing.T) {
	onBothDialects(t, func(t *testing.T, e *emulator.Emulator) {
		p, took := killWhileWaiting(t, e, "run", "held elsewhere; waiting")
		stderr := p.stderrText(t)
		checkOutageExit(t, p, e, stderr, `"held"`)
		wantLines(t, stderr, `and its attempts are untouched (no 'spanmutex reset' needed)`)
		f := outageFlags{maxFailures: outageMaxFailures, callTimeout: outageCallTimeout}
		checkBound(t, took, f.outageBound(maxBackOffWait))
	})
}

// TestOutageWhileLockWaits: the same for a waiting "lock".
func TestOutageWhileLockWaits(t *testing.T) {
	onBothDialects(t, func(t *testing.T, e *emulator.Emulator) {
		p, took := killWhileWaiting(t, e, "lock", "lock: waiting")
		checkOutageExit(t, p, e, p.stderrText(t), `the lock "held"`)
		f := outageFlags{maxFailures: outageMaxFailures, callTimeout: outageCallTimeout}
		checkBound(t, took, f.outageBound(lockPoll(outageLease)))
	})
}

// checkOutageExit checks the exit status and the lines of a waiter that
// gave up on an outage of e while waiting for what.
func checkOutageExit(t *testing.T, p *fileProcess, e *emulator.Emulator, stderr, what string) {
	t.Helper()
	if code := p.cmd.ProcessState.ExitCode(); code != exitOutage {
		t.Errorf("exit %d, want %d; stderr:\n%s", code, exitOutage, stderr)
	}
	wantLines(t, stderr,
		"spanmutex: gave up waiting for "+what+" (--max-failures): ",
		"Spanner kept failing: 2 calls in a row failed (at most 2 allowed): last error: ",
		"spanmutex: Spanner was unreachable or failing (connecting to the emulator at SPANNER_EMULATOR_HOST="+e.Host()+"); COMMAND did not run")
	for _, wrong := range []string{"attempts: last error", "re-arm", "section \"held\": gave up"} {
		if strings.Contains(stderr, wrong) {
			t.Errorf("stderr says %q, which is about used-up attempts:\n%s", wrong, stderr)
		}
	}
}

// onBothDialects runs test in parallel subtests, one per dialect, each
// with an emulator of its own to kill.
func onBothDialects(t *testing.T, test func(t *testing.T, e *emulator.Emulator)) {
	t.Helper()
	needBinary(t)
	t.Parallel()
	for _, d := range []ddl.Dialect{ddl.GoogleSQL, ddl.PostgreSQL} {
		t.Run(d.String(), func(t *testing.T) {
			t.Parallel()
			test(t, ownEmulator(t, d))
		})
	}
}

// ownEmulator starts an emulator for this test alone, with a database of
// dialect d holding the schema.
func ownEmulator(t *testing.T, d ddl.Dialect) *emulator.Emulator {
	t.Helper()
	bin, err := emulator.FindBinary()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e, err := emulator.Start(ctx, emulator.WithBinary(bin), emulator.WithDialect(d))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

// killWhileHolding starts "spanmutex sub" holding NAME "held" on e with
// COMMAND looping until it is signalled, kills e once COMMAND runs, and
// returns the process once it has exited, with how long after the kill.
func killWhileHolding(t *testing.T, e *emulator.Emulator, sub string) (*fileProcess, time.Duration) {
	t.Helper()
	ready := filepath.Join(t.TempDir(), "READY")
	p := startFileProcess(t, e, []string{"READY=" + ready}, sub, "--database", e.Database(),
		"--lease", outageLease.String(), "--call-timeout", outageCallTimeout.String(),
		"held", "--", "sh", "-c", `touch "$READY"; while :; do sleep 0.1; done`)
	p.waitFor(t, 30*time.Second, func() bool { _, err := os.Stat(ready); return err == nil }, "COMMAND to start")
	return p, killEmulator(t, e, p)
}

// killWhileWaiting starts a holder of "held" on e, then "spanmutex sub
// --verbose" waiting for it, kills e once the waiter's stderr says waiting,
// and returns the waiter once it has exited, with how long after the kill.
func killWhileWaiting(t *testing.T, e *emulator.Emulator, sub, waiting string) (*fileProcess, time.Duration) {
	t.Helper()
	ready := filepath.Join(t.TempDir(), "READY")
	holder := startFileProcess(t, e, []string{"READY=" + ready}, sub, "--database", e.Database(),
		"held", "--", "sh", "-c", `touch "$READY"; while :; do sleep 0.1; done`)
	holder.waitFor(t, 30*time.Second, func() bool { _, err := os.Stat(ready); return err == nil }, "COMMAND to start")
	p := startFileProcess(t, e, nil, sub, "--database", e.Database(), "--verbose", "--lease", outageLease.String(),
		"--max-failures", "2", "--call-timeout", outageCallTimeout.String(), "held", "--", "true")
	p.waitFor(t, 30*time.Second, func() bool { return strings.Contains(p.stderrText(t), waiting) }, "the waiter to wait")
	return p, killEmulator(t, e, p)
}

// killEmulator kills e and returns how long p takes to exit after that
// (at most a minute: the test fails beyond).
func killEmulator(t *testing.T, e *emulator.Emulator, p *fileProcess) time.Duration {
	t.Helper()
	killed := time.Now()
	if err := syscall.Kill(e.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.wait(t, time.Minute)
	return p.exited.Sub(killed)
}

// checkBound fails the test if took exceeds bound (plus outageSlack).
func checkBound(t *testing.T, took, bound time.Duration) {
	t.Helper()
	t.Logf("exited %v after the emulator was killed (documented bound %v)", took.Round(time.Millisecond), bound)
	if took > bound+outageSlack {
		t.Errorf("took %v, above the bound %v (+%v slack)", took, bound, outageSlack)
	}
}

// wantLines fails the test for each of wants that stderr does not hold.
func wantLines(t *testing.T, stderr string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, stderr)
		}
	}
}

// fileProcess is a process whose stderr goes to a file, so that a test
// can read it while the process runs.
type fileProcess struct {
	*process
	stderrPath string
}

// startFileProcess starts the binary with args against e, env added, its
// stderr in a file; the clean-up kills what is left of it.
func startFileProcess(t *testing.T, e *emulator.Emulator, env []string, args ...string) *fileProcess {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return &fileProcess{process: startProcessOn(t, e.Host(), f, env, args...), stderrPath: f.Name()}
}

// stderrText returns what the process wrote to stderr so far.
func (p *fileProcess) stderrText(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(p.stderrPath)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// waitFor polls cond every 10 ms while p runs, failing the test if p exits
// first or timeout passes.
func (p *fileProcess) waitFor(t *testing.T, timeout time.Duration, cond func() bool, what string) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-p.done:
			t.Fatalf("%v exited (%v) before %s; stderr:\n%s", p.cmd.Args, p.cmd.ProcessState, what, p.stderrText(t))
		case <-deadline.C:
			t.Fatalf("waited %v for %s; stderr:\n%s", timeout, what, p.stderrText(t))
		case <-tick.C:
		}
	}
}
