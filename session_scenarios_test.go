//go:build go1.25

package spanmutex

// Scenarios of the locks a Scope holds through its session (issue 44), in
// lockScenarios: on the simulated Spanner and on the emulator.

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// sessionWatch wraps a store: it counts its lock renewals and its
// session's (sessionTap), and can make the session's renewals fail, as if
// the process were cut off from Spanner.
type sessionWatch struct {
	lockStore
	sessionTap
	lockRenewals atomic.Int64
}

func (s *sessionWatch) renew(ctx context.Context, l *Lease) error {
	s.lockRenewals.Add(1)
	return s.lockStore.renew(ctx, l)
}

func (s *sessionWatch) sessionStore(ctx context.Context) sessionStore {
	return s.tap(s.lockStore.(sessionStores).sessionStore(ctx))
}

// sessionTap watches the session of a process's store, whatever the
// primitive: it counts the session's acknowledged renewals, notes the
// local send time of the last (acked), and can make them fail (silent),
// as if the process were cut off from Spanner. The write that starts a
// session is the first that names it (a lock's, an entry's), which it
// does not see: the anchor from which the session's holder counts its
// lease is the last renewal's send once one is acknowledged (cutOff).
type sessionTap struct {
	silent          atomic.Bool
	sessionRenewals atomic.Int64
	mu              sync.Mutex
	lastAck         time.Time
}

// tap returns inner, the store of a session, watched by w (nil if inner
// is nil: the table has no sessions).
func (w *sessionTap) tap(inner sessionStore) sessionStore {
	if inner == nil {
		return nil
	}
	return watchedSession{sessionStore: inner, w: w}
}

// acked notes an acknowledged renewal sent at sent.
func (w *sessionTap) acked(sent time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lastAck = latest(w.lastAck, sent)
}

// lastAckSent returns when the last acknowledged renewal of the session
// was sent, by the local clock.
func (w *sessionTap) lastAckSent() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastAck
}

// cutOff waits until a renewal of the session is acknowledged (the
// session's anchor is then a renewal's send, which the tap sees) and
// makes every later one fail.
func (w *sessionTap) cutOff(t *testing.T) {
	t.Helper()
	waitFor(t, time.Minute, "a session renewal acknowledged", func() bool { return w.sessionRenewals.Load() > 0 })
	w.silent.Store(true)
}

// watchedSession is the session store of a sessionTap.
type watchedSession struct {
	sessionStore
	w *sessionTap
}

func (s watchedSession) renewSession(ctx context.Context, id string) (time.Time, error) {
	if s.w.silent.Load() {
		return time.Time{}, status.Error(codes.Unavailable, "silenced")
	}
	sent := time.Now()
	at, err := s.sessionStore.renewSession(ctx, id)
	if err == nil {
		s.w.sessionRenewals.Add(1)
		s.w.acked(sent)
	}
	return at, err
}

// lossSlack is how late, past a lease after the session's last
// acknowledged write was sent, a scenario may see a lease lost with it:
// the wake-up of the session's loop and of the test's goroutine on a
// loaded machine (none in virtual time).
const lossSlack = 100 * time.Millisecond

// requireLostInTime requires each of leases lost with their session
// (requireLostWithSession) no later than a lease (plus lossSlack) after
// the send of the session's last acknowledged renewal (tap's, cut off
// after one: cutOff); it returns when each was seen lost and that send
// time.
func requireLostInTime(t *testing.T, tap *sessionTap, leases []*Lease, lease time.Duration) ([]time.Time, time.Time) {
	t.Helper()
	lostAt := requireLostWithSession(t, leases, 2*lease)
	last := tap.lastAckSent()
	require.False(t, last.IsZero(), "a renewal of the session was acknowledged")
	for i, at := range lostAt {
		assert.LessOrEqual(t, at.Sub(last), lease+lossSlack, "lease %d: given up within a lease of the last acknowledged renewal's send", i)
	}
	return lostAt, last
}

// holdThroughSession takes n locks named name-i in one Scope made
// WithSessions, on st, and requires each to be held through one session.
func holdThroughSession(t *testing.T, e lockEnv, name string, n int, st lockStore) ([]*Lock, []*Lease) {
	t.Helper()
	scope := e.newScope()
	scope.sessionsOn = true // WithSessions, on the environment's Scope
	var (
		locks  []*Lock
		leases []*Lease
	)
	for i := range n {
		l := e.newLock(t, fmt.Sprintf("%s-%d", name, i), "a", scope, st)
		lease, err := l.Lock(context.Background())
		require.NoError(t, err)
		require.NotEmpty(t, lease.session, "held through the session")
		require.Equal(t, leases0(leases, lease).session, lease.session, "one session for the Scope")
		locks, leases = append(locks, l), append(leases, lease)
	}
	return locks, leases
}

// leases0 returns the first of leases, or l if there is none.
func leases0(leases []*Lease, l *Lease) *Lease {
	if len(leases) == 0 {
		return l
	}
	return leases[0]
}

// scenarioSessionRenewsOnce: a Scope holding 3 locks through its session
// for 2 leases renews the session about every third of a lease (6 times,
// give or take one) and none of the locks on its own; Unlock releases
// each.
func scenarioSessionRenewsOnce(t *testing.T, e lockEnv, name string) {
	st := &sessionWatch{lockStore: e.store(t)}
	locks, leases := holdThroughSession(t, e, name, 3, st)
	before, lockBefore := st.sessionRenewals.Load(), st.lockRenewals.Load()
	<-time.After(2 * scenarioLease) // the hold being measured, not a synchronisation
	renewals := st.sessionRenewals.Load() - before
	t.Logf("3 locks held for %v: %d session renewals, %d lock renewals", 2*scenarioLease, renewals, st.lockRenewals.Load()-lockBefore)
	assert.InDelta(t, 6, renewals, 1.5, "one renewal every third of the lease, whatever the Scope holds")
	assert.Zero(t, st.lockRenewals.Load()-lockBefore, "no lock renews on its own")
	for i, l := range locks {
		require.NoError(t, l.Unlock(context.Background()))
		assert.ErrorIs(t, leases[i].Err(), ErrReleased)
	}
}

// scenarioSessionCutOffLosesEveryLease: a Scope holding 3 locks through
// its session is cut off from Spanner (its session's renewals fail): each
// of the 3 leases is lost (Done, ErrLeaseLost naming the session) within
// a lease of the cut; a process of its own then takes each over, with the
// next token, no sooner than a lease after the session's last renewal
// (at most a renewal interval before the cut), and never before the old
// holder gave it up; the old holder's Unlock is fenced.
func scenarioSessionCutOffLosesEveryLease(t *testing.T, e lockEnv, name string) {
	ctx := context.Background()
	st := &sessionWatch{lockStore: e.store(t)}
	locks, leases := holdThroughSession(t, e, name, 3, st)
	st.cutOff(t)
	cut := time.Now()
	lostAt, last := requireLostInTime(t, &st.sessionTap, leases, scenarioLease)
	for i, at := range lostAt {
		assert.Less(t, at.Sub(cut), scenarioLease, "lease %d: given up within a lease of the cut", i)
	}
	for i, l := range locks {
		b := e.process(t, l.name, "b")
		lb, err := b.Lock(ctx)
		require.NoError(t, err)
		took := time.Now()
		assert.True(t, lb.TookOver(), "%s taken over", l.name)
		assert.Equal(t, leases[i].Token()+1, lb.Token())
		assert.GreaterOrEqual(t, took.Sub(cut), scenarioLease-scenarioLease/3, "%s: no takeover before a lease passed unrenewed", l.name)
		assert.GreaterOrEqual(t, took.Sub(last), scenarioLease, "%s: no takeover within a lease of the last acknowledged renewal's send", l.name)
		assert.False(t, took.Before(lostAt[i]), "%s: taken after the old holder gave it up", l.name)
		require.ErrorIs(t, l.Unlock(ctx), ErrLeaseLost, "the old holder's Unlock is fenced")
		require.NoError(t, b.Unlock(ctx))
	}
}
