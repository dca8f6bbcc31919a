//go:build linux

package main

import (
	"bytes"
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/spanner"

	"github.com/spanmutex/spanmutex"
	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/internal/testutil"
)

// signalDialects are the dialects the signal tests run on.
var signalDialects = []ddl.Dialect{ddl.GoogleSQL, ddl.PostgreSQL}

// TestRunSignalNeverTwoCommands sends a "spanmutex run" holding NAME a
// terminating signal (SIGHUP: a closed terminal or a supervisor's reload;
// SIGINT, SIGTERM, SIGQUIT) or SIGKILL (what nothing can catch) while
// COMMAND runs. COMMAND must be dead soon
// after, so that a second run, which may start it again once the row is
// given back or the lease has passed, never runs beside it. The time from
// the signal to COMMAND's death is logged.
func TestRunSignalNeverTwoCommands(t *testing.T) {
	needEmulator(t)
	for _, d := range signalDialects {
		for sig, sigName := range map[syscall.Signal]string{
			syscall.SIGHUP: "SIGHUP", syscall.SIGINT: "SIGINT", syscall.SIGTERM: "SIGTERM", syscall.SIGQUIT: "SIGQUIT", syscall.SIGKILL: "SIGKILL",
		} {
			t.Run(d.String()+"/"+sigName, func(t *testing.T) {
				t.Parallel()
				runSignalled(t, d, sig, sigName)
			})
		}
	}
}

// runSignalled is one case of TestRunSignalNeverTwoCommands.
func runSignalled(t *testing.T, d ddl.Dialect, sig syscall.Signal, sigName string) {
	if signal.Ignored(sig) {
		// spanmutex inherits it ignored, and rightly keeps it so (nohup).
		t.Skipf("this test process was started with %s ignored", sigName)
	}
	db, name, dir := testutil.NewDatabase(t, emu, d), uniqueName(t), t.TempDir()
	pidFile, tokens := filepath.Join(dir, "pid"), filepath.Join(dir, "tokens")
	env := []string{"PIDFILE=" + pidFile, "FILE=" + tokens}
	// COMMAND records its pid, then becomes sleep under the same pid.
	holder := startProcess(t, env, "run", "--database", db, "--lease", "2s", name, "--", "sh", "-c",
		`echo "$SPANMUTEX_TOKEN" >> "$FILE"; echo $$ > "$PIDFILE.tmp"; mv "$PIDFILE.tmp" "$PIDFILE"; exec sleep 60`)
	waitForFile(t, holder, pidFile, 30*time.Second)
	pid := readPid(t, pidFile)

	sent := time.Now()
	if err := holder.cmd.Process.Signal(sig); err != nil { // spanmutex only, not its group
		t.Fatal(err)
	}
	died := waitForDeath(t, pid, 5*time.Second)
	t.Logf("%s to spanmutex run: COMMAND (pid %d) dead %v after the signal", sigName, pid, died.Sub(sent))

	code := holder.wait(t, 30*time.Second)
	stderr := holder.stderr.String()
	saneStderr(t, "signalled run", stderr)
	if sig == syscall.SIGKILL {
		if code != -1 {
			t.Fatalf("run sent SIGKILL exited %d; want death by the signal", code)
		}
	} else {
		if want := 128 + int(sig); code != want {
			t.Fatalf("run sent %s exited %d, want COMMAND's %d; stderr:\n%s", sigName, code, want, stderr)
		}
		if !strings.Contains(stderr, "is given back: NEEDED") {
			t.Errorf("stderr does not say the row was given back:\n%s", stderr)
		}
		r := inspect(t, db, name)
		if r.State != spanmutex.StateNeeded || r.Attempts != 0 || !strings.Contains(r.LastError, sigName+" was sent to spanmutex run") {
			t.Errorf("row is %s after %d attempts, last error %q; want NEEDED after 0, naming %s", r.State, r.Attempts, r.LastError, sigName)
		}
	}

	// COMMAND is dead: a second run takes NAME (at once after SIGHUP,
	// after the lease after SIGKILL) and runs it alone.
	second := startProcess(t, env, "run", "--database", db, "--lease", "2s", name, "--", "sh", "-c", `echo "$SPANMUTEX_TOKEN" >> "$FILE"`)
	if code := second.wait(t, 60*time.Second); code != 0 || !strings.Contains(second.stderr.String(), "ran here") {
		t.Fatalf("second run: exit %d; stderr:\n%s", code, second.stderr.String())
	}
	if got := readTokens(t, tokens); !slices.Equal(got, []int64{1, 2}) {
		t.Errorf("COMMAND wrote tokens %v; want 1 (the signalled run) then 2", got)
	}
	if r := inspect(t, db, name); r.State != spanmutex.StateDone || r.Token != 2 {
		t.Errorf("row is %s with token %d; want DONE with token 2", r.State, r.Token)
	}
}

// TestLockWaiterSIGHUPLeavesQueue sends SIGHUP to a "spanmutex lock" that
// waits behind a holder: it must leave the queue and exit 1, so that the
// holder's release goes to the next live waiter (the next token) rather
// than to the dead one, for which everyone would wait a lease.
func TestLockWaiterSIGHUPLeavesQueue(t *testing.T) {
	needEmulator(t)
	for _, d := range signalDialects {
		t.Run(d.String(), func(t *testing.T) {
			t.Parallel()
			lockWaiterSignalled(t, d)
		})
	}
}

// lockWaiterSignalled is one case of TestLockWaiterSIGHUPLeavesQueue.
func lockWaiterSignalled(t *testing.T, d ddl.Dialect) {
	if signal.Ignored(syscall.SIGHUP) {
		t.Skip("this test process was started with SIGHUP ignored (nohup): so is spanmutex")
	}
	db, name, dir := testutil.NewDatabase(t, emu, d), uniqueName(t), t.TempDir()
	ready, release, file := filepath.Join(dir, "READY"), filepath.Join(dir, "RELEASE"), filepath.Join(dir, "got")
	env := []string{"READY=" + ready, "RELEASE=" + release, "FILE=" + file}
	lock := func(owner, script string) *process {
		return startProcess(t, env, "lock", "--database", db, "--lease", "2s", "--owner", owner, name, "--", "sh", "-c", script)
	}
	holder := lock("holder", `echo "holder $SPANMUTEX_TOKEN" >> "$FILE"; touch "$READY"; while [ ! -e "$RELEASE" ]; do sleep 0.02; done`)
	waitForFile(t, holder, ready, 30*time.Second)

	client, err := emu.NewClient(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	hupped := lock("hupped", `echo "hupped $SPANMUTEX_TOKEN" >> "$FILE"`)
	waitWhileRunning(t, hupped, "the waiter to queue", 30*time.Second, func() bool {
		return slices.Contains(queuedOwners(t, client, name), "hupped")
	})
	if err := hupped.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if code := hupped.wait(t, 30*time.Second); code != exitError ||
		!strings.Contains(hupped.stderr.String(), "interrupted by SIGHUP while waiting") {
		t.Errorf("waiter sent SIGHUP: exit %d, want %d saying so; stderr:\n%s", code, exitError, hupped.stderr.String())
	}
	if owners := queuedOwners(t, client, name); slices.Contains(owners, "hupped") {
		t.Errorf("the waiter sent SIGHUP left its queue entry: the queue holds %q", owners)
	}

	next := lock("next", `echo "next $SPANMUTEX_TOKEN" >> "$FILE"`)
	waitWhileRunning(t, next, "the next waiter to queue", 30*time.Second, func() bool {
		return slices.Contains(queuedOwners(t, client, name), "next")
	})
	released := time.Now()
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for who, p := range map[string]*process{"holder": holder, "next": next} {
		if code := p.wait(t, 30*time.Second); code != 0 {
			t.Fatalf("%s: exit %d; stderr:\n%s", who, code, p.stderr.String())
		}
	}
	t.Logf("the next waiter had the lock and ran COMMAND within %v of the holder's COMMAND being told to end", next.exited.Sub(released))
	if got := readLines(t, file); !slices.Equal(got, []string{"holder 1", "next 2"}) {
		t.Errorf("COMMANDs wrote %q; want the holder's token 1, then the next waiter's 2 (no hand-off to the dead waiter)", got)
	}
}

// queuedOwners returns the owners of name's queue entries, oldest first,
// with a key read (the same in both dialects).
func queuedOwners(t *testing.T, client *spanner.Client, name string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var owners []string
	it := client.Single().Read(ctx, ddl.DefaultMutexTable+ddl.QueueSuffix, spanner.Key{name}.AsPrefix(), []string{"Owner"})
	if err := it.Do(func(r *spanner.Row) error {
		var owner spanner.NullString
		if err := r.Columns(&owner); err != nil {
			return err
		}
		owners = append(owners, owner.StringVal)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return owners
}

// readPid returns the pid COMMAND wrote to path.
func readPid(t *testing.T, path string) int {
	t.Helper()
	lines := readLines(t, path)
	if len(lines) != 1 {
		t.Fatalf("%s holds %q; want one pid", path, lines)
	}
	pid, err := strconv.Atoi(lines[0])
	if err != nil {
		t.Fatalf("%s holds %q, not a pid", path, lines[0])
	}
	return pid
}

// waitForDeath polls, every millisecond, until the process pid is dead (gone,
// or a zombie nobody has reaped yet) and returns when it saw it dead; it
// fails the test if pid still runs after timeout, and kills it.
func waitForDeath(t *testing.T, pid int, timeout time.Duration) time.Time {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		if !processAlive(pid) {
			return time.Now()
		}
		select {
		case <-deadline.C:
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("COMMAND (pid %d) still runs %v after its spanmutex was signalled: two COMMANDs could run at once", pid, timeout)
		case <-tick.C:
		}
	}
}

// processAlive reports whether pid runs: it exists and is not a zombie.
func processAlive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses.
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || (stat[i+2] != 'Z' && stat[i+2] != 'X')
}
