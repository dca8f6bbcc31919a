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

func (s *failingRenewals) renewEntry(ctx context.Context, name string, key queueKey) error {
	s.renews.Add(1)
	if s.failing.Load() {
		return status.Error(s.code, "renewal refused")
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
// weight permits; the size is set to 3, and h
// releases. w ends with a *SizeMismatchError within three leases, its
// entry gone, whether its weight can never fit again (4) or only its
// declared size is wrong (3: h's Release may grant it first, and w gives
// the grant back); a size-3 contender then gets a permit at once.
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
		err = awaitErr(t, werr, cancel, 3*scenarioLease, "the waiter whose size no longer matches")
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
