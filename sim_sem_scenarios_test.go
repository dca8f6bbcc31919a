//go:build go1.25

package spanmutex

// Semaphore scenarios written against a semStore factory, so that the same
// scenario runs on the simulated Spanner (TestSemScenariosInTheSimulation,
// in virtual time) and on the emulator (TestSemScenariosOnTheEmulator):
// the simulated store stays faithful to the one on Spanner.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// semEnv is where a semaphore scenario runs.
type semEnv struct {
	// store returns the semStore of a new process.
	store func(t *testing.T) semStore
	// queued counts the entries in the queue of name.
	queued func(t *testing.T, name string) int
}

// process returns a Semaphore of size in a process of its own, with a
// lease of scenarioLease and a finish timeout of semScenarioFinish (unless
// more says otherwise), on st (a new process's store if nil).
func (e semEnv) process(t *testing.T, name, owner string, size int64, st semStore, more ...LockOption) *Semaphore {
	t.Helper()
	if st == nil {
		st = e.store(t)
	}
	cfg, err := configure(name, append([]LockOption{WithLease(scenarioLease), WithOwner(owner), WithScope(NewScope(WithoutWakeUps())),
		WithFinishTimeout(semScenarioFinish)}, more...))
	require.NoError(t, err)
	return &Semaphore{name: name, size: size, cfg: cfg, store: st}
}

// semScenarioFinish is the scenarios' finish timeout: how long a Release
// keeps trying. A scenario whose first settle's answer comes back lost a
// lease late leaves its retry the rest; on the emulator, which runs one
// read-write transaction at a time for all the parallel tests that share
// it, a retry waited past a 2s timeout (twice in full go test ./... runs,
// its error DeadlineExceeded), so the scenarios allow 5s.
const semScenarioFinish = 5 * time.Second

// silentSem wraps a store whose renewals can be made to fail, as if its
// process were cut off from Spanner.
type silentSem struct {
	semStore
	silent atomic.Bool
}

func (s *silentSem) renewEntry(ctx context.Context, name string, key queueKey) (time.Time, error) {
	if s.silent.Load() {
		return time.Time{}, status.Error(codes.Unavailable, "silenced")
	}
	return s.semStore.renewEntry(ctx, name, key)
}

// acquireAsync calls s.Acquire(n) in a goroutine and sends the lease.
func acquireAsync(t *testing.T, s *Semaphore, n int64) <-chan *Lease {
	got := make(chan *Lease, 1)
	go func() {
		lease, err := s.Acquire(context.Background(), n)
		assert.NoError(t, err)
		got <- lease
	}()
	return got
}

func (e semEnv) waitQueued(t *testing.T, name string, n int) {
	t.Helper()
	waitFor(t, time.Minute, fmt.Sprintf("%d queued", n), func() bool { return e.queued(t, name) >= n })
}

// semScenarios run on any semEnv. Each leaves no lease held.
var semScenarios = []scenario[semEnv]{
	{"NoBarging", semScenarioNoBarging},
	{"SilentHolderCostsOneLease", semScenarioSilentHolder},
	{"DeadEntryAtFreeSemaphore", semScenarioDeadEntryAtFree},
	{"ResizeBelowWaiterThatCannotFit", semScenarioResizeBelowWaiter(4)},
	{"ResizeBelowWaiterThatFits", semScenarioResizeBelowWaiter(3)},
	{"WaiterRenewalsDenied", semScenarioWaiterRenewalsFail(codes.PermissionDenied)},
	{"WaiterRenewalsUnavailable", semScenarioWaiterRenewalsFail(codes.Unavailable)},
	{"ReleaseTakenOverFailsFirst", semScenarioReleaseTakenOverFailsFirst},
	{"ReleaseAnswerLost", semScenarioReleaseAnswerLost(0)},
	{"ReleaseAnswerLostPastTheLease", semScenarioReleaseAnswerLost(scenarioLease)},
	{"WaiterWithoutWakeUpsReadsSparingly", semScenarioWaiterReadsSparingly},
	{"ReleaseFailsThroughTheWindow", semScenarioReleaseFailsThroughTheWindow},
	{"SessionRenewsOnce", semScenarioSessionRenewsOnce},
	{"SessionCutOffLosesEveryLease", semScenarioSessionCutOffLosesEveryLease},
}

// semScenarioReleaseFailsThroughTheWindow: every try of a holder's Release
// fails before reaching Spanner for its whole finish window: Release
// returns an error matching ErrOutage, on one line, not the transport's
// error alone; the lease has ended; the entry, no longer renewed, lapses
// after its lease, and another process takes the permit over.
func semScenarioReleaseFailsThroughTheWindow(t *testing.T, e semEnv, name string) {
	ctx := context.Background()
	st := &flakySem{semStore: e.store(t)}
	st.loseSettles.Store(-1 << 20)
	const window = 1500 * time.Millisecond
	a := e.process(t, name, "a", 1, st, WithFinishTimeout(window))
	la, err := a.Acquire(ctx, 1)
	require.NoError(t, err)
	st.failSettles.Store(1 << 20)
	began := time.Now()
	requireFinishOutage(t, a.Release(ctx), began, window, la)
	b := e.process(t, name, "b", 1, nil)
	lb, err := b.Acquire(ctx, 1)
	require.NoError(t, err)
	assert.True(t, lb.TookOver(), "the unreleased entry lapsed and was taken over")
	require.NoError(t, b.Release(ctx))
}

// lookCounter counts a process's reads of a semaphore (look).
type lookCounter struct {
	semStore
	looks atomic.Int64
}

func (s *lookCounter) look(ctx context.Context, name string) (semView, error) {
	s.looks.Add(1)
	return s.semStore.look(ctx, name)
}

// semScenarioWaiterReadsSparingly (issue 44): a waiter whose Scope does not
// listen for wake-ups (every scenario process's) waits behind a holder of
// another process that holds a semaphore of 1 for headHold; it reads at
// most 5 times a second (its reads space out to maxPoll), and the Release
// grants it.
func semScenarioWaiterReadsSparingly(t *testing.T, e semEnv, name string) {
	ctx := context.Background()
	a := e.process(t, name, "a", 1, nil)
	la, err := a.Acquire(ctx, 1)
	require.NoError(t, err)
	st := &lookCounter{semStore: e.store(t)}
	b := e.process(t, name, "b", 1, st)
	got := acquireAsync(t, b, 1)
	e.waitQueued(t, name, 2)
	looks := countDuringHold(&st.looks)
	require.NoError(t, a.Release(ctx))
	released := time.Now()
	lb := <-got
	require.NotNil(t, lb)
	t.Logf("a waiter without wake-ups made %d reads in a %v hold (%.1f a second); granted %v after the Release returned",
		looks, headHold, float64(looks)/headHold.Seconds(), time.Since(released).Round(time.Millisecond))
	assert.LessOrEqual(t, float64(looks)/headHold.Seconds(), maxWaitReads, "reads a second behind the holder")
	assert.Equal(t, la.Token()+1, lb.Token())
	require.NoError(t, b.Release(ctx))
}

// semScenarioNoBarging: with 2 of 3 permits held and a request for 3
// queued, a TryAcquire of 1 is refused; the Release grants the head (token
// +1, handed off).
func semScenarioNoBarging(t *testing.T, e semEnv, name string) {
	ctx := context.Background()
	a := e.process(t, name, "a", 3, nil)
	la, err := a.Acquire(ctx, 2)
	require.NoError(t, err)
	big := e.process(t, name, "big", 3, nil)
	got := acquireAsync(t, big, 3)
	e.waitQueued(t, name, 2)
	_, err = e.process(t, name, "small", 3, nil).TryAcquire(ctx, 1)
	var he *HeldError
	require.ErrorAs(t, err, &he, "a waiter is queued before it")
	assert.Equal(t, 1, he.Waiters)
	require.NoError(t, a.Release(ctx))
	lb := <-got
	require.NotNil(t, lb)
	assert.Equal(t, la.Token()+1, lb.Token())
	assert.True(t, lb.HandedOff(), "granted by the Release")
	require.NoError(t, big.Release(ctx))
	assert.Zero(t, e.queued(t, name))
}

// semScenarioSilentHolder: a holder cut off from Spanner loses its lease
// (Done closes); a waiter gets the permits after the holder's lease, as a
// takeover.
func semScenarioSilentHolder(t *testing.T, e semEnv, name string) {
	ctx := context.Background()
	st := &silentSem{semStore: e.store(t)}
	a := e.process(t, name, "a", 1, st)
	la, err := a.Acquire(ctx, 1)
	require.NoError(t, err)
	st.silent.Store(true)
	b := e.process(t, name, "b", 1, nil)
	lb, err := b.Acquire(ctx, 1)
	require.NoError(t, err)
	defer func() { assert.NoError(t, b.Release(ctx)) }()
	select {
	case <-la.Done():
	default:
		t.Error("the silent holder's lease had not ended when its permits were granted again")
	}
	assert.Equal(t, la.Token()+1, lb.Token())
	assert.True(t, lb.TookOver())
	assert.ErrorIs(t, a.Release(ctx), ErrLeaseLost)
}

// semScenarioDeadEntryAtFree: a process died with a waiting entry at the
// head of a semaphore that is then released: the Release grants the dead
// entry, and the live waiter behind it takes its permits over after one
// lease (token +2), not after the entry's time to live.
func semScenarioDeadEntryAtFree(t *testing.T, e semEnv, name string) {
	ctx := context.Background()
	a := e.process(t, name, "a", 1, nil)
	la, err := a.Acquire(ctx, 1)
	require.NoError(t, err)
	dead := NewScope(WithoutWakeUps()).newWaiterID()
	_, err = e.store(t).settle(ctx, name, semRequest{me: dead, owner: "dead", n: 1, size: 1, lease: scenarioLease, op: semAcquire})
	require.NoError(t, err)
	require.NoError(t, a.Release(ctx))
	b := e.process(t, name, "b", 1, nil)
	lb, err := b.Acquire(ctx, 1)
	require.NoError(t, err)
	assert.Equal(t, la.Token()+2, lb.Token(), "granted to the dead entry (one token), then taken over (the next)")
	assert.True(t, lb.TookOver())
	assert.Equal(t, 1, e.queued(t, name), "only b's entry is left")
	assert.NoError(t, b.Release(ctx))
}

// TestSemScenariosInTheSimulation runs semScenarios on the simulated
// Spanner, in virtual time, without faults.
func TestSemScenariosInTheSimulation(t *testing.T) {
	for _, sc := range semScenarios {
		t.Run(sc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := &semSim{rules: semSimRules{}, tokens: map[int64]bool{}, takenOver: map[int64]bool{}, grantSize: map[int64]int64{}, start: time.Now(), idOf: map[string]*semProc{},
					sessions: map[string][]simSession{}}
				h.par.lease = scenarioLease
				h.rng = rand.New(rand.NewPCG(1, 2))
				slot := 0
				e := semEnv{
					store: func(t *testing.T) semStore { slot++; return h.bareProc(slot) },
					queued: func(t *testing.T, name string) int {
						h.mu.Lock()
						defer h.mu.Unlock()
						return len(h.entries)
					},
				}
				sc.run(t, e, "scenario")
				settleBubble()
				assert.Empty(t, h.violations)
			})
		})
	}
}

// TestSemScenariosOnTheEmulator runs semScenarios on the emulator, in both
// dialects, each process with a client of its own.
func TestSemScenariosOnTheEmulator(t *testing.T) {
	needEmulator(t)
	t.Parallel()
	scenariosOnTheEmulator(t, semScenarios, func(t *testing.T, db string) semEnv {
		cfg, err := configure[LockOption]("scenario", nil)
		require.NoError(t, err)
		reader := newClient(t, db)
		return semEnv{
			store: func(t *testing.T) semStore {
				st := cfg.newStore(newClient(t, db))
				st.needsQueue, st.semaphore = true, true
				return st
			},
			queued: func(t *testing.T, name string) int { return len(queuedIDs(t, reader, name)) },
		}
	})
}
