//go:build go1.25

package spanmutex

// Liveness scenarios of the Semaphore (issue 41, faults 2 and 3), in the
// table semScenarios shares between the simulation and the emulator: a
// waiter whose request no longer fits after a Resize ends, and leaves
// the queue to the others; a waiter whose entry renewals fail counts them
// and backs off.

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// failingRenewals wraps a store whose entry renewals fail with code once
// failing is set, counting them.
type failingRenewals struct {
	semStore
	code    codes.Code
	failing atomic.Bool
	renews  atomic.Int64
}

func (s *failingRenewals) renewEntry(ctx context.Context, name string, key queueKey) (time.Time, error) {
	s.renews.Add(1)
	if s.failing.Load() {
		return time.Time{}, status.Error(s.code, "renewal refused")
	}
	return s.semStore.renewEntry(ctx, name, key)
}

// acquireErr calls s.Acquire(ctx, n) in a goroutine and sends its error,
// releasing a lease it unexpectedly got.
func acquireErr(ctx context.Context, s *Semaphore, n int64) <-chan error {
	out := make(chan error, 1)
	go func() {
		_, err := s.Acquire(ctx, n)
		if err == nil {
			_ = s.Release(context.Background())
		}
		out <- err
	}()
	return out
}

// releaseIfHeld releases what s still holds when a scenario fails: a
// simulation's bubble must not be left with its renewals.
func releaseIfHeld(s *Semaphore) {
	if s.heldPermits() > 0 {
		_ = s.Release(context.Background())
	}
}

// awaitErr returns what errc sends within d. Otherwise it cancels the
// call (cancel), waits for it to end (a simulation's bubble must not be
// left with it) and fails t.
func awaitErr(t *testing.T, errc <-chan error, cancel func(), d time.Duration, what string) error {
	t.Helper()
	select {
	case err := <-errc:
		return err
	case <-time.After(d):
		cancel()
		err := <-errc
		t.Fatalf("%s: no answer within %v (cancelled then: %v)", what, d, err)
		return nil
	}
}

// semScenarioResizeBelowWaiter returns a scenario: size 5, h holds the
// permits that leave one too few for w (declaring 5), which waits for
// weight permits; the size is set to 3, and h releases. If weight can
// never fit again (4), w ends with a *SizeMismatchError within three
// leases, its entry gone, and a size-3 contender then gets a permit at
// once; if it fits (3), w is granted, as Resize's doc says of the waiters
// that fit.
func semScenarioResizeBelowWaiter(weight int64) func(t *testing.T, e semEnv, name string) {
	return func(t *testing.T, e semEnv, name string) {
		ctx := context.Background()
		h := e.process(t, name, "h", 5, nil)
		_, err := h.Acquire(ctx, 6-weight)
		require.NoError(t, err)
		defer releaseIfHeld(h)
		wctx, cancel := context.WithTimeout(ctx, 10*scenarioLease)
		defer cancel()
		werr := acquireErr(wctx, e.process(t, name, "w", 5, nil), weight)
		e.waitQueued(t, name, 2)
		require.NoError(t, e.process(t, name, "operator", 3, nil).Resize(ctx))
		require.NoError(t, h.Release(ctx))
		err = awaitErr(t, werr, cancel, 3*scenarioLease, "the waiter after the resize")
		if weight <= 3 {
			require.NoError(t, err, "a waiter that fits the new size is granted (acquireErr released it)")
			return
		}
		var sme *SizeMismatchError
		require.ErrorAs(t, err, &sme)
		assert.Equal(t, int64(3), sme.Stored)
		assert.Equal(t, int64(5), sme.Declared)
		assert.Zero(t, e.queued(t, name), "the waiter left the queue")

		c := e.process(t, name, "c", 3, nil)
		cctx, ccancel := context.WithTimeout(ctx, scenarioLease)
		defer ccancel()
		_, err = c.Acquire(cctx, 1)
		require.NoError(t, err, "3 of 3 permits are free")
		require.NoError(t, c.Release(ctx))
	}
}

// semScenarioWaiterRenewalsFail returns a scenario: w waits behind a
// holder, and from then on every renewal of w's entry fails with code. A
// permanent code ends w's Acquire with that error at the first failed
// renewal; a transient one with an error matching ErrOutage after
// WithMaxFailures (3) of them, each after a backoff. Either way w leaves
// the queue, and it does not renew more often than that.
func semScenarioWaiterRenewalsFail(code codes.Code) func(t *testing.T, e semEnv, name string) {
	return func(t *testing.T, e semEnv, name string) {
		ctx := context.Background()
		h := e.process(t, name, "h", 1, nil)
		_, err := h.Acquire(ctx, 1)
		require.NoError(t, err)
		defer releaseIfHeld(h)
		st := &failingRenewals{semStore: e.store(t), code: code}
		w := e.process(t, name, "w", 1, st)
		w.cfg.maxFailures = 3
		wctx, cancel := context.WithTimeout(ctx, 20*scenarioLease)
		defer cancel()
		werr := acquireErr(wctx, w, 1)
		e.waitQueued(t, name, 2)
		st.failing.Store(true)
		defer func() { t.Logf("renewals of w's entry tried: %d", st.renews.Load()) }()
		// The first renewal is due two leases after the entry's; three
		// backoffs of at most defaultMaxBackOff follow a transient failure.
		began := time.Now()
		err = awaitErr(t, werr, cancel, 3*scenarioLease+3*defaultMaxBackOff, "the waiter whose renewals fail")
		t.Logf("the waiter ended after %v: %v", time.Since(began), err)
		want := 1
		if code == codes.PermissionDenied {
			assert.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)
		} else {
			require.ErrorIs(t, err, ErrOutage)
			want = w.cfg.maxFailures
		}
		assert.EqualValues(t, want, st.renews.Load(), "renewals of the entry, each failed")
		assert.Equal(t, 1, e.queued(t, name), "only h's entry is left")
		require.NoError(t, h.Release(ctx))
	}
}

// flakySem wraps a store whose renewals can be silenced and whose next
// settles fail, before Spanner (failSettles) or with their answer lost
// after they committed (loseSettles, the loss reported lostAfter later).
type flakySem struct {
	semStore
	silent      atomic.Bool
	failSettles atomic.Int32
	loseSettles atomic.Int32
	lostAfter   time.Duration
	renewed     atomic.Int64 // acknowledged renewals
	pastReads   atomic.Int64 // entryAt's reads of the past
}

func (s *flakySem) entryAt(ctx context.Context, name string, key queueKey, at time.Time) (bool, time.Time, error) {
	if !at.IsZero() {
		s.pastReads.Add(1)
	}
	return s.semStore.entryAt(ctx, name, key, at)
}

func (s *flakySem) renewEntry(ctx context.Context, name string, key queueKey) (time.Time, error) {
	if s.silent.Load() {
		return time.Time{}, status.Error(codes.Unavailable, "silenced")
	}
	ts, err := s.semStore.renewEntry(ctx, name, key)
	if err == nil {
		s.renewed.Add(1)
	}
	return ts, err
}

func (s *flakySem) settle(ctx context.Context, name string, q semRequest) (semResult, error) {
	if s.failSettles.Add(-1) >= 0 {
		return semResult{}, status.Error(codes.Unavailable, "settle failed before Spanner")
	}
	res, err := s.semStore.settle(ctx, name, q)
	if err != nil || s.loseSettles.Add(-1) < 0 {
		return res, err
	}
	select {
	case <-time.After(s.lostAfter):
	case <-ctx.Done():
	}
	return semResult{}, status.Error(codes.Unavailable, "settle's answer lost")
}

// semScenarioReleaseTakenOverFailsFirst (issue 41, fault 6): a holder cut
// off from Spanner loses its lease, b takes its permit over; the holder's
// Release then fails once before reaching Spanner. The retry finds the
// entry gone: Release must report ErrLeaseLost (its section overlapped
// b's), not take the absence for its own first try's work.
func semScenarioReleaseTakenOverFailsFirst(t *testing.T, e semEnv, name string) {
	ctx := context.Background()
	st := &flakySem{semStore: e.store(t)}
	st.failSettles.Store(-1 << 20)
	st.loseSettles.Store(-1 << 20)
	a := e.process(t, name, "a", 1, st)
	la, err := a.Acquire(ctx, 1)
	require.NoError(t, err)
	st.silent.Store(true)
	b := e.process(t, name, "b", 1, nil)
	lb, err := b.Acquire(ctx, 1)
	require.NoError(t, err)
	defer releaseIfHeld(b)
	require.True(t, lb.TookOver())
	st.failSettles.Store(1)
	err = a.Release(ctx)
	require.ErrorIs(t, err, ErrLeaseLost, "the section overlapped b's")
	assert.ErrorIs(t, la.Err(), ErrLeaseLost)
	require.NoError(t, b.Release(ctx))
}

// semScenarioReleaseAnswerLost returns a scenario: a holder renews a few
// times, b waits, and the answer to the holder's Release is lost after it
// committed, reported after lostAfter (past the holder's lease since its
// last renewal when it is a lease: the retry then judges by a read of the
// past). The retry finds the entry gone and Release returns nil: the
// holder's own release took it; b is granted once, by that release.
func semScenarioReleaseAnswerLost(lostAfter time.Duration) func(t *testing.T, e semEnv, name string) {
	return func(t *testing.T, e semEnv, name string) {
		ctx := context.Background()
		st := &flakySem{semStore: e.store(t), lostAfter: lostAfter}
		st.failSettles.Store(-1 << 20)
		st.loseSettles.Store(-1 << 20)
		a := e.process(t, name, "a", 1, st)
		la, err := a.Acquire(ctx, 1)
		require.NoError(t, err)
		waitFor(t, time.Minute, "three renewals", func() bool { return st.renewed.Load() >= 3 })
		b := e.process(t, name, "b", 1, nil)
		got := acquireAsync(t, b, 1)
		e.waitQueued(t, name, 2)
		// Release just after a renewal, so that its commit lands well before
		// the lease since then has run out, however loaded the machine: a
		// commit after that could not be told from a takeover's deletion.
		n := st.renewed.Load()
		waitFor(t, time.Minute, "a renewal", func() bool { return st.renewed.Load() > n })
		st.loseSettles.Store(1)
		require.NoError(t, a.Release(ctx), "the lost answer was our own release's")
		if lostAfter > 0 {
			assert.Positive(t, st.pastReads.Load(), "the retry judged by a read of the past")
		}
		lb := <-got
		require.NotNil(t, lb)
		assert.Equal(t, la.Token()+1, lb.Token())
		assert.False(t, lb.TookOver())
		require.NoError(t, b.Release(ctx))
	}
}
