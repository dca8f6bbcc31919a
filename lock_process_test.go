//go:build unix

package spanmutex

// Tests of the Lock whose contenders are separate OS processes (see
// process_test.go), so that nothing but the database coordinates them: no
// process-local board, no in-memory wake-up.

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// startInteractive starts an interactive contender (runInteractive) of lock
// name in db, with lease wm and no jitter, and waits until it is ready.
func startInteractive(t *testing.T, id, db, name string, wm time.Duration) *contender {
	t.Helper()
	c := startContender(t, procSpec{Role: "interactive", ID: id, Database: db, Lock: name, Lease: wm})
	c.await(t, time.Minute, 0, "ready", nil)
	return c
}

// do sends command to an interactive contender and waits up to timeout for
// the event it writes (of the command's name).
func (c *contender) do(t *testing.T, command string, timeout time.Duration) procEvent {
	t.Helper()
	after := len(c.history())
	c.send(t, command)
	kind, _, _ := strings.Cut(command, " ")
	e, _ := c.await(t, timeout, after, kind, nil)
	return e
}

// takeOverPaused is how the paused-holder tests of the Lock and the
// Election begin: a process started by start as role ("holder", "leader")
// takes the lock, makes a guarded write and is paused (SIGSTOP); a "taker"
// process takes the lock over, by Spanner's clock no sooner than the lease
// wm after the first acquired it, and makes a guarded write of its own.
func takeOverPaused(t *testing.T, role string, start func(id string) *contender, wm time.Duration) (paused, taker *contender, pl, tl procEvent) {
	t.Helper()
	paused = start(role)
	pl = paused.do(t, "lock", time.Minute)
	require.True(t, pl.ok(), pl.Err)
	require.True(t, paused.do(t, "guard", time.Minute).ok(), "the %s's write before its pause", role)
	paused.signal(syscall.SIGSTOP)

	taker = start("taker")
	tl = taker.do(t, "lock", time.Minute)
	require.True(t, tl.ok(), tl.Err)
	assert.True(t, tl.TookOver, "the lock was taken over")
	assert.GreaterOrEqual(t, tl.AcquiredAt.Sub(pl.AcquiredAt), wm, "by Spanner's clock, no takeover within the %s's lease", role)
	require.True(t, taker.do(t, "guard", time.Minute).ok(), "the new %s's write", role)
	return paused, taker, pl, tl
}

// 20 processes each increment a counter file 5 times under the lock (every
// other one listens for wake-ups, so both the polled and the woken paths
// run, together): no increment is lost, and the tokens written with them are 1..100, each once,
// strictly increasing in the order they were written.
func TestLockProcessesCounter(t *testing.T) {
	t.Parallel() // waits out leases beside the other waiting tests (own database or emulator)
	db := freshDatabase(t)
	dir := t.TempDir()
	const procs, each = 20, 5
	start := time.Now()
	cs := startContenders(t, procs, func(i int) procSpec {
		return procSpec{Role: "counter", ID: fmt.Sprintf("p%02d", i), Database: db, Lock: "counter",
			Lease: 10 * time.Second, Jitter: 0.2, Count: each, Dir: dir, Listen: i%2 == 0}
	})
	evs := waitAll(t, cs, 5*time.Minute)
	t.Logf("%d processes × %d increments in %v", procs, each, time.Since(start))

	b, err := os.ReadFile(filepath.Join(dir, counterFile))
	require.NoError(t, err)
	assert.Equal(t, strconv.Itoa(procs*each), string(b), "the counter")
	var tokens []int64
	b, err = os.ReadFile(filepath.Join(dir, counterTokens))
	require.NoError(t, err)
	for _, f := range strings.Fields(string(b)) {
		tok, err := strconv.ParseInt(f, 10, 64)
		require.NoError(t, err)
		tokens = append(tokens, tok)
	}
	want := make([]int64, procs*each)
	for i := range want {
		want[i] = int64(i + 1)
	}
	assert.Equal(t, want, tokens, "the tokens, in the order they were logged")
	var handed int
	for _, e := range evs {
		if e.Kind == "lock" && e.HandedOff {
			handed++
		}
	}
	t.Logf("%d of %d leases were handed over by an Unlock", handed, procs*each)
}

// stormCall is one Lock call of the storm, with how its Unlock ended.
type stormCall struct {
	lock   procEvent
	unlock *procEvent
}

// stormCalls pairs the storm's lock events with their unlock events, by
// owner (one owner per call).
func stormCalls(evs []procEvent) map[string]*stormCall {
	calls := map[string]*stormCall{}
	for _, e := range evs {
		switch e.Kind {
		case "lock":
			calls[e.Owner] = &stormCall{lock: e}
		case "unlock":
			if c := calls[e.Owner]; c != nil {
				c.unlock = &e
			}
		}
	}
	return calls
}

// requestID and txID match the parts of Spanner error texts that differ
// from one error to the next.
var (
	requestID = regexp.MustCompile(`, requestID = "[^"]*"`)
	txID      = regexp.MustCompile(`(Transaction(?: not found:)?) \d+`)
)

// sameKind returns err's text without its request and transaction ids, so
// that errors of one kind read the same.
func sameKind(err string) string {
	return txID.ReplaceAllString(requestID.ReplaceAllString(err, ""), "$1 N")
}

// stormErrors counts the storm's Lock errors by class, and the distinct
// texts of those of class "other" (ids removed, capped at 200 characters).
func stormErrors(calls map[string]*stormCall) (byClass, others map[string]int) {
	byClass, others = map[string]int{}, map[string]int{}
	for _, c := range calls {
		if c.lock.ok() {
			continue
		}
		byClass[c.lock.Class]++
		if c.lock.Class == "other" {
			others[fmt.Sprintf("[%s] %.200s", c.lock.Code, sameKind(c.lock.Err))]++
		}
	}
	return byClass, others
}

// 20 processes call Lock, one call after another, each with a random
// deadline of 5-60ms, for 3s; every other one listens for wake-ups. The lease (5s) outlasts the storm: under
// the race detector on two cores a Spanner call can hang for the 2s a Lock
// may outlive its deadline, and a lease that lapsed then would be lost
// rightly, which is not what this test is about. Every call returns a lease (unlocked at once,
// successfully) or a documented error; once all have returned, nothing of
// theirs is left in the queue or holding the lock, and a patient Lock gets
// the free lock at once.
func TestLockProcessesImpatientStorm(t *testing.T) {
	t.Parallel() // waits out leases beside the other waiting tests (own database or emulator)
	db := freshDatabase(t)
	const name, procs = "storm", 20
	wm := 5 * time.Second
	cs := startContenders(t, procs, func(i int) procSpec {
		return procSpec{Role: "storm", ID: fmt.Sprintf("s%02d", i), Database: db, Lock: name, Lease: wm, Jitter: 0.2,
			Duration: 3 * time.Second, MinDeadline: 5 * time.Millisecond, MaxDeadline: 60 * time.Millisecond, Listen: i%2 == 0}
	})
	calls := stormCalls(waitAll(t, cs, 2*time.Minute))
	check := newClient(t, db)
	stale := queued(t, check, name) // every call has returned: any entry is stale
	rows, err := Inspect(context.Background(), check, name)
	require.NoError(t, err)
	var row Record // zero if no call ever took the lock
	if len(rows) == 1 {
		row = rows[0]
	}

	patient, err := NewLock(check, name, WithOwner("patient"), WithLease(wm))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	lease, err := patient.Lock(ctx)
	took := time.Since(start)
	require.NoError(t, err)
	require.NoError(t, patient.Unlock(ctx))

	byClass, others := stormErrors(calls)
	leases, unlocked := 0, 0
	var (
		badUnlocks []string
		overrun    time.Duration // the most a Lock call outlived its deadline
	)
	for owner, c := range calls {
		overrun = max(overrun, c.lock.took()-c.lock.Deadline)
		if !c.lock.ok() {
			continue
		}
		leases++
		if c.unlock != nil && c.unlock.ok() {
			unlocked++
		} else if c.unlock != nil {
			badUnlocks = append(badUnlocks, fmt.Sprintf("%s (token %d; Lock took %v with a %v deadline, Unlock began %v later and took %v): %s",
				owner, c.lock.Token, c.lock.took(), c.lock.Deadline, time.Duration(c.unlock.Start-c.lock.End), c.unlock.took(), c.unlock.Err))
		}
	}
	t.Logf("storm: %d Lock calls, %d leases (%d unlocked), errors by class %v; a call outlived its deadline by up to %v; "+
		"after it: row %s owner %q token %d (%d tokens went to calls that returned no lease), %d queue entries; patient Lock took %v (token %d)",
		len(calls), leases, unlocked, byClass, overrun, row.State, row.Owner, row.Token, row.Token-int64(leases), len(stale), took, lease.Token())
	for _, text := range slices.Sorted(maps.Keys(others)) {
		t.Logf("  %4d× %s", others[text], text)
	}
	assert.Empty(t, others, "Lock errors that match neither ErrNotObtained nor a documented typed error")
	assert.Equal(t, leases, unlocked, "every lease obtained was unlocked successfully; failures: %v", badUnlocks)
	assert.Empty(t, staleEntries(stale, calls), "queue entries of Lock calls that had already returned")
	if row.State == StateStarted {
		c := calls[row.Owner]
		assert.Failf(t, "the lock was left held after every call returned",
			"holder %q, token %d, its Lock call returned: %+v", row.Owner, row.Token, c)
	}
	assert.Less(t, took, time.Second, "a patient Lock of the free lock")
}

// staleEntries describes the queue entries (owners) of calls that returned.
func staleEntries(owners []string, calls map[string]*stormCall) []string {
	var out []string
	for _, o := range owners {
		if c := calls[o]; c != nil {
			out = append(out, fmt.Sprintf("%s (its Lock returned after %v: %q)", o, c.lock.took(), c.lock.Err))
		} else {
			out = append(out, o+" (call not recorded)")
		}
	}
	return out
}

// A waiter process queued behind a holder process is killed; when the
// holder unlocks, a contender queued behind the dead waiter still gets the
// lock, within the dead entry's time to live (four leases) plus a
// margin, with a higher token.
func TestLockProcessesKilledWaiter(t *testing.T) {
	t.Parallel() // waits out leases beside the other waiting tests (own database or emulator)
	db := freshDatabase(t)
	check := newClient(t, db)
	const name = "killed-waiter"
	wm := 2 * time.Second
	ttl := 4 * wm
	holder := startInteractive(t, "holder", db, name, wm)
	hl := holder.do(t, "lock", time.Minute)
	require.True(t, hl.ok(), hl.Err)

	waiter := startInteractive(t, "waiter", db, name, wm)
	waiter.send(t, "lock")
	waitFor(t, time.Minute, "the waiter to queue", func() bool { return slices.Equal(queued(t, check, name), []string{"waiter"}) })
	waiter.signal(syscall.SIGKILL)
	<-waiter.done

	third := startInteractive(t, "third", db, name, wm)
	third.send(t, "lock")
	waitFor(t, time.Minute, "the third contender to queue", func() bool { return len(queued(t, check, name)) == 2 })
	hu := holder.do(t, "unlock", time.Minute)
	require.True(t, hu.ok(), hu.Err)

	tl, _ := third.await(t, ttl+time.Minute, 0, "lock", nil)
	require.True(t, tl.ok(), tl.Err)
	after := time.Duration(tl.End - hu.End)
	t.Logf("the third contender got the lock %v after the holder's Unlock returned (token %d, took over: %v, handed over: %v; the dead entry's TTL is %v)",
		after, tl.Token, tl.TookOver, tl.HandedOff, ttl)
	assert.LessOrEqual(t, after, ttl+2*time.Second, "the third contender waited longer than the dead waiter's entry lives")
	assert.Greater(t, tl.Token, hl.Token)
	assert.True(t, third.do(t, "unlock", time.Minute).ok())
}

// A holder process is paused (SIGSTOP) past the lease; another process
// takes the lock over and writes. When the holder is continued it learns
// that its lease was lost, and its guarded writes are rejected while the
// new holder's land; in commit order, the written tokens never go down.
func TestLockProcessesPausedHolder(t *testing.T) {
	t.Parallel() // waits out leases beside the other waiting tests (own database or emulator)
	db := freshDatabase(t, historyDDL)
	check := newClient(t, db)
	const name = "paused-holder"
	wm := 2 * time.Second
	holder, taker, hl, tl := takeOverPaused(t, "holder", func(id string) *contender { return startInteractive(t, id, db, name, wm) }, wm)
	assert.Greater(t, tl.Token, hl.Token)
	t.Logf("holder token %d acquired at %v; taker token %d took over at %v (%v later by Spanner's clock)",
		hl.Token, hl.AcquiredAt, tl.Token, tl.AcquiredAt, tl.AcquiredAt.Sub(hl.AcquiredAt))

	holder.signal(syscall.SIGCONT)
	lost, _ := holder.await(t, time.Minute, 0, "lost", nil)
	assert.Equal(t, "lease-lost", lost.Class, "Lease.Err after Done closed: %s", lost.Err)
	hg := holder.do(t, "guard", time.Minute)
	assert.Equal(t, "lease-lost", hg.Class, "the old holder's guarded write after it came back: %q", hg.Err)
	assert.True(t, taker.do(t, "guard", time.Minute).ok(), "the new holder's second write")
	assert.Equal(t, "lease-lost", holder.do(t, "unlock", time.Minute).Class, "the old holder's Unlock")
	assert.True(t, taker.do(t, "unlock", time.Minute).ok(), "the new holder's Unlock")

	assert.Equal(t, []int64{hl.Token, tl.Token, tl.Token}, historyTokens(readHistory(t, check)), "the committed writes' tokens, in commit order")
}

// Contenders configured with different leases: a contender with a short
// lease must judge a holder by the holder's own, longer lease.
func TestLockProcessesMismatchedLeases(t *testing.T) {
	t.Parallel() // waits out leases, beside the other waiting tests
	db := freshDatabase(t)
	check := newClient(t, db)
	const short = time.Second

	// The holder (lease 6s) renews every 2s while it holds for 3s: the
	// contender (lease 1s) sees it silent for longer than its own
	// lease between renewals, and must still wait for its Unlock.
	t.Run("renewing holder", func(t *testing.T) {
		const name = "renewing"
		holder := startInteractive(t, "holder", db, name, 6*time.Second)
		hl := holder.do(t, "lock", time.Minute)
		require.True(t, hl.ok(), hl.Err)
		contender := startInteractive(t, "contender", db, name, short)
		contender.send(t, "lock")
		waitFor(t, time.Minute, "the contender to queue", func() bool { return len(queued(t, check, name)) == 1 })
		hold := holder.do(t, "hold 3s", time.Minute)
		hu := holder.do(t, "unlock", time.Minute)
		cl, _ := contender.await(t, time.Minute, 0, "lock", nil)
		require.True(t, cl.ok(), cl.Err)
		t.Logf("holder: token %d, hold ended with %q, unlock with %q; contender: token %d, took over %v, %v after the holder's Unlock began",
			hl.Token, hold.Err, hu.Err, cl.Token, cl.TookOver, time.Duration(cl.End-hu.Start))
		assert.True(t, hold.ok(), "the holder kept its lease through its section: %s", hold.Err)
		assert.True(t, hu.ok(), "the holder's Unlock: %s", hu.Err)
		assert.False(t, cl.TookOver, "the contender took the lock over from a holder that renewed")
		assert.GreaterOrEqual(t, time.Duration(cl.End-hu.Start), time.Duration(0), "the contender got the lock before the holder's Unlock began")
	})

	// The holder (lease 4s) is killed right after acquiring: the
	// contender (lease 1s) may take over only once the holder's
	// lease has passed since its last renewal, by Spanner's clock.
	t.Run("killed holder", func(t *testing.T) {
		const name = "killed"
		const long = 4 * time.Second
		holder := startInteractive(t, "holder", db, name, long)
		hl := holder.do(t, "lock", time.Minute)
		require.True(t, hl.ok(), hl.Err)
		holder.signal(syscall.SIGKILL)
		<-holder.done
		last := inspectOne(t, check, name).RenewedAt
		contender := startInteractive(t, "contender", db, name, short)
		cl := contender.do(t, "lock", time.Minute)
		require.True(t, cl.ok(), cl.Err)
		gap := cl.AcquiredAt.Sub(last)
		t.Logf("holder token %d acquired at %v, last renewed at %v; contender token %d took over %v after that renewal (Spanner's clock)",
			hl.Token, hl.AcquiredAt, last, cl.Token, gap)
		assert.True(t, cl.TookOver)
		assert.GreaterOrEqual(t, gap, long, "the takeover came before the holder's lease had passed")
	})
}

// A waiter whose process listens for wake-ups (ListenScope) is woken by the
// Unlock of another process that hands it the lock: it holds the lock long
// before its fallback poll (a quarter of its 40 s lease) would have found it.
func TestLockProcessesWakeUpAcrossProcesses(t *testing.T) {
	db := freshDatabase(t)
	check := newClient(t, db)
	const name = "wake-up"
	holder := startInteractive(t, "holder", db, name, 2*time.Second)
	hl := holder.do(t, "lock", time.Minute)
	require.True(t, hl.ok(), hl.Err)

	waiter := startContender(t, procSpec{Role: "interactive", ID: "waiter", Database: db, Lock: name, Lease: 40 * time.Second, Listen: true})
	waiter.await(t, time.Minute, 0, "ready", nil)
	waiter.send(t, "lock")
	waitFor(t, time.Minute, "the waiter to queue", func() bool { return slices.Equal(queued(t, check, name), []string{"waiter"}) })
	hu := holder.do(t, "unlock", time.Minute)
	require.True(t, hu.ok(), hu.Err)
	wl, _ := waiter.await(t, time.Minute, 0, "lock", nil)
	require.True(t, wl.ok(), wl.Err)
	after := time.Duration(wl.End - hu.End)
	t.Logf("hand-off across processes by wake-up: %v from the holder's Unlock returning to the waiter's Lock returning; the waiter made %d reads, its Scope received %d wake-ups",
		after, wl.Reads, wl.WakeUps)
	assert.True(t, wl.HandedOff)
	assert.Equal(t, hl.Token+1, wl.Token)
	assert.Equal(t, int64(1), wl.WakeUps, "the Unlock's datagram reached the waiter's Scope")
	assert.Less(t, after, 5*time.Second, "well before the fallback poll, 10 s after the waiter's last read")
	assert.True(t, waiter.do(t, "unlock", time.Minute).ok())
}
