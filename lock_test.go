package spanmutex

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/internal/sqldialect"
	"github.com/spanmutex/spanmutex/internal/testutil"
)

// queued returns the owners of the queue entries of name, oldest first.
func queued(t *testing.T, c *spanner.Client, name string) []string {
	return queuedColumn(t, c, name, "Owner")
}

// queuedIDs returns the waiter ids of the queue entries of name, oldest
// first.
func queuedIDs(t *testing.T, c *spanner.Client, name string) []string {
	return queuedColumn(t, c, name, "WaiterID")
}

// queuedColumn returns the string column col of the queue entries of name,
// oldest first.
func queuedColumn(t *testing.T, c *spanner.Client, name, col string) []string {
	t.Helper()
	var out []string
	// A key read, in key order (EnqueuedAt, WaiterID): the same in both dialects.
	it := c.Single().Read(context.Background(), defaultTable+ddl.QueueSuffix, spanner.Key{name}.AsPrefix(), []string{col})
	require.NoError(t, it.Do(func(r *spanner.Row) error {
		var v string
		out = append(out, v)
		return r.Columns(&out[len(out)-1])
	}))
	return out
}

// Uncontended, a lock costs one read-write transaction to acquire and one to
// release; TryLock on a held lock says who holds it.
func TestLockUncontended(t *testing.T) { eachDialect(t, testLockUncontended) }

func testLockUncontended(t *testing.T, db string) {
	c := newClient(t, db)
	l, err := NewLock(c, "uncontended", WithOwner("a"))
	require.NoError(t, err)
	ctx := context.Background()
	for i := 1; i <= 3; i++ {
		lease, err := l.Lock(ctx)
		require.NoError(t, err)
		assert.Equal(t, int64(i), lease.Token())
		assert.False(t, lease.HandedOff(), "taken free, not handed over")
		require.NoError(t, l.Unlock(ctx))
	}
	st := l.ops()
	assert.Equal(t, int64(6), st.rw, "2 read-write transactions per acquire+release")
	assert.Zero(t, st.blind, "nobody queued")

	lease, err := l.Lock(ctx)
	require.NoError(t, err)
	other, err := NewLock(c, "uncontended", WithOwner("b"))
	require.NoError(t, err)
	_, err = other.TryLock(ctx)
	var held *HeldError
	require.ErrorAs(t, err, &held)
	assert.ErrorIs(t, err, ErrHeld)
	assert.Equal(t, "a", held.Holder)
	assert.Equal(t, lease.Token(), held.Token)
	assert.Positive(t, held.LeaseLeft, "the holder just acquired")
	assert.LessOrEqual(t, held.LeaseLeft, defaultLease, "at most the lease the holder declared")
	assert.Empty(t, queued(t, c, "uncontended"), "TryLock never queues")

	_, err = l.Lock(ctx)
	assert.ErrorContains(t, err, "already holds")
	assert.ErrorContains(t, other.Unlock(ctx), "does not hold")
	require.NoError(t, l.Unlock(ctx))
	lease, err = other.TryLock(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(5), lease.Token())
	require.NoError(t, other.Unlock(ctx))
}

// A lock refuses a name that a run-once Mutex completed.
func TestLockRefusesARunOnceRow(t *testing.T) {
	db := freshDatabase(t)
	c := newClient(t, db)
	m, err := New(c, "shared-name")
	require.NoError(t, err)
	_, err = m.Run(context.Background(), func(context.Context, *Lease) error { return nil })
	require.NoError(t, err)
	l, err := NewLock(c, "shared-name")
	require.NoError(t, err)
	_, err = l.Lock(context.Background())
	assert.EqualError(t, err, `spanmutex: lock "shared-name": the name is a run-once Mutex's (its row is DONE), or was written by something else: give the Lock another name`)
}

// A lock refuses a Semaphore's name, and says what holds it, on one line
// with one prefix.
func TestLockRefusesASemaphoreRow(t *testing.T) {
	db := freshDatabase(t)
	c := newClient(t, db)
	s, err := NewSemaphore(c, "sem-name", 3)
	require.NoError(t, err)
	lease, err := s.Acquire(context.Background(), 1)
	require.NoError(t, err)
	require.NotNil(t, lease)
	defer func() { require.NoError(t, s.Release(context.Background())) }()
	l, err := NewLock(c, "sem-name")
	require.NoError(t, err)
	_, err = l.Lock(context.Background())
	assert.EqualError(t, err, `spanmutex: lock "sem-name": the name is a Semaphore's or an RWLock's (its row is SHARED): hold it with NewSemaphore or NewRWLock, or give the Lock another name`)
}

// lockAndHold takes l, failing the test if it cannot, and returns the lease.
func lockAndHold(t *testing.T, l *Lock) *Lease {
	t.Helper()
	lease, err := l.Lock(context.Background())
	require.NoError(t, err)
	return lease
}

// 100 waiters (40 without SPANMUTEX_SOAK) queued behind a holder get the
// lock in the order they joined the queue, each with the next token.
func TestLockFIFO(t *testing.T) {
	t.Parallel() // waits for its 40 waiters' turns beside the other waiting tests (own databases)
	eachDialect(t, testLockFIFO)
}

func testLockFIFO(t *testing.T, db string) {
	clients := []*spanner.Client{newClient(t, db), newClient(t, db), newClient(t, db), newClient(t, db)}
	first, err := NewLock(clients[0], "fifo", WithOwner("first"))
	require.NoError(t, err)
	lease0 := lockAndHold(t, first)

	n := testutil.Scale(40, 100)
	var (
		mu    sync.Mutex
		order []string // owners in the order they got the lock
		toks  []int64
		hand  []bool // whether each lease says it was handed over
		wg    sync.WaitGroup
	)
	for i := 0; i < n; i++ {
		l, err := NewLock(clients[i%len(clients)], "fifo", WithOwner(fmt.Sprintf("w%03d", i)))
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			lease, err := l.Lock(context.Background())
			if !assert.NoError(t, err) {
				return
			}
			mu.Lock()
			order = append(order, lease.Owner())
			toks = append(toks, lease.Token())
			hand = append(hand, lease.HandedOff())
			mu.Unlock()
			assert.NoError(t, l.Unlock(context.Background()))
		}()
	}
	var joined []string
	waitFor(t, time.Minute, "100 waiters to join the queue", func() bool {
		joined = queued(t, clients[0], "fifo")
		return len(joined) == n
	})
	require.NoError(t, first.Unlock(context.Background()))
	wg.Wait()
	assert.Equal(t, joined, order, "the lock went to the waiters in the order they joined")
	for i, tok := range toks {
		assert.Equal(t, lease0.Token()+int64(i)+1, tok)
	}
	assert.False(t, lease0.HandedOff(), "the first holder took the lock free")
	assert.NotContains(t, hand, false, "every queued waiter was handed the lock by an Unlock")
}

// Waiters spread over four processes, each behind a holder that is mostly in
// another process, so that they learn of their turn by polling rather than
// by a wake-up: they still get the lock in the order they joined the queue,
// each handed over with the next token.
func TestLockFIFOAcrossProcesses(t *testing.T) {
	db := freshDatabase(t)
	procs := []*Scope{NewScope(WithoutWakeUps()), NewScope(WithoutWakeUps()), NewScope(WithoutWakeUps()), NewScope(WithoutWakeUps())}
	clients := []*spanner.Client{newClient(t, db), newClient(t, db), newClient(t, db), newClient(t, db)}
	first, err := NewLock(clients[0], "fifo-processes", WithOwner("first"), WithScope(procs[0]))
	require.NoError(t, err)
	lease0 := lockAndHold(t, first)

	const n = 24
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var (
		mu    sync.Mutex
		order []string
		toks  []int64
		hand  []bool
		qat   []time.Time
		reads int64
		wg    sync.WaitGroup
	)
	for i := 0; i < n; i++ {
		l, err := NewLock(clients[i%len(clients)], "fifo-processes", WithOwner(fmt.Sprintf("w%02d", i)), WithScope(procs[i%len(procs)]))
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			lease, err := l.Lock(ctx)
			if !assert.NoError(t, err) {
				return
			}
			mu.Lock()
			order = append(order, lease.Owner())
			toks = append(toks, lease.Token())
			hand = append(hand, lease.HandedOff())
			qat = append(qat, lease.QueuedAt())
			mu.Unlock()
			assert.NoError(t, l.Unlock(ctx))
			mu.Lock()
			reads += l.ops().reads
			mu.Unlock()
		}()
	}
	var joined []string
	waitFor(t, time.Minute, "the waiters to join the queue", func() bool {
		joined = queued(t, clients[0], "fifo-processes")
		return len(joined) == n
	})
	require.NoError(t, first.Unlock(ctx))
	wg.Wait()
	assert.Equal(t, joined, order, "the lock went to the waiters in the order they joined")
	for i, tok := range toks {
		assert.Equal(t, lease0.Token()+int64(i)+1, tok)
	}
	assert.NotContains(t, hand, false, "every waiter was handed the lock by an Unlock")
	assert.Zero(t, lease0.QueuedAt(), "the first took the lock free, without queueing")
	for i, at := range qat {
		assert.False(t, at.IsZero(), "%s's lease says when it queued", order[i])
		if i > 0 {
			assert.True(t, at.After(qat[i-1]) || at.Equal(qat[i-1]), "granted in the order of QueuedAt: %v after %v", at, qat[i-1])
		}
	}
	assert.Positive(t, reads, "waiters behind holders of other processes polled")
	for _, p := range procs {
		assert.Empty(t, p.locks, "every call gave its localLock back")
		assert.Empty(t, p.wakes.waiting, "every waiter left the wake-up board")
	}
}

// A waiter whose ctx is cancelled leaves the queue; the others are not held
// up by it.
func TestLockCancelledWaiterLeavesTheQueue(t *testing.T) {
	eachDialect(t, testLockCancelledWaiterLeavesTheQueue)
}

func testLockCancelledWaiterLeavesTheQueue(t *testing.T, db string) {
	c := newClient(t, db)
	holder, err := NewLock(c, "cancel", WithOwner("holder"))
	require.NoError(t, err)
	lockAndHold(t, holder)

	quitter, err := NewLock(newClient(t, db), "cancel", WithOwner("quitter"))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	quit := make(chan error, 1)
	go func() { _, err := quitter.Lock(ctx); quit <- err }()
	waitFor(t, time.Minute, "the quitter to queue", func() bool { return len(queued(t, c, "cancel")) == 1 })

	stayer, err := NewLock(newClient(t, db), "cancel", WithOwner("stayer"))
	require.NoError(t, err)
	got := make(chan *Lease, 1)
	go func() { l, err := stayer.Lock(context.Background()); assert.NoError(t, err); got <- l }()
	waitFor(t, time.Minute, "the stayer to queue", func() bool { return len(queued(t, c, "cancel")) == 2 })

	cancel()
	err = <-quit
	assert.ErrorIs(t, err, ErrNotObtained)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, []string{"stayer"}, queued(t, c, "cancel"))

	require.NoError(t, holder.Unlock(context.Background()))
	lease := <-got
	assert.Equal(t, "stayer", lease.Owner())
	require.NoError(t, stayer.Unlock(context.Background()))
	assert.Empty(t, queued(t, c, "cancel"))
}

// A waiter that stopped proving it is alive is skipped by the hand-off; when
// it comes back it joins again at the back and still gets the lock.
// Waits out entries' time to live: it runs beside the other waiting tests
// (t.Parallel).
func TestLockSkipsDeadWaiters(t *testing.T) {
	t.Parallel()
	eachDialect(t, testLockSkipsDeadWaiters)
}

func testLockSkipsDeadWaiters(t *testing.T, db string) {
	c := newClient(t, db)
	opts := []LockOption{WithLease(time.Second), WithJitter(0)}
	holder, err := NewLock(c, "dead", append(opts, WithOwner("holder"))...)
	require.NoError(t, err)
	lockAndHold(t, holder)

	cz, silenceZ := silenceableClient(t, db)
	zombie, err := NewLock(cz, "dead", append(opts, WithOwner("zombie"))...)
	require.NoError(t, err)
	zgot := make(chan *Lease, 1)
	go func() { l, err := zombie.Lock(context.Background()); assert.NoError(t, err); zgot <- l }()
	waitFor(t, time.Minute, "the zombie to queue", func() bool { return len(queued(t, c, "dead")) == 1 })
	silenceZ.Store(true)

	live, err := NewLock(newClient(t, db), "dead", append(opts, WithOwner("live"))...)
	require.NoError(t, err)
	got := make(chan *Lease, 1)
	go func() { l, err := live.Lock(context.Background()); assert.NoError(t, err); got <- l }()
	waitFor(t, time.Minute, "the live waiter to queue", func() bool { return len(queued(t, c, "dead")) == 2 })

	// Wait until the zombie's entry is older than the lease by Spanner's clock.
	waitFor(t, time.Minute, "the zombie's entry to expire", func() bool {
		var stale int64
		stmt := statementFor(t, c, func(d ddl.Dialect) string {
			return "SELECT COUNT(*) FROM `MutexesQueue` WHERE `Owner` = 'zombie' AND `RenewedAt` < " + sqldialect.SubMicros(d, "CURRENT_TIMESTAMP()", "1000000")
		}, nil)
		require.NoError(t, c.Single().Query(context.Background(), stmt).Do(func(r *spanner.Row) error { return r.Columns(&stale) }))
		return stale == 1
	})
	require.NoError(t, holder.Unlock(context.Background()))
	lease := <-got
	assert.Equal(t, "live", lease.Owner(), "the hand-off skipped the dead waiter")

	silenceZ.Store(false)
	require.NoError(t, live.Unlock(context.Background()))
	zl := <-zgot
	assert.Equal(t, "zombie", zl.Owner())
	assert.Greater(t, zl.Token(), lease.Token())
	require.NoError(t, zombie.Unlock(context.Background()))
}

// A holder whose lease was lost (taken over once it lapsed) cannot
// unlock the new holder's lock, and its fenced operations are rejected: both
// the Guard-ed write in its own transaction and the external operation
// through a Fence.
func TestLockUnlockAfterLossLeavesTheNewHolder(t *testing.T) {
	t.Parallel() // waits out leases beside the other tests that do (own database)
	eachDialect(t, testLockUnlockAfterLossLeavesTheNewHolder)
}

func testLockUnlockAfterLossLeavesTheNewHolder(t *testing.T, db string) {
	opts := []LockOption{WithLease(time.Second), WithJitter(0)}
	ca, silenceA := silenceableClient(t, db)
	a, err := NewLock(ca, "lost", append(opts, WithOwner("a"))...)
	require.NoError(t, err)
	cb := newClient(t, db)
	b, err := NewLock(cb, "lost", append(opts, WithOwner("b"))...)
	require.NoError(t, err)
	fence, err := NewFence(cb)
	require.NoError(t, err)
	ctx := context.Background()

	la := lockAndHold(t, a)
	require.NoError(t, fence.Admit(ctx, "sheets/1", "lost", la.Token()))
	silenceA.Store(true)
	lb := lockAndHold(t, b) // queues, then takes over after the lease
	assert.True(t, lb.TookOver())
	assert.Greater(t, lb.Token(), la.Token())
	assert.GreaterOrEqual(t, lb.AcquiredAt().Sub(la.AcquiredAt()), time.Second)
	require.NoError(t, fence.Admit(ctx, "sheets/1", "lost", lb.Token()))

	waitFor(t, time.Minute, "the old holder to notice", func() bool { return la.Err() != nil })
	assert.ErrorIs(t, la.Err(), ErrLeaseLost)
	silenceA.Store(false)

	var stale *staleTokenError
	err = fence.Admit(ctx, "sheets/1", "lost", la.Token())
	require.ErrorAs(t, err, &stale, "the old holder's external operation is rejected")
	assert.Equal(t, lb.Token(), stale.Highest)
	_, err = ca.ReadWriteTransaction(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		return la.Guard(ctx, txn)
	})
	assert.ErrorIs(t, err, ErrLeaseLost, "the old holder's guarded write is rejected")

	err = a.Unlock(ctx)
	assert.ErrorIs(t, err, ErrLeaseLost)
	rows, err := Inspect(ctx, cb, "lost")
	require.NoError(t, err)
	assert.Equal(t, StateStarted, rows[0].State, "the new holder still holds the lock")
	assert.Equal(t, lb.Token(), rows[0].Token)
	require.NoError(t, b.Unlock(ctx))
}

// A Fence admits equal and higher tokens, rejects lower ones, and refuses
// tokens of another lock.
func TestFence(t *testing.T) { eachDialect(t, testFence) }

func testFence(t *testing.T, db string) {
	c := newClient(t, db)
	f, err := NewFence(c)
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, f.Admit(ctx, "r", "lock", 5))
	require.NoError(t, f.Admit(ctx, "r", "lock", 5))
	require.NoError(t, f.Admit(ctx, "r", "lock", 7))
	assert.ErrorIs(t, f.Admit(ctx, "r", "lock", 6), ErrStaleToken)
	assert.ErrorIs(t, f.Admit(ctx, "r", "other-lock", 100), ErrInvalidConfig)
	assert.ErrorIs(t, f.Admit(ctx, "", "lock", 1), ErrInvalidConfig)
	_, err = NewFence(nil)
	assert.ErrorIs(t, err, ErrInvalidConfig)
	_, err = NewFence(c, WithTable("bad-name"))
	assert.ErrorIs(t, err, ErrInvalidConfig)
}

// 1000 waiters (200 without SPANMUTEX_SOAK) spread over 8 clients each
// acquire the lock once, within a
// bounded time, with strictly increasing tokens and no two holders at once.
func TestLockThousandWaiters(t *testing.T) {
	db := freshDatabase(t)
	clients := make([]*spanner.Client, 8)
	for i := range clients {
		clients[i] = newClient(t, db)
	}
	scopes := make([]*Scope, len(clients)) // eight processes, a client each
	for i := range scopes {
		scopes[i] = NewScope()
	}
	n := testutil.Scale(200, 1000) // 1000 with SPANMUTEX_SOAK (CI)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var (
		holders atomic.Int32
		mu      sync.Mutex
		tokens  []int64
		wg      sync.WaitGroup
	)
	start := time.Now()
	locks := make([]*Lock, n)
	for i := 0; i < n; i++ {
		l, err := NewLock(clients[i%len(clients)], "thousand", WithOwner(fmt.Sprintf("w%04d", i)), WithScope(scopes[i%len(scopes)]))
		require.NoError(t, err)
		locks[i] = l
		wg.Add(1)
		go func() {
			defer wg.Done()
			lease, err := l.Lock(ctx)
			if !assert.NoError(t, err) {
				return
			}
			if h := holders.Add(1); h != 1 {
				t.Errorf("%d holders at once", h)
			}
			mu.Lock()
			tokens = append(tokens, lease.Token())
			mu.Unlock()
			holders.Add(-1)
			assert.NoError(t, l.Unlock(ctx))
		}()
	}
	wg.Wait()
	var st opCounts
	for _, l := range locks {
		s := l.ops()
		st.rw += s.rw
		st.blind += s.blind
		st.reads += s.reads
	}
	t.Logf("%d waiters acquired once each in %v; per acquisition: %.2f read-write attempts, %.2f blind writes, %.1f reads (emulator)",
		n, time.Since(start), float64(st.rw)/float64(n), float64(st.blind)/float64(n), float64(st.reads)/float64(n))
	require.Len(t, tokens, n)
	assert.True(t, slices.IsSorted(tokens), "tokens in the order the holders got the lock are strictly increasing")
	assert.Equal(t, int64(1), tokens[0])
	assert.Equal(t, int64(n), tokens[n-1])
}

// A store whose first statements run inside read-write transactions (a
// purge, a leave, an acquisition) reads the dialect before each
// transaction begins: the client refuses a read nested in one.
func TestDialectReadBeforeTransactions(t *testing.T) {
	eachDialect(t, testDialectReadBeforeTransactions)
}

func testDialectReadBeforeTransactions(t *testing.T, db string) {
	c := newClient(t, db)
	ctx := context.Background()
	require.NoError(t, newSpannerStore(c, defaultTable, time.Second).purgeWaiter(ctx, "first", "w1"))
	_, err := newSpannerStore(c, defaultTable, time.Second).leave(ctx, "first", "w1")
	require.NoError(t, err)
	d, lease, err := newSpannerStore(c, defaultTable, time.Second).acquire(ctx, "first", policy{lease: time.Second, maxAttempts: 1}, claim{owner: "o", leaseID: "l1"})
	require.NoError(t, err)
	require.Equal(t, actAcquire, d.action)
	require.NotNil(t, lease)
	_, err = newSpannerStore(c, defaultTable, time.Second).reset(ctx, "first", time.Second, "l2", false)
	require.ErrorAs(t, err, new(*resetRefusedError), "a live holder is refused, after the row was read")
}
