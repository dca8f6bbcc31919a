//go:build go1.25

package spanmutex

// Scenarios of the permits a Scope holds through its session (issue 44),
// in semScenarios: on the simulated Spanner and on the emulator.

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// semWatch wraps a Semaphore's store: it counts the entries' own
// renewals, and watches the session (sessionTap).
type semWatch struct {
	semStore
	sessionTap
	entryRenewals atomic.Int64
}

func (s *semWatch) renewEntry(ctx context.Context, name string, key queueKey) (time.Time, error) {
	s.entryRenewals.Add(1)
	return s.semStore.renewEntry(ctx, name, key)
}

func (s *semWatch) renewEntryThrough(ctx context.Context, name string, key queueKey, id string, lease time.Duration, start *sessionRow) (time.Time, error) {
	s.entryRenewals.Add(1)
	return s.semStore.renewEntryThrough(ctx, name, key, id, lease, start)
}

func (s *semWatch) sessionStore(ctx context.Context) sessionStore {
	return s.tap(s.semStore.(sessionStores).sessionStore(ctx))
}

// holdPermitsThroughSession makes n Semaphores of size n named name, of
// one Scope made WithSessions, on st, each acquire a permit, and requires
// each to be held through one session.
func holdPermitsThroughSession(t *testing.T, e semEnv, name string, n int, st semStore) ([]*Semaphore, []*Lease) {
	t.Helper()
	scope := NewScope(WithoutWakeUps())
	scope.sessionsOn = true // WithSessions
	var (
		sems   []*Semaphore
		leases []*Lease
	)
	for range n {
		s := e.process(t, name, "a", int64(n), st, WithScope(scope))
		l, err := s.Acquire(context.Background(), 1)
		require.NoError(t, err)
		require.NotEmpty(t, l.session, "held through the session")
		require.Equal(t, leases0(leases, l).session, l.session, "one session for the Scope")
		sems, leases = append(sems, s), append(leases, l)
	}
	return sems, leases
}

// semScenarioSessionRenewsOnce: a Scope holding the 3 permits of a
// semaphore (3 holders) through its session for 2 leases renews the
// session about every third of a lease (6 times, give or take one) and
// none of the holders' entries on its own; Release releases each.
func semScenarioSessionRenewsOnce(t *testing.T, e semEnv, name string) {
	st := &semWatch{semStore: e.store(t)}
	sems, leases := holdPermitsThroughSession(t, e, name, 3, st)
	before, own := st.sessionRenewals.Load(), st.entryRenewals.Load()
	<-time.After(2 * scenarioLease) // the hold being measured, not a synchronisation
	renewals := st.sessionRenewals.Load() - before
	t.Logf("3 holders held for %v: %d session renewals, %d entry renewals", 2*scenarioLease, renewals, st.entryRenewals.Load()-own)
	assert.InDelta(t, 6, renewals, 1.5, "one renewal every third of the lease, whatever the Scope holds")
	assert.Zero(t, st.entryRenewals.Load()-own, "no holder renews its entry on its own")
	for i, s := range sems {
		require.NoError(t, s.Release(context.Background()))
		assert.ErrorIs(t, leases[i].Err(), ErrReleased)
	}
	assert.Zero(t, e.queued(t, name), "every entry released")
}

// semScenarioSessionCutOffLosesEveryLease: a Scope holding the 3 permits
// of a semaphore through its session is cut off from Spanner (its
// session's renewals fail): each of the 3 leases is lost (Done,
// ErrLeaseLost naming the session) no later than a lease after the send
// of the session's last acknowledged renewal; a process of its own then
// takes the 3 permits over, with the next token, no sooner than a lease
// after that send and never before the holders gave them up; the old
// holders' Releases are fenced.
func semScenarioSessionCutOffLosesEveryLease(t *testing.T, e semEnv, name string) {
	ctx := context.Background()
	st := &semWatch{semStore: e.store(t)}
	sems, leases := holdPermitsThroughSession(t, e, name, 3, st)
	st.cutOff(t)
	lostAt, last := requireLostInTime(t, &st.sessionTap, leases, scenarioLease)
	b := e.process(t, name, "b", 3, nil)
	lb, err := b.Acquire(ctx, 3)
	require.NoError(t, err)
	took := time.Now()
	assert.True(t, lb.TookOver(), "taken over")
	assert.Equal(t, leases[2].Token()+1, lb.Token(), "the next token")
	assert.GreaterOrEqual(t, took.Sub(last), scenarioLease, "no takeover within a lease of the last acknowledged renewal's send")
	for i, at := range lostAt {
		assert.False(t, took.Before(at), "lease %d: taken after its holder gave it up", i)
	}
	for i, s := range sems {
		assert.ErrorIs(t, s.Release(ctx), ErrLeaseLost, "holder %d: its Release is fenced", i)
	}
	require.NoError(t, b.Release(ctx))
}
