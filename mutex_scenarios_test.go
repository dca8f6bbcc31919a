//go:build go1.25

package spanmutex

// Mutex scenarios written against a mutexStore factory, so that the same
// scenario runs on the simulated Spanner (TestMutexScenariosInTheSimulation,
// in virtual time) and on the emulator (TestMutexScenariosOnTheEmulator):
// the simulated store stays faithful to the one on Spanner.

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mutexEnv is where a Mutex scenario runs.
type mutexEnv struct {
	// store returns the mutexStore of a new process.
	store func(t *testing.T) mutexStore
}

// newMutex makes a Mutex named name with owner owner in scope on st, as
// New would, without a client: a lease of scenarioLease, no jitter, a
// finish timeout of scenarioFinish.
func (e mutexEnv) newMutex(t *testing.T, name, owner string, scope *Scope, st mutexStore) *Mutex {
	t.Helper()
	m, err := newMutex(name, []MutexOption{WithLease(scenarioLease), WithJitter(0), WithOwner(owner), WithScope(scope),
		WithFinishTimeout(scenarioFinish)})
	require.NoError(t, err)
	m.store = st
	return m
}

// process returns a Mutex of a process of its own: its own store, and a
// Scope without sessions.
func (e mutexEnv) process(t *testing.T, name, owner string) *Mutex {
	return e.newMutex(t, name, owner, NewScope(WithoutWakeUps()), e.store(t))
}

// mutexScenarios run on any mutexEnv. Each leaves no section running.
var mutexScenarios = []scenario[mutexEnv]{
	{"SessionRenewsOnce", mutexScenarioSessionRenewsOnce},
	{"SessionCutOffLosesEverySection", mutexScenarioSessionCutOffLosesEverySection},
}

// TestMutexScenariosInTheSimulation runs mutexScenarios on the simulated
// Spanner, in virtual time, without faults; the checker follows the
// schedules' section only (simMutexName), which no scenario runs.
func TestMutexScenariosInTheSimulation(t *testing.T) {
	for _, sc := range mutexScenarios {
		t.Run(sc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mh := newMutexHarness(1)
				mh.par = simMutexParams{procs: 1, lease: scenarioLease, maxAttempts: 3, finish: scenarioFinish, bound: time.Minute}
				mh.maxWM = mh.par.lease
				mh.host(simMutexRules{}, nil, nil)
				slot := 0
				e := mutexEnv{store: func(*testing.T) mutexStore {
					p := mh.newProcess(slot, 0)
					slot++
					return &simMutexConn{db: mh.db, p: p}
				}}
				sc.run(t, e, "scenario")
				settleBubble()
				mh.h.mu.Lock()
				defer mh.h.mu.Unlock()
				assert.Empty(t, mh.h.violations)
			})
		})
	}
}

// TestMutexScenariosOnTheEmulator runs mutexScenarios on the emulator, in
// both dialects, each process with a client of its own.
func TestMutexScenariosOnTheEmulator(t *testing.T) {
	needEmulator(t)
	t.Parallel()
	scenariosOnTheEmulator(t, mutexScenarios, func(t *testing.T, db string) mutexEnv {
		cfg, err := configure[MutexOption]("scenario", nil)
		require.NoError(t, err)
		return mutexEnv{store: func(t *testing.T) mutexStore { return cfg.newStore(newClient(t, db)) }}
	})
}

// mutexWatch wraps a Mutex's store: it counts the leases' own renewals,
// and watches the session (sessionTap). A Mutex on it keys its Scope's
// session by database "", as in the simulation (Mutex.database): the same
// for every Mutex of a scenario's Scope.
type mutexWatch struct {
	mutexStore
	sessionTap
	leaseRenewals atomic.Int64
}

func (s *mutexWatch) renew(ctx context.Context, l *Lease) error {
	s.leaseRenewals.Add(1)
	return s.mutexStore.renew(ctx, l)
}

func (s *mutexWatch) sessionStore(ctx context.Context) sessionStore {
	return s.tap(s.mutexStore.(sessionStores).sessionStore(ctx))
}

// sectionsThroughSession runs n sections (startHolder), of Mutexes named
// name-i of one Scope made WithSessions, on st, and requires each to be
// held through one session; it returns the holders and their leases.
func sectionsThroughSession(t *testing.T, e mutexEnv, name string, n int, st mutexStore) ([]*holder, []*Lease) {
	t.Helper()
	scope := NewScope(WithoutWakeUps())
	scope.sessionsOn = true // WithSessions
	var (
		holders []*holder
		leases  []*Lease
	)
	for i := range n {
		h := startHolder(t, e.newMutex(t, fmt.Sprintf("%s-%d", name, i), "a", scope, st))
		l := h.acquired(t)
		require.NotEmpty(t, l.session, "held through the session")
		require.Equal(t, leases0(leases, l).session, l.session, "one session for the Scope")
		holders, leases = append(holders, h), append(leases, l)
	}
	return holders, leases
}

// mutexScenarioSessionRenewsOnce: a Scope running 3 sections (of 3
// Mutexes) through its session for 2 leases renews the session about
// every third of a lease (6 times, give or take one) and none of the
// sections' leases on its own; each Run, its section released, returns
// Executed, nil, its lease released.
func mutexScenarioSessionRenewsOnce(t *testing.T, e mutexEnv, name string) {
	st := &mutexWatch{mutexStore: e.store(t)}
	holders, leases := sectionsThroughSession(t, e, name, 3, st)
	before, own := st.sessionRenewals.Load(), st.leaseRenewals.Load()
	<-time.After(2 * scenarioLease) // the hold being measured, not a synchronisation
	renewals := st.sessionRenewals.Load() - before
	t.Logf("3 sections held for %v: %d session renewals, %d lease renewals", 2*scenarioLease, renewals, st.leaseRenewals.Load()-own)
	assert.InDelta(t, 6, renewals, 1.5, "one renewal every third of the lease, whatever the Scope holds")
	assert.Zero(t, st.leaseRenewals.Load()-own, "no section's lease renews on its own")
	for i, h := range holders {
		r := h.result(t)
		assert.Equal(t, Executed, r.outcome, "section %d", i)
		assert.NoError(t, r.err, "section %d", i)
		assert.ErrorIs(t, leases[i].Err(), ErrReleased, "section %d", i)
	}
}

// mutexScenarioSessionCutOffLosesEverySection: a Scope running 3 sections
// through its session is cut off from Spanner (its session's renewals
// fail): each lease is lost (Done, ErrLeaseLost naming the session) no
// later than a lease after the send of the session's last acknowledged
// renewal, and each section's ctx is cancelled with the loss; a Mutex of
// another process then takes each section over, with the next token, no
// sooner than a lease after that send, and never before the old holder
// gave it up; the old holder's Run, once its section returns, reports the
// finish fenced (Executed, ErrLeaseLost).
func mutexScenarioSessionCutOffLosesEverySection(t *testing.T, e mutexEnv, name string) {
	ctx := context.Background()
	st := &mutexWatch{mutexStore: e.store(t)}
	holders, leases := sectionsThroughSession(t, e, name, 3, st)
	st.cutOff(t)
	lostAt, last := requireLostInTime(t, &st.sessionTap, leases, scenarioLease)
	for i, h := range holders {
		select {
		case cause := <-h.lost:
			var lost *leaseLostError
			assert.ErrorAs(t, cause, &lost, "section %d: its ctx is cancelled with the loss", i)
		case <-time.After(time.Minute):
			t.Fatalf("section %d: its ctx was not cancelled", i)
		}
	}
	for i, h := range holders {
		l := leases[i]
		b := e.process(t, l.name, "b")
		var (
			took   *Lease
			tookAt time.Time
		)
		out, err := b.Run(ctx, func(_ context.Context, l *Lease) error { took, tookAt = l, time.Now(); return nil })
		require.NoError(t, err)
		require.Equal(t, Executed, out)
		assert.True(t, took.TookOver(), "%s taken over", l.name)
		assert.Equal(t, l.Token()+1, took.Token(), "%s: the next token", l.name)
		assert.GreaterOrEqual(t, tookAt.Sub(last), scenarioLease, "%s: no takeover within a lease of the last acknowledged renewal's send", l.name)
		assert.False(t, tookAt.Before(lostAt[i]), "%s: taken after the old holder gave it up", l.name)
		r := h.result(t)
		assert.Equal(t, Executed, r.outcome, "%s", l.name)
		assert.ErrorIs(t, r.err, ErrLeaseLost, "%s: the old holder's finish is fenced", l.name)
	}
}
