//go:build go1.25

package spanmutex

// Scenarios of an Unlock that does not land while the lock is held
// through the Scope's session (Lock.releaseLater, on retryEnd), in
// lockScenarios: on the simulated Spanner and on the emulator. The
// simulations' schedules rarely reach it.

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// unlockOutage wraps a store watched by a sessionWatch: its unlocks can
// be made to fail before reaching Spanner (fail), and it records each
// unlock try, when it was made and how it ended.
type unlockOutage struct {
	*sessionWatch
	fail  atomic.Bool
	mu    sync.Mutex
	tries []unlockTry
}

// unlockTry is one unlock sent to the store.
type unlockTry struct {
	at    time.Time
	lease string // its id
	err   error
}

func (s *unlockOutage) unlock(ctx context.Context, l *Lease) (handOff, error) {
	at := time.Now()
	var (
		to  handOff
		err = status.Error(codes.Unavailable, "unlock failed before Spanner")
	)
	if !s.fail.Load() {
		to, err = s.sessionWatch.unlock(ctx, l)
	}
	s.mu.Lock()
	s.tries = append(s.tries, unlockTry{at: at, lease: l.id, err: err})
	s.mu.Unlock()
	return to, err
}

// triesOf returns the unlock tries of lease l so far, in order.
func (s *unlockOutage) triesOf(l *Lease) []unlockTry {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []unlockTry
	for _, u := range s.tries {
		if u.lease == l.id {
			out = append(out, u)
		}
	}
	return out
}

// unlockDidNotLand holds two locks through one Scope's session on a store
// whose unlocks fail, calls before (if not nil) with the first, and makes
// its Unlock fail for its whole finish window (ErrOutage, the lease
// ended); it returns once the background retry has made its first try (it
// failed: the outage goes on), with the store, the locks, their leases and
// when the Unlock returned.
func unlockDidNotLand(t *testing.T, e lockEnv, name string, before func(*Lock)) (*unlockOutage, []*Lock, []*Lease, time.Time) {
	t.Helper()
	st := &unlockOutage{sessionWatch: &sessionWatch{lockStore: e.store(t)}}
	locks, leases := holdThroughSession(t, e, name, 2, st)
	if before != nil {
		before(locks[0])
	}
	st.fail.Store(true)
	began := time.Now()
	requireFinishOutage(t, locks[0].Unlock(context.Background()), began, scenarioFinish, leases[0])
	returned := time.Now()
	inWindow := len(st.triesOf(leases[0]))
	require.Positive(t, inWindow, "the Unlock tried")
	waitFor(t, time.Minute, "the unlock retried in the background", func() bool { return len(st.triesOf(leases[0])) > inWindow })
	retry := st.triesOf(leases[0])[inWindow]
	assert.Error(t, retry.err, "the retry's first try meets the outage")
	assert.LessOrEqual(t, retry.at.Sub(returned), 2*locks[0].cfg.renewEvery(), "the retry begins about a renewal interval after the Unlock returned")
	return st, locks, leases, returned
}

// scenarioSessionUnlockRetried: a Scope holds 2 locks through its session,
// a waiter of another process queued for the first; the Unlock of the
// first fails for its whole finish window. The unlock is retried in the
// background, a renewal interval after the Unlock returned; once the
// outage ends, it lands within 4 renewal intervals and hands the lock to
// the waiter (the next token, handed off, not a takeover). The retry then stops; the second lock stays held
// (the session renewed, no lock renewed on its own), and its Unlock
// releases it.
func scenarioSessionUnlockRetried(t *testing.T, e lockEnv, name string) {
	ctx := context.Background()
	var (
		b   *Lock
		got <-chan *Lease
	)
	st, locks, leases, _ := unlockDidNotLand(t, e, name, func(l *Lock) {
		b = e.process(t, l.name, "b")
		got = lockAsync(t, b)
		e.waitQueued(t, l.name, 1)
	})
	every := locks[0].cfg.renewEvery()
	token := leases[0].Token()
	renewals := st.sessionRenewals.Load()
	st.fail.Store(false)
	healed := time.Now()

	var lb *Lease
	select {
	case lb = <-got:
		require.NotNil(t, lb)
	case <-time.After(10 * scenarioLease):
		t.Fatal("the waiter was not given the lock the retried unlock freed")
	}
	tries := st.triesOf(leases[0])
	last := tries[len(tries)-1]
	require.NoError(t, last.err, "the last try landed")
	t.Logf("the unlock of token %d: %d tries, the last landed %v after the outage ended", token, len(tries), last.at.Sub(healed))
	// The try under way when the outage ends pauses before its next
	// attempt (defaultBackOff: 50-150ms after a first failure, growing),
	// and the next try comes a renewal interval after the last.
	assert.LessOrEqual(t, last.at.Sub(healed), 4*every, "the retry frees the lock within a few renewal intervals")
	for i, u := range tries[:len(tries)-1] {
		assert.Error(t, u.err, "try %d: only the last lands", i)
	}
	assert.Equal(t, token+1, lb.Token(), "the next token")
	assert.False(t, lb.TookOver(), "freed by the retried unlock, not taken over")
	assert.True(t, lb.HandedOff(), "handed on by the retried unlock")

	<-time.After(3 * every) // the window in which a retry that went on would try again
	assert.Len(t, st.triesOf(leases[0]), len(tries), "the retry stopped once the unlock landed")
	select {
	case <-leases[1].Done():
		t.Fatalf("the other lock was lost: %v", leases[1].Err())
	default:
	}
	assert.Greater(t, st.sessionRenewals.Load(), renewals, "the session went on renewing")
	assert.Zero(t, st.lockRenewals.Load(), "no lock renewed on its own")
	require.NoError(t, b.Unlock(ctx))
	require.NoError(t, locks[1].Unlock(ctx))
	assert.ErrorIs(t, leases[1].Err(), ErrReleased)
}

// scenarioSessionLostDuringUnlockRetry: as scenarioSessionUnlockRetried,
// but the outage goes on, and once the retry has begun the Scope's
// session is cut off (its renewals fail). The other lock is lost with the
// session, within a lease of its last acknowledged renewal's send, and
// taken over by a process of its own no sooner than a lease after that
// send. The retry stops with the session: while nobody takes the first
// lock over (which would also end it: a try that fails reads the row),
// no try comes later than a finish window after the loss (the try under
// way ends its window), and none lands; then a process of its own takes
// that lock over too, with the next token.
func scenarioSessionLostDuringUnlockRetry(t *testing.T, e lockEnv, name string) {
	ctx := context.Background()
	st, locks, leases, _ := unlockDidNotLand(t, e, name, nil)
	every := locks[0].cfg.renewEvery()
	b1 := e.process(t, locks[1].name, "b")
	got := make(chan *Lease, 1)
	var tookAt time.Time
	go func() {
		lb, err := b1.Lock(ctx)
		assert.NoError(t, err)
		tookAt = time.Now()
		got <- lb
	}()
	st.cutOff(t)

	lostAt, last := requireLostInTime(t, &st.sessionTap, leases[1:], scenarioLease)
	var lb1 *Lease
	select {
	case lb1 = <-got:
		require.NotNil(t, lb1)
	case <-time.After(10 * scenarioLease):
		t.Fatal("the other lock was not taken over")
	}
	assert.True(t, lb1.TookOver(), "the other lock taken over")
	assert.Equal(t, leases[1].Token()+1, lb1.Token(), "with the next token")
	assert.GreaterOrEqual(t, tookAt.Sub(last), scenarioLease, "no takeover within a lease of the session's last acknowledged renewal's send")

	<-time.After(time.Until(lostAt[0].Add(scenarioFinish + 2*every))) // the window in which a retry that went on would try again
	tries := st.triesOf(leases[0])
	for i, u := range tries {
		assert.Error(t, u.err, "try %d: none lands", i)
	}
	end := tries[len(tries)-1].at
	t.Logf("the unlock of token %d: %d tries, the last %v after the session was lost", leases[0].Token(), len(tries), end.Sub(lostAt[0]))
	assert.LessOrEqual(t, end.Sub(lostAt[0]), scenarioFinish+lossSlack, "the retry stops once its try under way ends")

	b0 := e.process(t, locks[0].name, "b")
	lb0, err := b0.Lock(ctx)
	require.NoError(t, err)
	assert.True(t, lb0.TookOver(), "the lock whose unlock never landed is taken over")
	assert.Equal(t, leases[0].Token()+1, lb0.Token(), "with the next token")
	st.fail.Store(false)
	require.NoError(t, b0.Unlock(ctx))
	require.NoError(t, b1.Unlock(ctx))
	assert.Len(t, st.triesOf(leases[0]), len(tries), "the retry made no try once the outage ended")
	assert.ErrorIs(t, locks[1].Unlock(ctx), ErrLeaseLost, "the other lock's Unlock is fenced")
}
