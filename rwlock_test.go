package spanmutex

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Readers share the lock; a waiting writer blocks new readers; when the
// writer unlocks, the readers queued behind it are granted together, in
// one commit (consecutive tokens, the same grant time).
func TestRWLockWriterBlocksNewReaders(t *testing.T) {
	needEmulator(t)
	eachDialect(t, func(t *testing.T, db string) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c := newClient(t, db)
		rw := func(owner string) *RWLock {
			l, err := NewRWLock(c, "index", WithOwner(owner), WithLease(10*time.Second))
			require.NoError(t, err)
			return l
		}
		r1, r2, w, r3, r4 := rw("r1"), rw("r2"), rw("w"), rw("r3"), rw("r4")
		l1, err := r1.RLock(ctx)
		require.NoError(t, err)
		_, err = r2.TryRLock(ctx)
		require.NoError(t, err, "readers share")
		_, err = w.TryLock(ctx)
		require.ErrorIs(t, err, ErrHeld)

		got := make(chan *Lease, 3)
		acquire := func(f func(context.Context) (*Lease, error)) {
			go func() {
				l, err := f(ctx)
				assert.NoError(t, err)
				got <- l
			}()
		}
		acquire(w.Lock)
		waitQueued(t, c, "index", 3)
		_, err = r3.TryRLock(ctx)
		require.ErrorIs(t, err, ErrHeld, "a waiting writer blocks new readers")
		acquire(r3.RLock)
		acquire(r4.RLock)
		waitQueued(t, c, "index", 5)
		require.NoError(t, r1.RUnlock(ctx))
		require.Error(t, r2.Unlock(ctx), "r2 reads: Unlock is refused")
		require.NoError(t, r2.RUnlock(ctx))
		wl := <-got
		assert.Equal(t, "w", wl.Owner())
		assert.Equal(t, l1.Token()+2, wl.Token())
		require.NoError(t, w.Unlock(ctx))
		a, b := <-got, <-got
		assert.ElementsMatch(t, []int64{wl.Token() + 1, wl.Token() + 2}, []int64{a.Token(), b.Token()}, "the readers are granted in one commit")
		assert.Equal(t, a.AcquiredAt(), b.AcquiredAt(), "one commit")
		require.NoError(t, r3.RUnlock(ctx))
		require.NoError(t, r4.RUnlock(ctx))
	})
}
