package spanmutex

import (
	"context"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A semaphore of size 3 grants permits while they fit, refuses what does
// not fit, grants the head of the queue in order on Release (a large
// request at the head is not overtaken by a smaller one behind it), and
// its tokens increase by one per acquisition.
func TestSemaphoreGrantsInOrderWithoutBarging(t *testing.T) {
	needEmulator(t)
	eachDialect(t, func(t *testing.T, db string) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c := newClient(t, db)
		sem := func(owner string) *Semaphore {
			s, err := NewSemaphore(c, "backfill", 3, WithOwner(owner), WithLease(10*time.Second))
			require.NoError(t, err)
			return s
		}
		a, b, big, small := sem("a"), sem("b"), sem("big"), sem("small")
		la, err := a.Acquire(ctx, 2)
		require.NoError(t, err)
		lb, err := b.TryAcquire(ctx, 1)
		require.NoError(t, err)
		assert.Equal(t, la.Token()+1, lb.Token())
		_, err = big.TryAcquire(ctx, 1)
		var he *HeldError
		require.ErrorAs(t, err, &he, "all 3 permits are held")
		assert.Equal(t, "a", he.Holder)

		bigLease := make(chan *Lease, 1)
		go func() {
			l, err := big.Acquire(ctx, 3)
			assert.NoError(t, err)
			bigLease <- l
		}()
		waitQueued(t, c, "backfill", 3)
		_, err = small.TryAcquire(ctx, 1)
		require.ErrorAs(t, err, &he, "a waiter is queued: no barging")
		assert.Equal(t, 1, he.Waiters)
		smallLease := make(chan *Lease, 1)
		go func() {
			l, err := small.Acquire(ctx, 1)
			assert.NoError(t, err)
			smallLease <- l
		}()
		waitQueued(t, c, "backfill", 4)
		require.NoError(t, a.Release(ctx))
		select {
		case <-bigLease:
			t.Fatal("3 permits granted while 1 is held")
		case l := <-smallLease:
			t.Fatalf("the small request overtook the big one: token %d", l.Token())
		default:
		}
		recs, err := Inspect(ctx, c, "backfill")
		require.NoError(t, err)
		require.Len(t, recs, 1)
		assert.Equal(t, StateShared, recs[0].State)
		assert.Equal(t, int64(3), recs[0].Permits)
		require.Len(t, recs[0].Holders, 1, "b holds 1 permit")
		assert.Equal(t, Holder{Owner: "b", Permits: 1, Token: lb.Token(), LeaseLeft: recs[0].Holders[0].LeaseLeft}, recs[0].Holders[0])
		assert.Positive(t, recs[0].Holders[0].LeaseLeft)
		assert.Equal(t, 2, recs[0].Waiters, "big and small")
		require.NoError(t, b.Release(ctx))
		lbig := <-bigLease
		assert.Equal(t, lb.Token()+1, lbig.Token(), "granted by b's Release")
		assert.True(t, lbig.HandedOff())
		require.NoError(t, big.Release(ctx))
		lsmall := <-smallLease
		assert.Equal(t, lbig.Token()+1, lsmall.Token())
		require.NoError(t, small.Release(ctx))
		assert.Empty(t, queuedIDs(t, c, "backfill"), "every entry released")
	})
}

// waitQueued waits until name's queue has n entries.
func waitQueued(t *testing.T, c *spanner.Client, name string, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return len(queuedIDs(t, c, name)) == n }, 30*time.Second, 5*time.Millisecond)
}

// A contender declaring another size is refused with both sizes named, and
// writes nothing; Resize changes the stored size.
func TestSemaphoreSizeIsStoredWithTheName(t *testing.T) {
	needEmulator(t)
	eachDialect(t, func(t *testing.T, db string) {
		t.Parallel()
		ctx := context.Background()
		c := newClient(t, db)
		two, err := NewSemaphore(c, "api", 2)
		require.NoError(t, err)
		l, err := two.Acquire(ctx, 1)
		require.NoError(t, err)
		five, err := NewSemaphore(c, "api", 5)
		require.NoError(t, err)
		_, err = five.Acquire(ctx, 1)
		var sme *SizeMismatchError
		require.ErrorAs(t, err, &sme)
		assert.Equal(t, int64(2), sme.Stored)
		assert.Equal(t, int64(5), sme.Declared)
		assert.Contains(t, err.Error(), `semaphore "api" has size 2, but this contender declared 5`)
		assert.Len(t, queuedIDs(t, c, "api"), 1, "nothing written")
		require.NoError(t, five.Resize(ctx))
		l5, err := five.TryAcquire(ctx, 4)
		require.NoError(t, err, "1 of 5 held: 4 fit")
		old, err := NewSemaphore(c, "api", 2)
		require.NoError(t, err)
		_, err = old.Acquire(ctx, 1)
		require.ErrorAs(t, err, &sme)
		require.NoError(t, two.Release(ctx), "a release need not know the size")
		require.NoError(t, five.Release(ctx))
		assert.Equal(t, l.Token()+1, l5.Token())

		lock, err := NewLock(c, "api")
		require.NoError(t, err)
		_, err = lock.TryLock(ctx)
		assert.ErrorContains(t, err, "Semaphore")
		mutex, err := New(c, "api")
		require.NoError(t, err)
		_, err = mutex.Run(ctx, func(context.Context, *Lease) error { t.Error("ran on a Semaphore's row"); return nil })
		assert.ErrorContains(t, err, "Semaphore")
		m, err := NewSemaphore(c, "a-lock", 1)
		require.NoError(t, err)
		_, err = lock2(t, c).TryLock(ctx)
		require.NoError(t, err)
		_, err = m.TryAcquire(ctx, 1)
		assert.ErrorContains(t, err, "belongs to a Lock")
	})
}

func lock2(t *testing.T, c *spanner.Client) *Lock {
	l, err := NewLock(c, "a-lock")
	require.NoError(t, err)
	return l
}

// Counted from the wire: an uncontended Acquire and a Release are one
// statement and one Commit each (the transaction's begin is inlined in
// the statement); a lease renewal is one blind Commit; a refused
// TryAcquire writes nothing.
func TestSemaphoreRPCs(t *testing.T) {
	needEmulator(t)
	eachDialect(t, func(t *testing.T, db string) {
		ctx := context.Background()
		var log rpcLog
		client := countingClient(t, db, &log)
		s, err := NewSemaphore(client, "counted", 1, WithScope(NewScope(WithoutWakeUps())))
		require.NoError(t, err)
		_, err = s.Acquire(ctx, 1) // the first call reads the dialect
		require.NoError(t, err)
		require.NoError(t, s.Release(ctx))

		n := log.len()
		lease, err := s.Acquire(ctx, 1)
		require.NoError(t, err)
		assert.Equal(t, []string{"ExecuteStreamingSql", "Commit"}, log.since(n), "an uncontended Acquire")
		assert.Equal(t, []string{tagSemAcquire, tagSemAcquire}, log.tagsSince(n))

		n = log.len()
		require.NoError(t, semRenewer{s.store}.renew(ctx, lease))
		assert.Equal(t, []string{"Commit"}, log.since(n), "a renewal")

		other, err := NewSemaphore(client, "counted", 1, WithScope(NewScope(WithoutWakeUps())))
		require.NoError(t, err)
		n = log.len()
		_, err = other.TryAcquire(ctx, 1)
		require.ErrorIs(t, err, ErrHeld)
		assert.Equal(t, "ExecuteStreamingSql", log.since(n)[0], "a refused TryAcquire reads")
		assert.NotContains(t, log.since(n), "Commit", "and writes nothing")

		n = log.len()
		require.NoError(t, s.Release(ctx))
		assert.Equal(t, []string{"ExecuteStreamingSql", "Commit"}, log.since(n), "a Release")
	})
}
