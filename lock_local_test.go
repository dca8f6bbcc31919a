package spanmutex

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A wake-up reaches a registered waiter, with the Unlock's send time, never
// blocks, and reaches nobody after the waiter unregistered. Of two pending,
// the one that hands the lock over is kept (the newer if both do: a waiter
// that joined again may be handed the lock again, seed 1644640); a hint
// never replaces a hand-off.
func TestWakeBoard(t *testing.T) {
	b := &wakeBoard{waiting: map[string]chan wakeUp{}}
	ch, unregister := b.register("w1")
	t0 := time.Unix(100, 0)
	assert.True(t, b.wake("w1", wakeUp{remoteAt: t0}))
	assert.True(t, b.wake("w1", wakeUp{sent: t0, token: 7}), "a second wake-up does not block")
	assert.True(t, b.wake("w1", wakeUp{remoteAt: t0.Add(time.Second)}))
	assert.Equal(t, wakeUp{sent: t0, token: 7}, <-ch, "the hand-off is kept over the hints")
	assert.True(t, b.wake("w1", wakeUp{sent: t0, token: 7}))
	assert.True(t, b.wake("w1", wakeUp{sent: t0.Add(time.Second), token: 8}))
	assert.Equal(t, wakeUp{sent: t0.Add(time.Second), token: 8}, <-ch, "the newer hand-off is kept")
	select {
	case got := <-ch:
		t.Fatalf("a second wake-up was delivered: %v", got)
	default:
	}
	assert.False(t, b.wake("other", wakeUp{sent: t0}), "nobody waits under that id")
	unregister()
	assert.False(t, b.wake("w1", wakeUp{sent: t0}), "unregistered")
	assert.Empty(t, b.waiting)
}

// The process's view of who holds a lock: a hand-off to a local waiter
// keeps the lock in the process; gone closes only when no contender of the
// process holds it; arriving contenders do not try while one does.
func TestLocalLockHolders(t *testing.T) {
	board := NewScope()
	key := localKey{database: "db", table: "Mutexes", name: "x"}
	ll := board.get(key)
	assert.Same(t, ll, board.get(key), "one localLock per lock")

	held, _ := ll.anyHeld()
	assert.False(t, held)
	require.True(t, ll.tryAcquiring())
	assert.False(t, ll.tryAcquiring(), "another contender of the process is acquiring")
	ll.doneAcquiring()
	ll.hold("a")
	assert.False(t, ll.tryAcquiring(), "a contender of the process holds it")

	local, gone := ll.heldLocally("a")
	require.True(t, local)
	other, _ := ll.heldLocally("remote")
	assert.False(t, other)

	ll.release("a", "b") // handed to waiter b of this process
	select {
	case <-gone.ch():
		t.Fatal("gone closed while b, of this process, holds the lock")
	default:
	}
	local, _ = ll.heldLocally("b")
	assert.True(t, local)
	ll.release("a", "") // a second release of a is ignored
	local, _ = ll.heldLocally("b")
	assert.True(t, local)

	ll.release("b", "") // freed, or the lease lost
	select {
	case <-gone.ch():
		assert.False(t, gone.away, "released, not handed away")
	default:
		t.Fatal("gone did not close when the lock left the process")
	}
	require.True(t, ll.tryAcquiring())
	ll.doneAcquiring()

	ll.hold("c")
	_, gone = ll.heldLocally("c")
	ll.handAway("c") // handed to a waiter of another process
	select {
	case <-gone.ch():
		assert.True(t, gone.away, "handed away")
	default:
		t.Fatal("gone did not close when the lock was handed away")
	}

	board.put(ll)
	board.put(ll)
	assert.Empty(t, board.locks, "the last put removes the localLock")
}

// Waiters of one process that join while another join is being committed
// are inserted by one shared commit, and each learns its key and its place.
func TestLocalLockGroupCommitsJoins(t *testing.T) {
	db := freshDatabase(t)
	c := newClient(t, db)
	s := newSpannerStore(c, defaultTable, time.Minute)
	ll := NewScope().get(localKey{database: c.DatabaseName(), table: defaultTable, name: "group"})
	ctx := context.Background()
	const n = 50
	// The lock's row exists, as it does once the lock was ever taken: a
	// join also marks it queued (queue_mark.go).
	first, err := NewLock(c, "group", WithScope(NewScope(WithoutWakeUps())))
	require.NoError(t, err)
	_, err = first.Lock(ctx)
	require.NoError(t, err)
	require.NoError(t, first.Unlock(ctx))

	// Hold the gate so that the first join waits for it with its batch
	// taken, and the others queue up behind it.
	require.NoError(t, ll.lockGate(ctx))
	results := make([]joinResult, n)
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		ids[i] = NewScope().newWaiterID()
	}
	start := func(i int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = ll.join(ctx, s, "group", queueInsert{id: ids[i], owner: fmt.Sprintf("w%02d", i), lease: time.Minute}, time.Minute, nil)
		}()
	}
	start(0)
	waitFor(t, time.Minute, "the first join to take its batch", func() bool { return pending(ll) == 0 })
	for i := 1; i < n; i++ {
		start(i)
	}
	waitFor(t, time.Minute, "the joins to queue up behind the first", func() bool { return pending(ll) == n-1 })
	ll.unlockGate()
	wg.Wait()

	assert.Equal(t, int64(2), s.stats.blindWrites.Load(), "the first join's commit, then one for the other 49")
	var order []string // waiter ids in queue order
	stmt := spanner.Statement{SQL: "SELECT WaiterID FROM MutexesQueue WHERE Name = 'group' ORDER BY EnqueuedAt, WaiterID"}
	require.NoError(t, c.Single().Query(ctx, stmt).Do(func(r *spanner.Row) error {
		var id string
		if err := r.Columns(&id); err != nil {
			return err
		}
		order = append(order, id)
		return nil
	}))
	require.Len(t, order, n)
	place := map[string]int{}
	for i, id := range order {
		place[id] = i
	}
	for i, r := range results {
		require.NoError(t, r.err)
		assert.Equal(t, ids[i], r.key.id)
		if assert.True(t, r.placed, "waiter %d was placed", i) {
			assert.Equal(t, place[ids[i]], r.ahead, "waiter %d's place", i)
		}
	}

	var declared []int64
	stmt = spanner.Statement{SQL: "SELECT LeaseMicros FROM MutexesQueue WHERE Name = 'group'"}
	require.NoError(t, c.Single().Query(ctx, stmt).Do(func(r *spanner.Row) error {
		var us int64
		declared = append(declared, us)
		return r.Columns(&declared[len(declared)-1])
	}))
	for _, us := range declared {
		assert.Equal(t, time.Minute.Microseconds(), us, "each entry declares its waiter's lease")
	}
}

// pending returns how many writes wait for a commit while one is under way,
// or -1 if none is.
func pending(ll *localLock) int {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	if !ll.joining {
		return -1
	}
	return len(ll.joins)
}

// An orphan (a call that returned leaving entries behind) is handed on for
// only by a hand-off after the one whose lease its call returned, until its
// entries expire or the lock handed to it was handed on.
func TestWakeBoardOrphans(t *testing.T) {
	b := &wakeBoard{waiting: map[string]chan wakeUp{}}
	now := time.Unix(1000, 0)
	_, unregister := b.register("returned-with-7")
	defer unregister()
	b.orphan("returned-with-7", orphan{token: 7, until: now.Add(time.Minute)}, now)
	b.orphan("returned-without", orphan{until: now.Add(time.Minute)}, now)

	assert.False(t, b.orphaned("returned-with-7", 7, now), "the hand-off whose lease the call returned")
	assert.True(t, b.orphaned("returned-with-7", 8, now), "a later hand-off to a stray entry")
	assert.True(t, b.orphaned("returned-without", 3, now), "a call that returned without the lock")
	assert.False(t, b.orphaned("still-waiting", 3, now), "not an orphan")
	assert.False(t, b.orphaned("returned-without", 3, now.Add(time.Minute)), "its entries have expired")
	assert.Zero(t, b.registered(), "an orphan is no longer on the board")

	b.adopted("returned-without")
	assert.False(t, b.orphaned("returned-without", 3, now), "handed on once, its entries are gone")
	b.orphan("later", orphan{until: now.Add(2 * time.Minute)}, now.Add(time.Minute))
	assert.False(t, b.orphaned("returned-with-7", 8, now.Add(time.Minute)), "expired")

	// Expired orphans are forgotten in sweeps, each once the map has
	// doubled since the last: the map stays within twice the orphans
	// whose entries have not expired (and 16).
	for i := range 100 {
		at := now.Add(time.Duration(i) * time.Minute)
		b.orphan(fmt.Sprint("call-", i), orphan{until: at.Add(90 * time.Second)}, at)
		assert.LessOrEqual(t, len(b.orphans), 16, "after %d calls", i+1)
	}
	assert.NotContains(t, b.orphans, "returned-with-7", "expired orphans are forgotten")
}
