//go:build unix

package spanmutex

// A process that holds permits of several Semaphores and a read lock of an
// RWLock through its Scope's session (issue 44), and waits for permits of
// another, killed (SIGKILL) or paused (SIGSTOP): every permit it held is
// taken within a lease of the session's last renewal, never more permits
// than a Semaphore has, its waiting entry costs the others one lease, and
// a paused holder, resumed, finds every lease lost and writes nothing.
// The "semmany" role: runSemMany (process_session_roles_test.go).

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sharedSize and sharedHeld: the test's Semaphores have sharedSize
// permits, of which a "semmany" process holds (or waits for) sharedHeld.
const sharedSize, sharedHeld = 3, 2

// A process holds 2 permits of each of 3 Semaphores of 3 (whose third
// permit this test holds throughout) and a read lock of an RWLock, through
// its Scope's session, and waits for 2 permits of a fourth, all of whose 3
// another process holds; a taker in this test's process waits for 2
// permits of each of the 3, for the RWLock's write lock, and, behind the
// waiting process, for 2 permits of the fourth. The process is killed
// (SIGKILL): every taker gets what it waited for by taking it over, no
// sooner than a lease after the session's (or the entry's) last renewal
// by Spanner's clock and within a lease plus manySlack of it, and of the
// kill; no read (Inspect, over and over) shows more than 3 permits of a
// Semaphore held by live holders, or a writer beside a live reader, and
// the dead holder's entries are gone. Once the other process releases the fourth, the taker behind the dead waiting entry gets its permits within a lease
// plus manySlack of the Release, and the dead entry is gone.
func TestSemaphoreProcessesKilledHolderThroughSession(t *testing.T) {
	t.Parallel() // waits out leases beside the other waiting tests (own database)
	sessionDialects(t, killedSharedHolder)
}

func killedSharedHolder(t *testing.T, db string) {
	const wm = 2 * time.Second
	holds, rholds, waits := lockNames("sem", 3), lockNames("rw", 1), lockNames("semw", 1)
	check := newClient(t, db)
	holdBystanders(t, check, holds, wm)
	other := startContender(t, procSpec{Role: "semmany", ID: "other", Database: db, Holds: waits,
		Size: sharedSize, Count: sharedSize, Lease: wm, Sessions: true})
	other.await(t, time.Minute, 0, "holding", nil)
	many := startContender(t, procSpec{Role: "semmany", ID: "many", Database: db, Holds: holds, RHolds: rholds,
		Waits: waits, Size: sharedSize, Count: sharedHeld, Lease: wm, Sessions: true})
	many.await(t, time.Minute, 0, "holding", nil)
	for _, w := range waits {
		waitFor(t, time.Minute, "many to queue for "+w, func() bool { return slices.Contains(queued(t, check, w), "many-w0") })
	}
	session := requireEntriesThroughSession(t, check, slices.Concat(holds, rholds, waits), "many-")
	takers := takeShared(t, check, holds, rholds, wm)
	behind := takeShared(t, check, waits, nil, wm)

	watched := watchPermits(t, check, slices.Concat(holds, rholds))
	many.signal(syscall.SIGKILL)
	killed := time.Now()
	<-many.done
	last := lastSharedRenewals(t, check, session, slices.Concat(holds, rholds))
	for range len(holds) + len(rholds) {
		tk := <-takers
		requireTakenOver(t, tk, killed, last[tk.name], wm)
	}
	t.Logf("%d reads of the permits held, none more than the size", watched())
	requirePermitsWithin(t, check, holds, rholds)

	other.send(t, "release")
	released, _ := other.await(t, time.Minute, 0, "release", nil)
	require.True(t, released.ok(), released.Err)
	tk := <-behind
	require.NoError(t, tk.err, tk.name)
	after := tk.at.Sub(time.Unix(0, released.End))
	t.Logf("%s: taken %v after the Release returned (token %d, took over %v)", tk.name, after.Round(time.Millisecond), tk.lease.Token(), tk.lease.TookOver())
	assert.LessOrEqual(t, after, wm+manySlack, "%s: the dead waiting entry costs one lease, not its time to live", tk.name)
	assert.NotContains(t, queued(t, check, waits[0]), "many-w0", "the dead waiting entry is gone")
	other.send(t, "exit")
	other.wait(t, time.Minute)
}

// The process of TestSemaphoreProcessesKilledHolderThroughSession, holding
// the same but waiting for nothing, is paused (SIGSTOP) past its lease:
// each taker gets what it waited for by taking it over within a lease plus
// manySlack of the pause, no sooner than a lease after the session's last
// renewal. Resumed (SIGCONT), the process finds every lease lost (Done
// closed, Err matching ErrLeaseLost) within a second; its guarded writes
// with them are refused (ErrLeaseLost) and write nothing; its Releases
// return ErrLeaseLost; the takers and this test's permits stay held, and
// from the pause to the Releases, no read shows more permits held by live
// holders than a Semaphore has, or a writer beside a live reader.
func TestSemaphoreProcessesPausedHolderThroughSession(t *testing.T) {
	t.Parallel() // waits out leases beside the other waiting tests (own database)
	sessionDialects(t, pausedSharedHolder)
}

func pausedSharedHolder(t *testing.T, db string) {
	const wm = 2 * time.Second
	holds, rholds := lockNames("sem", 3), lockNames("rw", 1)
	all := slices.Concat(holds, rholds)
	check := newClient(t, db)
	holdBystanders(t, check, holds, wm)
	many := startContender(t, procSpec{Role: "semmany", ID: "many", Database: db, Holds: holds, RHolds: rholds,
		Size: sharedSize, Count: sharedHeld, Lease: wm, Sessions: true})
	many.await(t, time.Minute, 0, "holding", nil)
	session := requireEntriesThroughSession(t, check, all, "many-")
	takers := takeShared(t, check, holds, rholds, wm)

	watched := watchPermits(t, check, all)
	many.signal(syscall.SIGSTOP)
	stopped := time.Now()
	last := lastSharedRenewals(t, check, session, all) // or earlier, if a renewal was in flight
	owners := map[string]string{}
	for range all {
		tk := <-takers
		requireTakenOver(t, tk, stopped, last[tk.name], wm)
		owners[tk.name] = tk.lease.Owner()
	}
	many.signal(syscall.SIGCONT)
	resumed := time.Now()
	for i, name := range all {
		lost, _ := many.await(t, time.Minute, 0, "lost", func(e procEvent) bool { return e.Call == i })
		assert.Equal(t, "lease-lost", lost.Class, "%s: Lease.Err after Done closed: %s", name, lost.Err)
		assert.LessOrEqual(t, time.Unix(0, lost.End).Sub(resumed), time.Second, "%s: Done closed on resuming", name)
	}
	many.send(t, "guard")
	for i, name := range all {
		g, _ := many.await(t, time.Minute, 0, "guard", func(e procEvent) bool { return e.Call == i })
		assert.Equal(t, "lease-lost", g.Class, "%s: the resumed holder's guarded write: %s", name, g.Err)
		requireNoFence(t, check, name+"/"+g.Owner)
	}
	many.send(t, "release")
	for i, name := range all {
		r, _ := many.await(t, time.Minute, 0, "release", func(e procEvent) bool { return e.Call == i })
		assert.Equal(t, "lease-lost", r.Class, "%s: the resumed holder's Release: %s", name, r.Err)
	}
	t.Logf("%d reads of the permits held, none more than the size", watched())
	requirePermitsWithin(t, check, holds, rholds)
	for _, name := range all {
		assert.Contains(t, holderOwners(t, check, name), owners[name], "%s stays its taker's", name)
	}
	many.send(t, "exit")
	many.wait(t, time.Minute)
}

// holdBystanders takes, in this test's process, the one permit of each of
// names (Semaphores of sharedSize) a "semmany" process does not hold
// (owner "bystander-NAME", lease wm, renewed on its own), and releases it
// when the test ends.
func holdBystanders(t *testing.T, c *spanner.Client, names []string, wm time.Duration) {
	t.Helper()
	for _, name := range names {
		s, err := NewSemaphore(c, name, sharedSize, WithOwner("bystander-"+name), WithLease(wm), WithJitter(0))
		require.NoError(t, err)
		_, err = s.Acquire(context.Background(), sharedSize-sharedHeld)
		require.NoError(t, err, name)
		t.Cleanup(func() { _ = s.Release(context.Background()) })
	}
}

// takeShared asks, in this test's process, for sharedHeld permits of each
// Semaphore of sems and for the write lock of each RWLock of rws (owner
// "taker-NAME", lease wm, a Scope each), waits until each is queued, and
// returns a channel that gets each call's result. When the test ends, it
// waits for the calls and releases what they took.
func takeShared(t *testing.T, c *spanner.Client, sems, rws []string, wm time.Duration) <-chan taken {
	t.Helper()
	got := make(chan taken, len(sems)+len(rws))
	var wg sync.WaitGroup
	call := func(name string, acquire func(context.Context) (*Lease, error), release func(context.Context) error) {
		t.Cleanup(func() { _ = release(context.Background()) }) // after wg.Wait; an error if it took nothing
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			lease, err := acquire(ctx)
			got <- taken{name: name, lease: lease, err: err, at: time.Now()}
		}()
		waitFor(t, time.Minute, name+"'s taker to queue", func() bool { return slices.Contains(queued(t, c, name), "taker-"+name) })
	}
	opts := func(name string) []LockOption {
		return []LockOption{WithOwner("taker-" + name), WithLease(wm), WithJitter(0)}
	}
	for _, name := range sems {
		s, err := NewSemaphore(c, name, sharedSize, opts(name)...)
		require.NoError(t, err)
		call(name, func(ctx context.Context) (*Lease, error) { return s.Acquire(ctx, sharedHeld) }, s.Release)
	}
	for _, name := range rws {
		rw, err := NewRWLock(c, name, opts(name)...)
		require.NoError(t, err)
		call(name, rw.Lock, rw.Unlock)
	}
	t.Cleanup(wg.Wait)
	return got
}

// requireTakenOver checks a taker's result: it took over what a holder
// held, whose holder stopped (killed or paused) at local time stopped,
// its lease wm last renewed at last by Spanner's clock: no sooner than a
// lease after that renewal, and within a lease plus manySlack of it and
// of the stop.
func requireTakenOver(t *testing.T, tk taken, stopped, last time.Time, wm time.Duration) {
	t.Helper()
	require.NoError(t, tk.err, tk.name)
	after, since := tk.at.Sub(stopped), tk.lease.AcquiredAt().Sub(last)
	t.Logf("%s: taken over %v after the stop, %v after the last renewal by Spanner's clock (token %d, took over %v)",
		tk.name, after.Round(time.Millisecond), since.Round(time.Millisecond), tk.lease.Token(), tk.lease.TookOver())
	assert.True(t, tk.lease.TookOver(), "%s was taken over", tk.name)
	assert.GreaterOrEqual(t, since, wm, "%s: by Spanner's clock, taken within the holder's lease", tk.name)
	assert.LessOrEqual(t, since, wm+manySlack, "%s: within a lease of the last renewal, plus slack", tk.name)
	assert.LessOrEqual(t, after, wm+manySlack, "%s: within a lease of the stop, plus slack", tk.name)
}

// sharedEntry is a queue entry of a Semaphore or RWLock, as
// requireEntriesThroughSession and lastSharedRenewals read it.
type sharedEntry struct {
	owner     string
	session   string
	renewedAt time.Time
}

// sharedEntries reads the queue entries of name, holders and waiters,
// oldest first.
func sharedEntries(t *testing.T, c *spanner.Client, name string) []sharedEntry {
	t.Helper()
	var out []sharedEntry
	it := c.Single().Read(context.Background(), defaultTable+"Queue", spanner.Key{name}.AsPrefix(), []string{"Owner", "Session", "RenewedAt"})
	require.NoError(t, it.Do(func(r *spanner.Row) error {
		var e sharedEntry
		var session spanner.NullString
		var renewed spanner.NullTime
		if err := r.Columns(&e.owner, &session, &renewed); err != nil {
			return err
		}
		e.session, e.renewedAt = session.StringVal, renewed.Time
		out = append(out, e)
		return nil
	}))
	return out
}

// requireEntriesThroughSession requires every entry of an owner beginning
// with prefix, in the queues of names (one at least in each), to name one
// session, and returns its id.
func requireEntriesThroughSession(t *testing.T, c *spanner.Client, names []string, prefix string) string {
	t.Helper()
	seen := map[string]bool{}
	for _, name := range names {
		n := 0
		for _, e := range sharedEntries(t, c, name) {
			if strings.HasPrefix(e.owner, prefix) {
				n++
				require.NotEmpty(t, e.session, "%s: %s's entry names a session", name, e.owner)
				seen[e.session] = true
			}
		}
		require.Positive(t, n, "%s: an entry of %s*", name, prefix)
	}
	require.Len(t, seen, 1, "one session holds them all")
	for id := range seen {
		return id
	}
	return ""
}

// lastSharedRenewals is, by Spanner's clock, the last renewal of session's
// entries in the queue of each of names: the later of the session's
// RenewedAt and theirs.
func lastSharedRenewals(t *testing.T, c *spanner.Client, session string, names []string) map[string]time.Time {
	t.Helper()
	renewed := sessionRenewedAt(t, c, session)
	last := map[string]time.Time{}
	for _, name := range names {
		last[name] = renewed
		for _, e := range sharedEntries(t, c, name) {
			if e.session == session {
				last[name] = latest(last[name], e.renewedAt)
			}
		}
	}
	return last
}

// requirePermitsWithin checks, by Inspect, that each Semaphore of sems has
// at most sharedSize permits held by live holders, none of them a
// "semmany" process's, and each RWLock of rws one writer, the taker.
func requirePermitsWithin(t *testing.T, c *spanner.Client, sems, rws []string) {
	t.Helper()
	for _, name := range slices.Concat(sems, rws) {
		rec := inspectOne(t, c, name)
		var held int64
		for _, h := range rec.Holders {
			if h.LeaseLeft > 0 {
				held += h.Permits
			}
			assert.False(t, strings.HasPrefix(h.Owner, "many-"), "%s: the stopped process still holds: %+v", name, h)
		}
		if slices.Contains(rws, name) {
			assert.Equal(t, []string{"taker-" + name}, holderOwners(t, c, name), "%s: the writer alone", name)
			continue
		}
		assert.LessOrEqual(t, held, rec.Permits, "%s: permits held at once", name)
		assert.Equal(t, int64(sharedSize), held, "%s: the bystander's and the taker's", name)
	}
}

// watchPermits reads each Semaphore or RWLock of names by Inspect, over
// and over until the returned stop is called, and fails the test if a
// read shows its live holders (LeaseLeft above 0) holding more permits
// than it has. stop returns how many reads were made.
func watchPermits(t *testing.T, c *spanner.Client, names []string) (stop func() int) {
	t.Helper()
	done, reads := make(chan struct{}), make(chan int, 1)
	go func() {
		n := 0
		defer func() { reads <- n }()
		for {
			for _, name := range names {
				select {
				case <-done:
					return
				default:
				}
				recs, err := Inspect(context.Background(), c, name)
				if !assert.NoError(t, err, name) || !assert.Len(t, recs, 1, name) {
					return
				}
				n++
				var held int64
				for _, h := range recs[0].Holders {
					if h.LeaseLeft > 0 {
						held += h.Permits
					}
				}
				assert.LessOrEqual(t, held, recs[0].Permits, "%s: permits held by live holders at once: %+v", name, recs[0].Holders)
			}
		}
	}()
	return sync.OnceValue(func() int {
		close(done)
		return <-reads
	})
}

// holderOwners returns the owners of name's holders, by Inspect.
func holderOwners(t *testing.T, c *spanner.Client, name string) []string {
	t.Helper()
	var out []string
	for _, h := range inspectOne(t, c, name).Holders {
		out = append(out, h.Owner)
	}
	return out
}

// requireNoFence requires the Fences table to have no row for resource:
// no guarded write to it committed.
func requireNoFence(t *testing.T, c *spanner.Client, resource string) {
	t.Helper()
	_, err := c.Single().ReadRow(context.Background(), defaultFenceTable, spanner.Key{resource}, []string{"Token"})
	require.True(t, errors.Is(err, spanner.ErrRowNotFound), "%s: a guarded write landed (%v)", resource, err)
}
