//go:build go1.25

package spanmutex

// Lock scenarios written against a lockStore factory, so that the same
// scenario runs on the simulated Spanner (TestSimScenarios, in virtual
// time) and on the emulator (give lockEnv a factory of spannerStores).

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// lockEnv is where a lock scenario runs.
type lockEnv struct {
	// store returns the lockStore of a new process (one per Scope).
	store func(t *testing.T) lockStore
	// database names the database in the Locks' local keys.
	database string
	// scope, if set, makes each process's Scope instead of NewScope (the
	// simulation's listen on no real socket).
	scope func() *Scope
	// queued counts the entries in the queue of lock name.
	queued func(t *testing.T, name string) int
}

// waitQueued waits until the queue of lock name holds n entries or more:
// the waiters started before have joined.
func (e lockEnv) waitQueued(t *testing.T, name string, n int) {
	t.Helper()
	waitFor(t, time.Minute, fmt.Sprintf("%d queued", n), func() bool { return e.queued(t, name) >= n })
}

// newScope returns the Scope of a new process.
func (e lockEnv) newScope() *Scope {
	if e.scope != nil {
		return e.scope()
	}
	return NewScope()
}

// scenarioLease is the lease of every Lock of the scenarios, and
// scenarioFinish their finish timeout.
const (
	scenarioLease  = time.Second
	scenarioFinish = 2 * time.Second
)

// requireFinishOutage requires err, from an Unlock or Release of lease
// begun at began that failed every try for its finish window, to match
// ErrOutage on one line saying the outcome is unknown, after the whole
// window, with the lease ended.
func requireFinishOutage(t *testing.T, err error, began time.Time, window time.Duration, lease *Lease) {
	t.Helper()
	require.ErrorIs(t, err, ErrOutage)
	requireOneLine(t, err, "whether it landed is unknown")
	assert.GreaterOrEqual(t, time.Since(began), window, "it kept trying for the finish window")
	assert.Error(t, lease.Err(), "the lease has ended")
}

// countDuringHold returns how much n grows while the holder holds for
// headHold.
func countDuringHold(n *atomic.Int64) int64 {
	before := n.Load()
	<-time.After(headHold) // the hold being measured, not a synchronisation
	return n.Load() - before
}

// maxWaitReads is how many reads a second a waiting call that no wake-up
// reaches may make behind a holder, averaged over headHold (issue 44).
const maxWaitReads = 5.0

// newLock makes a Lock named name with owner owner in scope on st, as
// NewLock would, without a client: a lease of scenarioLease, no
// jitter.
func (e lockEnv) newLock(t *testing.T, name, owner string, scope *Scope, st lockStore) *Lock {
	t.Helper()
	return e.newLockLease(t, name, owner, scope, st, scenarioLease)
}

// newLockLease is newLock with a lease of its own.
func (e lockEnv) newLockLease(t *testing.T, name, owner string, scope *Scope, st lockStore, lease time.Duration) *Lock {
	t.Helper()
	cfg, err := configure(name, []LockOption{WithLease(lease), WithJitter(0), WithOwner(owner),
		WithScope(scope), WithFinishTimeout(scenarioFinish)})
	require.NoError(t, err)
	return &Lock{name: name, cfg: cfg, store: st, key: localKey{database: e.database, table: cfg.table, name: name}, scope: scope}
}

// process returns a Lock of a process of its own (its own Scope and store).
func (e lockEnv) process(t *testing.T, name, owner string) *Lock {
	return e.newLock(t, name, owner, e.newScope(), e.store(t))
}

// silenceable wraps a store whose renewals can be made to fail, as if its
// process were cut off from Spanner.
type silenceable struct {
	lockStore
	silent atomic.Bool
}

func (s *silenceable) renew(ctx context.Context, l *Lease) error {
	if s.silent.Load() {
		return status.Error(codes.Unavailable, "silenced")
	}
	return s.lockStore.renew(ctx, l)
}

// lockAsync calls l.Lock in a goroutine of its own and sends the lease it
// returns (nil, the failure recorded, if it returned none).
func lockAsync(t *testing.T, l *Lock) <-chan *Lease {
	got := make(chan *Lease, 1)
	go func() {
		lease, err := l.Lock(context.Background())
		assert.NoError(t, err)
		got <- lease
	}()
	return got
}

// lockScenarios run on any lockEnv. Each leaves no lease held.
var lockScenarios = []scenario[lockEnv]{
	{"FIFO", scenarioFIFO},
	{"CancelledWaiterPassesOn", scenarioCancelledWaiterPassesOn},
	{"TryLockHeld", scenarioTryLockHeld},
	{"SameScopeHandOff", scenarioSameScopeHandOff},
	{"TakeOverAfterSilence", scenarioTakeOverAfterSilence},
	{"JoinAfterEmptyQueue", scenarioJoinAfterEmptyQueue},
	{"TryLockCountsWaiters", scenarioTryLockCountsWaiters},
	{"DeadEntryAtFreeLock", scenarioDeadEntryAtFreeLock},
	{"InScopeHandOffLostBeforeGrant", scenarioInScopeHandOffLostBeforeGrant},
	{"HeadWithoutWakeUpsReadsSparingly", scenarioHeadWithoutWakeUpsReadsSparingly},
	{"UnlockFailsThroughTheWindow", scenarioUnlockFailsThroughTheWindow},
	{"SessionRenewsOnce", scenarioSessionRenewsOnce},
	{"SessionCutOffLosesEveryLease", scenarioSessionCutOffLosesEveryLease},
	{"SessionUnlockRetried", scenarioSessionUnlockRetried},
	{"SessionLostDuringUnlockRetry", scenarioSessionLostDuringUnlockRetry},
}

// failingUnlock wraps a store whose Unlocks can be made to fail before
// reaching Spanner.
type failingUnlock struct {
	lockStore
	fail atomic.Bool
}

func (s *failingUnlock) unlock(ctx context.Context, l *Lease) (handOff, error) {
	if s.fail.Load() {
		return handOff{}, status.Error(codes.Unavailable, "unlock failed before Spanner")
	}
	return s.lockStore.unlock(ctx, l)
}

// scenarioUnlockFailsThroughTheWindow: every try of a holder's Unlock fails
// before reaching Spanner for its whole finish window: Unlock returns an
// error matching ErrOutage, on one line, not the transport's error alone;
// the lease has ended; the lock, no longer renewed, is taken over after
// its lease by a waiter of another process.
func scenarioUnlockFailsThroughTheWindow(t *testing.T, e lockEnv, name string) {
	ctx := context.Background()
	st := &failingUnlock{lockStore: e.store(t)}
	a := e.newLock(t, name, "a", e.newScope(), st)
	la, err := a.Lock(ctx)
	require.NoError(t, err)
	st.fail.Store(true)
	began := time.Now()
	requireFinishOutage(t, a.Unlock(ctx), began, scenarioFinish, la)
	b := e.process(t, name, "b")
	lb, err := b.Lock(ctx)
	require.NoError(t, err)
	assert.True(t, lb.TookOver(), "the unreleased lock lapsed and was taken over")
	require.NoError(t, b.Unlock(ctx))
}

// headHold is how long the holder holds in
// scenarioHeadWithoutWakeUpsReadsSparingly, and headLease the lease of
// both of its Locks.
const (
	headHold  = 10 * time.Second
	headLease = 3 * time.Second
)

// headWait is what holdBehind measured: the waiter's reads during the
// hold, how long after the Unlock returned it was handed the lock, and the
// two leases.
type headWait struct {
	reads  int64
	late   time.Duration
	la, lb *Lease
}

// holdBehind makes a holder of its own process take lock name and hold it
// for headHold while a waiter of a process whose Scope is scope waits at the
// head of the queue, counting the waiter's reads; then the holder unlocks
// and the waiter, handed the lock, unlocks too.
func holdBehind(t *testing.T, e lockEnv, name string, scope *Scope) headWait {
	t.Helper()
	ctx := context.Background()
	a := e.newLockLease(t, name, "a", e.newScope(), e.store(t), headLease)
	st := &countingStore{lockStore: e.store(t)}
	b := e.newLockLease(t, name, "b", scope, st, headLease)
	la, err := a.Lock(ctx)
	require.NoError(t, err)
	got := lockAsync(t, b)
	e.waitQueued(t, name, 1)
	w := headWait{reads: countDuringHold(&st.reads), la: la}
	require.NoError(t, a.Unlock(ctx))
	unlocked := time.Now()
	w.lb = <-got
	require.NotNil(t, w.lb)
	w.late = time.Since(unlocked)
	require.NoError(t, b.Unlock(ctx))
	return w
}

// scenarioHeadWithoutWakeUpsReadsSparingly (issue 44): a waiter whose Scope
// does not listen for wake-ups waits at the head of the queue behind a
// holder of another process that holds for 10s; it makes at most 5 reads a
// second (headPace: a quarter of the hold seen so far, up to maxHeadPoll),
// and is handed the lock by the holder's Unlock.
func scenarioHeadWithoutWakeUpsReadsSparingly(t *testing.T, e lockEnv, name string) {
	w := holdBehind(t, e, name, NewScope(WithoutWakeUps()))
	t.Logf("a waiter without wake-ups at the head made %d reads in a %v hold (%.1f a second); handed the lock %v after the Unlock returned",
		w.reads, headHold, float64(w.reads)/headHold.Seconds(), w.late.Round(time.Millisecond))
	assert.LessOrEqual(t, float64(w.reads)/headHold.Seconds(), maxWaitReads, "reads a second behind the holder")
	assert.Equal(t, w.la.Token()+1, w.lb.Token())
	assert.True(t, w.lb.HandedOff(), "handed the lock by the Unlock")
}

// scenarioDeadEntryAtFreeLock: a process died with an entry queued at a
// free lock (its join committed after the Unlock that freed the lock had
// read the queue). The waiter behind it hands the lock to that entry, as
// an Unlock would have, and takes it over once the dead waiter's lease has
// passed: the dead process costs one lease, not its entry's time to live
// (four leases).
func scenarioDeadEntryAtFreeLock(t *testing.T, e lockEnv, name string) {
	ctx := context.Background()
	a := e.process(t, name, "a")
	la, err := a.Lock(ctx)
	require.NoError(t, err)
	require.NoError(t, a.Unlock(ctx))
	dead := e.newScope().newWaiterID()
	_, err = e.store(t).enqueue(ctx, name, []queueInsert{{id: dead, owner: "dead", lease: scenarioLease}})
	require.NoError(t, err)

	b := e.process(t, name, "b")
	lb, err := b.Lock(ctx)
	require.NoError(t, err)
	assert.Equal(t, la.Token()+2, lb.Token(), "handed to the dead entry (one token), then taken over (the next)")
	assert.True(t, lb.TookOver(), "taken over from the dead waiter, after its lease")
	assert.Zero(t, e.queued(t, name), "the dead entry went with the hand-off")
	require.NoError(t, b.Unlock(ctx))
}

// scenarioTryLockCountsWaiters: a TryLock refused says how many wait,
// whether it decided on the row alone (its Queued column says nobody does)
// or read the queue, and how long the holder's lease has still to run;
// once the lock is free and nobody waits, it takes it.
func scenarioTryLockCountsWaiters(t *testing.T, e lockEnv, name string) {
	ctx := context.Background()
	a, b, c := e.process(t, name, "a"), e.process(t, name, "b"), e.process(t, name, "c")
	refused := func(holder string, token int64, waiters int) {
		t.Helper()
		_, err := tryLockPastAborts(ctx, c)
		var held *HeldError
		require.ErrorAs(t, err, &held)
		assert.Positive(t, held.LeaseLeft, "the holder is live")
		assert.LessOrEqual(t, held.LeaseLeft, scenarioLease, "at most the lease it declared")
		held.LeaseLeft = 0
		assert.Equal(t, HeldError{Name: name, Holder: holder, Token: token, Waiters: waiters}, *held)
	}
	la, err := a.Lock(ctx)
	require.NoError(t, err)
	refused("a", la.Token(), 0)
	got := lockAsync(t, b)
	e.waitQueued(t, name, 1)
	refused("a", la.Token(), 1)
	require.NoError(t, a.Unlock(ctx))
	lb := <-got
	require.NotNil(t, lb)
	refused("b", lb.Token(), 0)
	require.NoError(t, b.Unlock(ctx))
	lc, err := tryLockPastAborts(ctx, c)
	require.NoError(t, err)
	assert.Equal(t, lb.Token()+1, lc.Token())
	require.NoError(t, c.Unlock(ctx))
}

// tryLockPastAborts is l.TryLock, called again (up to 10 times) while it
// reports the lock held by "(a concurrent contender)": the emulator aborts
// every transaction that overlaps another on any row, so beside the
// parallel tests that share it, a TryLock may meet its abort limit without
// any contender of the lock (seen in a full go test ./... run).
func tryLockPastAborts(ctx context.Context, l *Lock) (*Lease, error) {
	for range 9 {
		lease, err := l.TryLock(ctx)
		var held *HeldError
		if !errors.As(err, &held) || held.Holder != "(a concurrent contender)" {
			return lease, err
		}
	}
	return l.TryLock(ctx)
}

// scenarioJoinAfterEmptyQueue: after a cycle that left the queue empty (on
// Spanner, the row's Queued column FALSE), a waiter of another process
// that joins, and then one of the new holder's own Scope that joins behind
// it (a blind insert), are each handed the lock by the holder's Unlock.
func scenarioJoinAfterEmptyQueue(t *testing.T, e lockEnv, name string) {
	ctx := context.Background()
	a := e.process(t, name, "a")
	_, err := a.Lock(ctx)
	require.NoError(t, err)
	require.NoError(t, a.Unlock(ctx))
	la, err := a.Lock(ctx)
	require.NoError(t, err)
	scope, st := e.newScope(), e.store(t)
	b, c := e.newLock(t, name, "b", scope, st), e.newLock(t, name, "c", scope, st)
	gotB := lockAsync(t, b)
	e.waitQueued(t, name, 1)
	require.NoError(t, a.Unlock(ctx))
	lb := <-gotB
	require.NotNil(t, lb)
	assert.True(t, lb.HandedOff(), "b was handed the lock")
	assert.Equal(t, la.Token()+1, lb.Token())
	gotC := lockAsync(t, c)
	e.waitQueued(t, name, 1) // c, behind its own Scope's holder
	require.NoError(t, b.Unlock(ctx))
	lc := <-gotC
	require.NotNil(t, lc)
	assert.True(t, lc.HandedOff(), "c was handed the lock")
	assert.Equal(t, lb.Token()+1, lc.Token())
	require.NoError(t, c.Unlock(ctx))
}

// scenarioFIFO: three waiters of three processes queue behind a holder and
// are handed the lock in the order they came, each with the next token.
func scenarioFIFO(t *testing.T, e lockEnv, name string) {
	ctx := context.Background()
	a := e.process(t, name, "a")
	la, err := a.Lock(ctx)
	require.NoError(t, err)
	var (
		mu    sync.Mutex
		order []string
		toks  []int64
		wg    sync.WaitGroup
	)
	for i, who := range []string{"b", "c", "d"} {
		l := e.process(t, name, who)
		wg.Add(1)
		go func() {
			defer wg.Done()
			lease, err := l.Lock(ctx)
			if !assert.NoError(t, err) {
				return
			}
			mu.Lock()
			order, toks = append(order, who), append(toks, lease.Token())
			mu.Unlock()
			assert.True(t, lease.HandedOff(), "%s was handed the lock", who)
			time.Sleep(50 * time.Millisecond)
			assert.NoError(t, l.Unlock(ctx))
		}()
		e.waitQueued(t, name, i+1) // queued in this order
	}
	require.NoError(t, a.Unlock(ctx))
	wg.Wait()
	assert.Equal(t, []string{"b", "c", "d"}, order)
	assert.Equal(t, []int64{la.Token() + 1, la.Token() + 2, la.Token() + 3}, toks)
}

// scenarioCancelledWaiterPassesOn: a waiter whose ctx ends leaves the
// queue; the holder's Unlock hands the lock to the next one.
func scenarioCancelledWaiterPassesOn(t *testing.T, e lockEnv, name string) {
	ctx := context.Background()
	a, b, c := e.process(t, name, "a"), e.process(t, name, "b"), e.process(t, name, "c")
	la, err := a.Lock(ctx)
	require.NoError(t, err)
	bctx, cancel := context.WithCancel(ctx)
	bErr := make(chan error, 1)
	go func() {
		lease, err := b.Lock(bctx)
		if lease != nil {
			b.Unlock(ctx)
		}
		bErr <- err
	}()
	e.waitQueued(t, name, 1)
	cGot := lockAsync(t, c)
	e.waitQueued(t, name, 2)
	cancel()
	require.ErrorIs(t, <-bErr, ErrNotObtained)
	require.NoError(t, a.Unlock(ctx))
	select {
	case lc := <-cGot:
		require.NotNil(t, lc)
		assert.Equal(t, la.Token()+1, lc.Token())
		assert.True(t, lc.HandedOff())
	case <-time.After(2 * scenarioLease):
		t.Fatal("the waiter behind a cancelled one was not handed the lock")
	}
	require.NoError(t, c.Unlock(ctx))
}

// scenarioTryLockHeld: TryLock on a held lock says who holds it, and takes
// it once it is free.
func scenarioTryLockHeld(t *testing.T, e lockEnv, name string) {
	ctx := context.Background()
	a, b := e.process(t, name, "a"), e.process(t, name, "b")
	la, err := a.Lock(ctx)
	require.NoError(t, err)
	_, err = b.TryLock(ctx)
	var held *HeldError
	require.ErrorAs(t, err, &held)
	assert.Equal(t, "a", held.Holder)
	assert.Equal(t, la.Token(), held.Token)
	require.NoError(t, a.Unlock(ctx))
	lb, err := tryLockPastAborts(ctx, b) // the emulator aborts it while other tests' transactions run
	require.NoError(t, err)
	assert.Equal(t, la.Token()+1, lb.Token())
	require.NoError(t, b.Unlock(ctx))
}

// scenarioSameScopeHandOff: a waiter of the holder's Scope is handed the
// lock by its Unlock and woken at once.
func scenarioSameScopeHandOff(t *testing.T, e lockEnv, name string) {
	ctx := context.Background()
	scope, st := e.newScope(), e.store(t)
	a, b := e.newLock(t, name, "a", scope, st), e.newLock(t, name, "b", scope, st)
	la, err := a.Lock(ctx)
	require.NoError(t, err)
	got := lockAsync(t, b)
	e.waitQueued(t, name, 1)
	unlocked := time.Now()
	require.NoError(t, a.Unlock(ctx))
	lb := <-got
	require.NotNil(t, lb)
	// Behind a holder of its Scope a waiter does not poll sooner than a
	// lease: half of one tells a wake-up from a poll on a loaded machine.
	assert.Less(t, time.Since(unlocked), scenarioLease/2, "woken by the Unlock, not a poll")
	assert.Equal(t, la.Token()+1, lb.Token())
	assert.True(t, lb.HandedOff())
	require.NoError(t, b.Unlock(ctx))
}

// scenarioTakeOverAfterSilence: a holder whose renewals fail loses its
// lease (Done) by the lease; a waiter takes over after the holder's
// lease has passed unrenewed; the old holder's Unlock is fenced.
func scenarioTakeOverAfterSilence(t *testing.T, e lockEnv, name string) {
	ctx := context.Background()
	sa := &silenceable{lockStore: e.store(t)}
	a := e.newLock(t, name, "a", e.newScope(), sa)
	b := e.process(t, name, "b")
	la, err := a.Lock(ctx)
	require.NoError(t, err)
	time.Sleep(100 * time.Millisecond)
	sa.silent.Store(true)
	silenced := time.Now()
	got := make(chan *Lease, 1)
	var tookAt time.Time
	go func() {
		lease, err := b.Lock(ctx)
		assert.NoError(t, err)
		tookAt = time.Now()
		got <- lease
	}()
	var lostAt time.Time
	select {
	case <-la.Done():
		lostAt = time.Now()
		assert.Less(t, lostAt.Sub(silenced), scenarioLease, "the holder gives up within a lease of its last renewal")
	case <-time.After(2 * scenarioLease):
		t.Fatal("a silenced holder's Done did not close")
	}
	lb := <-got
	require.NotNil(t, lb)
	// The last acknowledged renewal was at most a renewal interval before
	// the silence: nobody may take over before the lease has passed since.
	assert.GreaterOrEqual(t, tookAt.Sub(silenced), scenarioLease-scenarioLease/3, "no takeover before the lease passed unrenewed")
	assert.False(t, tookAt.Before(lostAt), "the new holder got the lease before the old one gave it up")
	assert.True(t, lb.TookOver())
	assert.Equal(t, la.Token()+1, lb.Token())
	err = a.Unlock(ctx)
	require.True(t, errors.Is(err, ErrLeaseLost), "the old holder's Unlock is fenced: %v", err)
	require.NoError(t, b.Unlock(ctx))
}

// newSimEnv returns a lockEnv on a quiet simulated Spanner (no faults,
// pauses or crashes) in the current synctest bubble.
func newSimEnv() (lockEnv, *simHarness) {
	h := &simHarness{lastToken: map[string]int64{}, scopes: map[string]*simProc{}, stallDead: map[string]bool{}}
	h.par = simParams{lease: scenarioLease, finish: 2 * time.Second}
	h.start = time.Now()
	h.db = newSimDB(h, scenarioLease)
	n := 0
	queued := func(_ *testing.T, name string) int {
		h.db.mu.Lock()
		defer h.db.mu.Unlock()
		return len(h.db.queue[name])
	}
	return lockEnv{database: "sim", queued: queued, scope: func() *Scope { return NewScope(WithoutWakeUps()) }, store: func(*testing.T) lockStore {
		n++
		p := &simProc{h: h, name: "P" + string(rune('0'+n)), simLife: newSimLife(), seed: uint64(n)}
		p.ctx, p.kill = context.WithCancel(context.Background())
		p.clk = &simClock{p: p}
		p.conn = &simConn{db: h.db, p: p}
		return p.conn
	}}, h
}

// TestHeadPollChoosesPromptness: a waiter without wake-ups whose Scope says
// WithHeadPoll(50ms) reads about every 50ms behind a 10s hold (at least 150
// reads, where the default makes 43) and learns of the hand-off within
// about 50ms; the simulated Spanner, virtual time.
func TestHeadPollChoosesPromptness(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := newSimEnv()
		const d = 50 * time.Millisecond
		w := holdBehind(t, e, "scenario", NewScope(WithoutWakeUps(), WithHeadPoll(d)))
		t.Logf("WithHeadPoll(%v): %d reads in a %v hold; handed the lock %v after the Unlock returned", d, w.reads, headHold, w.late)
		assert.GreaterOrEqual(t, w.reads, int64(150), "reads about every %v", d)
		assert.LessOrEqual(t, w.late, d+100*time.Millisecond, "the hand-off learnt within about %v", d)
		time.Sleep(3*headLease + 2*time.Second) // let renewal loops and detached calls end
	})
}

// settleBubble lets a scenario's renewal loops, session loops and
// detached calls end in its synctest bubble before the bubble does: the
// bubble's clock runs on past the longest of them (a sleep in virtual
// time, which moves only once every goroutine of the bubble is blocked).
func settleBubble() { time.Sleep(3*scenarioLease + 2*time.Second) }

// TestSimScenarios runs lockScenarios on the simulated Spanner.
func TestSimScenarios(t *testing.T) {
	for _, sc := range lockScenarios {
		t.Run(sc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e, _ := newSimEnv()
				sc.run(t, e, "scenario")
				settleBubble()
			})
		})
	}
}
