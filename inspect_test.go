package spanmutex

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestInspectListsWaiters: Inspect lists a Semaphore's or RWLock's live
// waiters in queue order, each with its owner and the permits it asks for
// (an RWLock's writer all of them), not only their number; a holder has
// no Waited, a waiter no token.
func TestInspectListsWaiters(t *testing.T) {
	needEmulator(t)
	eachDialect(t, func(t *testing.T, db string) {
		t.Parallel()
		ctx := context.Background()
		c := newClient(t, db)
		newRW := func(owner string) *RWLock {
			l, err := NewRWLock(c, "index", WithOwner(owner))
			require.NoError(t, err)
			return l
		}
		r1, w, r2 := newRW("r1"), newRW("w"), newRW("r2")
		_, err := r1.RLock(ctx)
		require.NoError(t, err)
		writerDone, readerDone := make(chan error, 1), make(chan error, 1)
		go func() {
			_, err := w.Lock(ctx)
			writerDone <- err
		}()
		waitQueued(t, c, "index", 2)
		go func() {
			_, err := r2.RLock(ctx)
			readerDone <- err
		}()
		waitQueued(t, c, "index", 3) // behind the writer: no barging

		recs, err := Inspect(ctx, c, "index")
		require.NoError(t, err)
		require.Len(t, recs, 1)
		rec := recs[0]
		require.Len(t, rec.Holders, 1)
		assert.Equal(t, "r1", rec.Holders[0].Owner)
		assert.Zero(t, rec.Holders[0].Waited, "a holder has no Waited")
		assert.Equal(t, 2, rec.Waiters)
		require.Len(t, rec.Waiting, 2, "the writer, then the reader behind it")
		for i, want := range []struct {
			owner   string
			permits int64
		}{{"w", rwPermits}, {"r2", 1}} {
			got := rec.Waiting[i]
			assert.Equal(t, want.owner, got.Owner, "waiter %d", i)
			assert.Equal(t, want.permits, got.Permits, "waiter %d", i)
			assert.Zero(t, got.Token, "waiter %d", i)
			assert.Positive(t, got.LeaseLeft, "waiter %d", i)
			assert.Positive(t, got.Waited, "waiter %d", i)
		}
		assert.GreaterOrEqual(t, rec.Waiting[0].Waited, rec.Waiting[1].Waited, "queue order: the writer joined first")

		require.NoError(t, r1.RUnlock(ctx))
		require.NoError(t, <-writerDone)
		require.NoError(t, w.Unlock(ctx))
		require.NoError(t, <-readerDone)
		require.NoError(t, r2.RUnlock(ctx))
		recs, err = Inspect(ctx, c, "index")
		require.NoError(t, err)
		require.Len(t, recs, 1)
		assert.Empty(t, recs[0].Waiting)
	})
}
