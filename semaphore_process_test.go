//go:build unix

package spanmutex

// Tests of the Semaphore and the RWLock whose contenders are separate OS
// processes (process_test.go; the "semaphore" role, runSemaphore in
// process_child_test.go), on both dialects: nothing but the database
// coordinates them.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/spanmutex/spanmutex/ddl"
)

// startSemaphore starts a semaphore contender (runSemaphore) of name in db,
// with lease wm and no jitter, waits until it is ready, and makes its
// Semaphore or RWLock with setup ("new SIZE" or "rwlock").
func startSemaphore(t *testing.T, id, db, name string, wm time.Duration, setup string) *contender {
	t.Helper()
	c := startContender(t, procSpec{Role: "semaphore", ID: id, Database: db, Lock: name, Lease: wm})
	c.await(t, time.Minute, 0, "ready", nil)
	e := c.do(t, setup, time.Minute)
	require.True(t, e.ok(), "%s: %s: %s", id, setup, e.Err)
	return c
}

// Five processes each take one permit of a semaphore of size 3 four times
// (every other one listens for wake-ups), and while holding count
// themselves in a shared file, under flock: never more than 3 count at
// once, and more than 1 do (the permits are shared); every process makes
// its four holds; the tokens are 1..20, each once, increasing within each
// process and from every hold to each acquisition begun after its Release
// returned.
func TestSemaphoreProcessesNeverExceedSize(t *testing.T) {
	eachDialect(t, func(t *testing.T, db string) {
		t.Parallel()
		const procs, size, holds = 5, 3, 4
		dir := t.TempDir()
		cs := startContenders(t, procs, func(i int) procSpec {
			return procSpec{Role: "semaphore", ID: fmt.Sprintf("p%d", i), Database: db, Lock: "counted",
				Lease: 10 * time.Second, Duration: 200 * time.Millisecond, Dir: dir, Listen: i%2 == 0}
		})
		for _, c := range cs {
			c.await(t, time.Minute, 0, "ready", nil)
			e := c.do(t, fmt.Sprintf("new %d", size), time.Minute)
			require.True(t, e.ok(), e.Err)
		}
		start := time.Now()
		for _, c := range cs {
			c.send(t, fmt.Sprintf("count %d", holds))
		}
		for _, c := range cs {
			e, _ := c.await(t, time.Minute, 0, "count", nil)
			assert.True(t, e.ok(), "%s: %s", c.spec.ID, e.Err)
			c.send(t, "exit")
		}
		t.Logf("%d processes × %d holds of a semaphore of size %d in %v", procs, holds, size, time.Since(start))
		evs := waitAll(t, cs, time.Minute)

		holders, most, counted := readSemCount(t, dir)
		t.Logf("at most %d holders at once", most)
		assert.LessOrEqual(t, most, int64(size), "holders at once")
		assert.Greater(t, most, int64(1), "holders at once: the permits were never shared")
		assert.Equal(t, int64(0), holders, "holders left counted")
		assert.Equal(t, int64(procs*holds), counted, "holds counted")
		checkHoldTokens(t, evs, procs, holds)
	})
}

// readSemCount reads the count processes' semCountFile in dir: the holders
// counted now, the most at once, and the holds.
func readSemCount(t *testing.T, dir string) (holders, most, holds int64) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, semCountFile))
	require.NoError(t, err)
	_, err = fmt.Sscan(string(b), &holders, &most, &holds)
	require.NoError(t, err, "%s: %q", semCountFile, b)
	return holders, most, holds
}

// checkHoldTokens checks the acquire and release events of procs count
// processes of holds holds each: all succeeded; the tokens are 1..n, each
// once; each process's increase; and an acquisition begun after a Release
// returned (by the local clock, which the processes of one machine share)
// has a higher token than the released lease.
func checkHoldTokens(t *testing.T, evs []procEvent, procs, holds int) {
	t.Helper()
	var acquired, released []procEvent
	last := map[string]int64{}
	for _, e := range evs {
		switch {
		case e.Kind == "acquire":
			acquired = append(acquired, e)
			assert.True(t, e.ok(), "%s: Acquire: %s", e.Proc, e.Err)
			assert.Greater(t, e.Token, last[e.Proc], "%s: its tokens, in the order it acquired", e.Proc)
			last[e.Proc] = e.Token
		case e.Kind == "release":
			released = append(released, e)
			assert.True(t, e.ok(), "%s: Release of token %d: %s", e.Proc, e.Token, e.Err)
		}
	}
	assert.Len(t, released, procs*holds, "Releases")
	tokens := make([]int64, 0, len(acquired))
	for _, e := range acquired {
		tokens = append(tokens, e.Token)
	}
	slices.Sort(tokens)
	want := make([]int64, procs*holds)
	for i := range want {
		want[i] = int64(i + 1)
	}
	assert.Equal(t, want, tokens, "the tokens of every acquisition, sorted")
	for _, r := range released {
		for _, a := range acquired {
			if a.Start > r.End {
				assert.Greater(t, a.Token, r.Token, "%s's acquisition began after %s released token %d", a.Proc, r.Proc, r.Token)
			}
		}
	}
}

// entryRenewedAt reads the RenewedAt of owner's queue entry of name: by
// Spanner's clock, its holder's last renewal (or grant). The entry must
// exist.
func entryRenewedAt(t *testing.T, c *spanner.Client, name, owner string) time.Time {
	t.Helper()
	var renewed []time.Time
	it := c.Single().Read(context.Background(), defaultTable+ddl.QueueSuffix, spanner.Key{name}.AsPrefix(), []string{"Owner", "RenewedAt"})
	require.NoError(t, it.Do(func(r *spanner.Row) error {
		var o string
		var at time.Time
		if err := r.Columns(&o, &at); err != nil {
			return err
		}
		if o == owner {
			renewed = append(renewed, at)
		}
		return nil
	}))
	require.Len(t, renewed, 1, "%s's entries of %q", owner, name)
	return renewed[0]
}

// A process holding both permits of a semaphore (lease 2s) is killed, once
// it has renewed, while another process waits for both: the waiter gets them by takeover, with
// a higher token, no sooner than one lease after the dead holder's last
// renewal by Spanner's clock, and, by the local clock, about one lease
// after the kill: no sooner than a lease less the renewal interval (the
// holder may have renewed that long before it died), and within two.
func TestSemaphoreProcessesKilledHolder(t *testing.T) {
	eachDialect(t, func(t *testing.T, db string) {
		t.Parallel()
		check := newClient(t, db)
		const name = "killed-holder"
		wm := 2 * time.Second
		holder := startSemaphore(t, "holder", db, name, wm, "new 2")
		hl := holder.do(t, "acquire 2", time.Minute)
		require.True(t, hl.ok(), hl.Err)
		waiter := startSemaphore(t, "waiter", db, name, wm, "new 2")
		waiter.send(t, "acquire 2")
		waitFor(t, time.Minute, "the waiter to queue", func() bool {
			return slices.Equal(queued(t, check, name), []string{"holder", "waiter"})
		})
		waitFor(t, time.Minute, "the holder to renew", func() bool {
			return entryRenewedAt(t, check, name, "holder").After(hl.AcquiredAt)
		})

		holder.signal(syscall.SIGKILL)
		<-holder.done
		killed := time.Now()
		last := entryRenewedAt(t, check, name, "holder")
		wl, _ := waiter.await(t, time.Minute, 0, "acquire", nil)
		require.True(t, wl.ok(), wl.Err)
		waited := time.Duration(wl.End - killed.UnixNano())
		t.Logf("holder: token %d, last renewed at %v; waiter: token %d, took over %v, %v after that renewal (Spanner's clock), %v after the kill (local clock)",
			hl.Token, last, wl.Token, wl.TookOver, wl.AcquiredAt.Sub(last), waited)
		assert.True(t, wl.TookOver, "Lease.TookOver of the permits of a killed holder")
		assert.Greater(t, wl.Token, hl.Token)
		assert.GreaterOrEqual(t, wl.AcquiredAt.Sub(last), wm, "by Spanner's clock, the permits were taken within the holder's lease")
		assert.GreaterOrEqual(t, waited, wm-wm/3-100*time.Millisecond, "the permits came back well within a lease of the kill")
		assert.Less(t, waited, 2*wm, "the permits came back after more than two leases")
		assert.Equal(t, []string{"waiter"}, queued(t, check, name), "the dead holder's entry is deleted")
		wr := waiter.do(t, "release", time.Minute)
		assert.True(t, wr.ok(), wr.Err)
		assert.Empty(t, queued(t, check, name))
	})
}

// A reader process of an RWLock (lease 2s) makes a fenced write and is
// paused (SIGSTOP) while a writer process waits. The writer takes the lock
// over, no sooner than one lease after the reader's last renewal by
// Spanner's clock, with a higher token, and makes a fenced write. When the
// reader is continued, its fenced write with its old token is refused
// (ErrStaleToken), its Lease's Done closes with an error matching
// ErrLeaseLost, and so does its RUnlock; the fence keeps the writer's
// token.
func TestRWLockProcessesPausedReader(t *testing.T) {
	eachDialect(t, func(t *testing.T, db string) {
		t.Parallel()
		check := newClient(t, db)
		const name, resource = "paused-reader", "report.csv"
		wm := 2 * time.Second
		reader := startSemaphore(t, "reader", db, name, wm, "rwlock")
		rl := reader.do(t, "rlock", time.Minute)
		require.True(t, rl.ok(), rl.Err)
		ra := reader.do(t, "admit "+resource, time.Minute)
		require.True(t, ra.ok(), "the reader's write before its pause: %s", ra.Err)
		writer := startSemaphore(t, "writer", db, name, wm, "rwlock")
		writer.send(t, "lock")
		waitFor(t, time.Minute, "the writer to queue", func() bool {
			return slices.Equal(queued(t, check, name), []string{"reader", "writer"})
		})

		reader.signal(syscall.SIGSTOP)
		last := entryRenewedAt(t, check, name, "reader") // or earlier, if a renewal was in flight
		wl, _ := writer.await(t, time.Minute, 0, "lock", nil)
		require.True(t, wl.ok(), wl.Err)
		t.Logf("reader: token %d, last renewed at %v; writer: token %d, took over %v, %v after that renewal (Spanner's clock)",
			rl.Token, last, wl.Token, wl.TookOver, wl.AcquiredAt.Sub(last))
		assert.True(t, wl.TookOver, "the writer took the lock over from the paused reader")
		assert.Greater(t, wl.Token, rl.Token)
		assert.GreaterOrEqual(t, wl.AcquiredAt.Sub(last), wm, "by Spanner's clock, the writer came in within the reader's lease")
		wa := writer.do(t, "admit "+resource, time.Minute)
		require.True(t, wa.ok(), "the writer's write: %s", wa.Err)

		reader.signal(syscall.SIGCONT)
		stale := reader.do(t, "admit "+resource, time.Minute)
		assert.Equal(t, "stale-token", stale.Class, "the continued reader's write with token %d after the writer's with %d: %q", rl.Token, wl.Token, stale.Err)
		lost, _ := reader.await(t, time.Minute, 0, "lost", nil)
		assert.Equal(t, "lease-lost", lost.Class, "the reader's Lease.Err once Done closed: %q", lost.Err)
		ru := reader.do(t, "runlock", time.Minute)
		assert.Equal(t, "lease-lost", ru.Class, "the continued reader's RUnlock: %q", ru.Err)
		wu := writer.do(t, "unlock", time.Minute)
		assert.True(t, wu.ok(), "the writer's Unlock: %s", wu.Err)
		assert.Equal(t, wl.Token, fencedToken(t, check, resource), "the token the fence holds for %q", resource)
		assert.Empty(t, queued(t, check, name))
	})
}

// fencedToken reads the highest token the Fence accepted for resource.
func fencedToken(t *testing.T, c *spanner.Client, resource string) int64 {
	t.Helper()
	r, err := c.Single().ReadRow(context.Background(), defaultFenceTable, spanner.Key{resource}, []string{"Token"})
	require.NoError(t, err)
	var token int64
	require.NoError(t, r.Columns(&token))
	return token
}
