//go:build unix

package spanmutex

// The grant rule (CORRECTNESS_DISCLAIMER.md, claim 11), shown with contenders
// in separate OS processes on both dialects: a lease goes to a caller only
// after a read (or our own acknowledged commit) that shows it ours now, never
// a lease its own clock counts as lapsed, and never to a caller whose ctx
// ended first; a dead process's queue entries cost one lease, not one each.

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/spanmutex/spanmutex/internal/testutil"
)

// hasEvent reports whether c wrote an event of kind.
func (c *contender) hasEvent(kind string) bool {
	return slices.ContainsFunc(c.history(), func(e procEvent) bool { return e.Kind == kind })
}

// TestLockGrantRule runs the grant rule's scenarios on one database per
// dialect (the emulator allows 100 databases per instance).
func TestLockGrantRule(t *testing.T) {
	t.Parallel() // waits out leases, beside the other waiting tests
	eachDialect(t, func(t *testing.T, db string) {
		t.Run("WaiterPausedAcrossHandOff", func(t *testing.T) { testWaiterPausedAcrossHandOff(t, db) })
		t.Run("CancelledWaiterPassesOn", func(t *testing.T) { testCancelledWaiterPassesOn(t, db) })
		t.Run("CancelledJustBeforeHandOff", func(t *testing.T) { testCancelledJustBeforeHandOff(t, db) })
		t.Run("KilledProcessCostsOneLease", func(t *testing.T) { testKilledProcessCostsOneLease(t, db) })
		t.Run("TryLockCrowdReturns", func(t *testing.T) { testTryLockCrowdReturns(t, db) })
	})
}

// A waiter whose process listens for wake-ups is stopped (SIGSTOP) while
// queued. The holder unlocks: the lock is handed to the stopped waiter
// (token 2) and the wake-up datagram waits in its socket. The contender
// queued behind it takes the lock over after the waiter's lease (token 3).
// When the waiter is continued, its Lock must not return token 2, which
// someone else's token 3 has replaced: it finds the lock moved on, queues
// again, and is handed the lock (token 4) by the new holder's Unlock.
func testWaiterPausedAcrossHandOff(t *testing.T, db string) {
	check := newClient(t, db)
	const name = "paused-waiter"
	wm := time.Second
	holder := startInteractive(t, "holder", db, name, wm)
	hl := holder.do(t, "lock", time.Minute)
	require.True(t, hl.ok(), hl.Err)

	waiter := startContender(t, procSpec{Role: "interactive", ID: "waiter", Database: db, Lock: name, Lease: wm, Listen: true})
	waiter.await(t, time.Minute, 0, "ready", nil)
	waiter.send(t, "lock")
	waitFor(t, time.Minute, "the waiter to queue", func() bool { return slices.Equal(queued(t, check, name), []string{"waiter"}) })
	next := startInteractive(t, "next", db, name, wm)
	next.send(t, "lock")
	waitFor(t, time.Minute, "the next contender to queue", func() bool {
		return slices.Equal(queued(t, check, name), []string{"waiter", "next"})
	})

	waiter.signal(syscall.SIGSTOP)
	hu := holder.do(t, "unlock", time.Minute)
	require.True(t, hu.ok(), hu.Err)
	nl, _ := next.await(t, time.Minute, 0, "lock", nil)
	require.True(t, nl.ok(), nl.Err)
	assert.True(t, nl.TookOver, "the next contender took the lock over from the stopped waiter")
	assert.Equal(t, hl.Token+2, nl.Token, "the hand-off to the stopped waiter had token %d", hl.Token+1)

	waiter.signal(syscall.SIGCONT)
	waitFor(t, time.Minute, "the continued waiter to queue again (or to return)", func() bool {
		return waiter.hasEvent("lock") || slices.Equal(queued(t, check, name), []string{"waiter"})
	})
	for _, e := range waiter.history() {
		if e.Kind == "lock" {
			t.Fatalf("the continued waiter's Lock returned (token %d, err %q) while %q holds token %d", e.Token, e.Err, nl.Owner, nl.Token)
		}
	}
	nu := next.do(t, "unlock", time.Minute)
	require.True(t, nu.ok(), nu.Err)
	wl, _ := waiter.await(t, time.Minute, 0, "lock", nil)
	require.True(t, wl.ok(), wl.Err)
	assert.Equal(t, nl.Token+1, wl.Token)
	assert.True(t, wl.HandedOff)
	assert.True(t, waiter.do(t, "unlock", time.Minute).ok())
}

// A waiter's Lock ctx is cancelled while it is queued (listening for
// wake-ups, or polling), and the holder unlocks at once after: the Lock
// returns an error matching ErrNotObtained, never the lease, and the lock
// goes on to the contender queued behind it without waiting out a lease.
func testCancelledWaiterPassesOn(t *testing.T, db string) {
	rounds := testutil.Scale(3, 10)
	for _, listen := range []bool{false, true} {
		t.Run(fmt.Sprintf("listen=%v", listen), func(t *testing.T) {
			check := newClient(t, db)
			name := fmt.Sprintf("cancelled-waiter-%v", listen)
			wm := 10 * time.Second
			holder := startInteractive(t, "holder", db, name, wm)
			waiter := startContender(t, procSpec{Role: "interactive", ID: "waiter", Database: db, Lock: name, Lease: wm, Listen: listen})
			waiter.await(t, time.Minute, 0, "ready", nil)
			third := startInteractive(t, "third", db, name, wm)
			for round := range rounds {
				cancelledWaiterRound(t, check, name, round, holder, waiter, third, wm)
			}
		})
	}
}

// cancelledWaiterRound is one round of TestLockProcessesCancelledWaiterPassesOn.
func cancelledWaiterRound(t *testing.T, check *spanner.Client, name string, round int, holder, waiter, third *contender, wm time.Duration) {
	t.Helper()
	hl := holder.do(t, "lock", time.Minute)
	require.True(t, hl.ok(), hl.Err)
	wAfter := len(waiter.history())
	waiter.send(t, "lockc")
	waitFor(t, time.Minute, "the waiter to queue", func() bool { return slices.Equal(queued(t, check, name), []string{"waiter"}) })
	tAfter := len(third.history())
	third.send(t, "lock")
	waitFor(t, time.Minute, "the third contender to queue", func() bool {
		return slices.Equal(queued(t, check, name), []string{"waiter", "third"})
	})
	waiter.signal(syscall.SIGUSR1)
	waiter.await(t, time.Minute, wAfter, "cancel", nil)
	hu := holder.do(t, "unlock", time.Minute)
	require.True(t, hu.ok(), hu.Err)

	wl, _ := waiter.await(t, time.Minute, wAfter, "lockc", nil)
	assert.Equal(t, "not-obtained", wl.Class, "round %d: the cancelled Lock returned token %d, err %q", round, wl.Token, wl.Err)
	assert.Zero(t, wl.Token, "round %d: the cancelled Lock returned a lease", round)
	if wl.ok() {
		require.True(t, waiter.do(t, "unlock", time.Minute).ok())
	}
	tl, _ := third.await(t, time.Minute, tAfter, "lock", nil)
	require.True(t, tl.ok(), tl.Err)
	after := time.Duration(tl.End - hu.End)
	t.Logf("round %d: the third contender got token %d %v after the Unlock (handed off %v, took over %v)", round, tl.Token, after, tl.HandedOff, tl.TookOver)
	assert.False(t, tl.TookOver, "round %d: the lock was left to lapse", round)
	assert.Less(t, after, wm/2, "round %d: the lock was not passed on", round)
	require.True(t, third.do(t, "unlock", time.Minute).ok())
}

// A process (one Scope) has three Lock calls queued behind a holder when it
// is killed; a live contender is queued behind them. When the holder
// unlocks, the lock is handed to the dead process's first entry, and the
// live contender takes it over one lease (plus jitter) later: the other
// dead entries, of the silent holder's Scope, do not make it wait for their
// four-lease time to live, and the takeover deletes them.
func testKilledProcessCostsOneLease(t *testing.T, db string) {
	check := newClient(t, db)
	const name = "killed-process"
	const wm, jitter = time.Second, 0.2
	start := func(id string) *contender {
		c := startContender(t, procSpec{Role: "interactive", ID: id, Database: db, Lock: name, Lease: wm, Jitter: jitter})
		c.await(t, time.Minute, 0, "ready", nil)
		return c
	}
	holder := start("holder")
	hl := holder.do(t, "lock", time.Minute)
	require.True(t, hl.ok(), hl.Err)
	dying := start("dying")
	dying.do(t, "queue 3", time.Minute)
	waitFor(t, time.Minute, "the dying process's three calls to queue", func() bool {
		return slices.Equal(queued(t, check, name), []string{"dying", "dying", "dying"})
	})
	live := start("live")
	live.send(t, "lock")
	waitFor(t, time.Minute, "the live contender to queue", func() bool { return len(queued(t, check, name)) == 4 })
	dying.signal(syscall.SIGKILL)
	<-dying.done

	hu := holder.do(t, "unlock", time.Minute)
	require.True(t, hu.ok(), hu.Err)
	ll, _ := live.await(t, time.Minute, 0, "lock", nil)
	require.True(t, ll.ok(), ll.Err)
	after := time.Duration(ll.End - hu.End)
	t.Logf("the live contender got token %d %v after the holder's Unlock (took over %v); one lease is %v, jitter %.1f", ll.Token, after, ll.TookOver, wm, jitter)
	assert.True(t, ll.TookOver, "taken over from the dead process's first entry")
	assert.Equal(t, hl.Token+2, ll.Token)
	assert.Less(t, after, time.Duration(float64(wm)*(1+jitter))+time.Second, "the dead process cost more than one lease")
	assert.Empty(t, queued(t, check, name), "the takeover deleted the dead process's entries")
	assert.True(t, live.do(t, "unlock", time.Minute).ok())
}

// Five contenders, each of its own Scope, over three clients, call TryLock
// at once on a new lock, round after round: every call returns (within the
// test's 30 s ctx, and with the lease or *HeldError), and at most one holds
// the lock each round.
func testTryLockCrowdReturns(t *testing.T, db string) {
	clients := []*spanner.Client{newClient(t, db), newClient(t, db), newClient(t, db)}
	rounds := testutil.Scale(4, 12)
	for round := range rounds {
		name := fmt.Sprintf("trylock-crowd-%d", round)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var (
			wg     sync.WaitGroup
			mu     sync.Mutex
			leases []*Lease
			unlock []*Lock
			errs   []error
		)
		for i := range 5 {
			l, err := NewLock(clients[i%len(clients)], name, WithOwner(fmt.Sprintf("c%d", i)), WithScope(NewScope()))
			require.NoError(t, err)
			wg.Add(1)
			go func() {
				defer wg.Done()
				lease, err := l.TryLock(ctx)
				mu.Lock()
				defer mu.Unlock()
				if lease != nil {
					leases = append(leases, lease)
					unlock = append(unlock, l)
				}
				if err != nil {
					errs = append(errs, err)
				}
			}()
		}
		wg.Wait()
		cancel()
		for _, l := range unlock {
			assert.NoError(t, l.Unlock(context.Background()))
		}
		assert.LessOrEqual(t, len(leases), 1, "round %d: more than one TryLock took the lock", round)
		for _, err := range errs {
			assert.ErrorIs(t, err, ErrHeld, "round %d", round)
		}
	}
}

// The cancellation race of TestLockProcessesCancelledWaiterPassesOn with no
// round trip between the cancel and the Unlock: two Locks of different
// Scopes (which share nothing in memory, as two processes), the waiter's
// ctx cancelled and the holder's Unlock sent at once after. The waiter's
// Lock returns ErrNotObtained, never the lease, and the lock is left free
// for the next caller, who takes it without waiting out a lease.
func testCancelledJustBeforeHandOff(t *testing.T, db string) {
	for _, listen := range []bool{false, true} {
		t.Run(fmt.Sprintf("listen=%v", listen), func(t *testing.T) {
			c1, c2 := newClient(t, db), newClient(t, db)
			name := fmt.Sprintf("cancelled-before-hand-off-%v", listen)
			scope := NewScope()
			if listen {
				var err error
				scope, err = ListenScope("127.0.0.1:0", "")
				require.NoError(t, err)
				t.Cleanup(func() { assert.NoError(t, scope.Close()) })
			}
			m1, err := NewLock(c1, name, WithOwner("m1"), WithScope(NewScope()), WithLease(10*time.Second))
			require.NoError(t, err)
			m2, err := NewLock(c2, name, WithOwner("m2"), WithScope(scope), WithLease(10*time.Second))
			require.NoError(t, err)
			for round := range testutil.Scale(6, 10) {
				// Even rounds cancel once m2 is queued; odd ones at once,
				// while its arrival may be in flight.
				cancelledJustBeforeHandOff(t, c1, name, round, m1, m2)
			}
		})
	}
}

// cancelledJustBeforeHandOff is one round of TestLockCancelledJustBeforeHandOff.
func cancelledJustBeforeHandOff(t *testing.T, check *spanner.Client, name string, round int, m1, m2 *Lock) {
	t.Helper()
	ctx := context.Background()
	_, err := m1.Lock(ctx)
	require.NoError(t, err)
	ctx2, cancel2 := context.WithCancel(ctx)
	got := make(chan lockReturn, 1)
	go func() {
		l, err := m2.Lock(ctx2)
		got <- lockReturn{l, err}
	}()
	if round%2 == 0 {
		waitFor(t, time.Minute, "m2 to queue", func() bool { return slices.Equal(queued(t, check, name), []string{"m2"}) })
	}
	cancel2()
	require.NoError(t, m1.Unlock(ctx))
	r := <-got
	if r.lease != nil {
		t.Errorf("round %d: m2's cancelled Lock returned the lease, token %d (err %v)", round, r.lease.Token(), r.err)
		assert.NoError(t, m2.Unlock(ctx))
		return
	}
	assert.ErrorIs(t, r.err, ErrNotObtained, "round %d", round)
	tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	l, err := m1.Lock(tctx)
	require.NoError(t, err, "round %d: the lock was not passed on", round)
	assert.False(t, l.TookOver(), "round %d", round)
	require.NoError(t, m1.Unlock(ctx))
}
