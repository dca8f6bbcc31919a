package spanmutex

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/spanmutex/spanmutex/ddl"
)

// holdAll takes n locks named prefix-i in scope and returns them, held.
func holdAll(t *testing.T, c *spanner.Client, scope *Scope, prefix string, n int, opts ...LockOption) ([]*Lock, []*Lease) {
	t.Helper()
	var (
		locks  []*Lock
		leases []*Lease
	)
	for i := range n {
		l, err := NewLock(c, fmt.Sprintf("%s-%d", prefix, i), append([]LockOption{WithScope(scope)}, opts...)...)
		require.NoError(t, err)
		lease, err := l.Lock(context.Background())
		require.NoError(t, err)
		locks, leases = append(locks, l), append(leases, lease)
	}
	return locks, leases
}

// A Scope made WithSessions keeps every lock it holds alive with one write
// per renewal interval: holding 5 locks for 1.5 s with a 900ms lease costs
// about 5 session renewals (a Commit each) and no renewal of a lock. A
// contender of another Scope sees each held, with the session's lease left
// (not the century the row declares), and Unlock releases each.
func TestSessionRenewsEveryLockWithOneWrite(t *testing.T) {
	needEmulator(t)
	t.Parallel() // waits out leases beside the other tests that do
	eachDialect(t, func(t *testing.T, db string) {
		ctx := context.Background()
		var log rpcLog
		scope := NewScope(WithoutWakeUps(), WithSessions())
		const lease = 900 * time.Millisecond
		locks, leases := holdAll(t, countingClient(t, db, &log), scope, "held", 5, WithLease(lease))
		calls := idleSessionCommits(t, &log, 1500*time.Millisecond)
		assert.InDelta(t, 5, len(calls), 1.5, "one renewal every third of the lease, for 5 locks: %v", calls)
		t.Logf("5 locks held 1.5 s: %d RPCs, all session renewals", len(calls))

		other, err := NewLock(newClient(t, db), "held-0", WithScope(NewScope(WithoutWakeUps())))
		require.NoError(t, err)
		_, err = other.TryLock(ctx)
		var held *HeldError
		require.ErrorAs(t, err, &held)
		assert.LessOrEqual(t, held.LeaseLeft, lease, "judged by the session's lease")
		for i, l := range locks {
			require.NoError(t, l.Unlock(ctx))
			assert.ErrorIs(t, leases[i].Err(), ErrReleased)
		}
		lease0, err := other.TryLock(ctx)
		require.NoError(t, err, "free after the Unlock")
		assert.Greater(t, lease0.Token(), leases[0].Token())
		require.NoError(t, other.Unlock(ctx))
	})
}

// A lock handed over by an Unlock to a Lock of a Scope made WithSessions
// is renewed on its own only until its first renewal, which moves it into
// the session (in the renewal's own transaction): from then on it costs
// nothing but the session's renewals, and losing the session loses it.
func TestSessionJoinsAHandedOverLock(t *testing.T) {
	needEmulator(t)
	t.Parallel() // waits out leases beside the other tests that do
	eachDialect(t, func(t *testing.T, db string) {
		ctx := context.Background()
		const lease = 900 * time.Millisecond
		q := queueBehind(t, db, "joins", lease)
		handed := q.handOver(t, 0)
		assert.Empty(t, handed.session, "handed over: granted renewed on its own")
		var session string
		waitFor(t, time.Minute, "the row to name the session", func() bool {
			session = rowSession(t, q.c, "joins-0")
			return session != ""
		})
		calls := idleSessionCommits(t, q.log, 1200*time.Millisecond)
		assert.InDelta(t, 4, len(calls), 1.5, "one session renewal every third of the lease, and no renewal of the lock")
		t.Logf("a handed-over lock held 1.2 s after it joined the session: %d RPCs", len(calls))

		_, err := q.c.Apply(ctx, []*spanner.Mutation{spanner.Delete(defaultTable+"Sessions", spanner.Key{session})})
		require.NoError(t, err)
		requireLostWithSession(t, []*Lease{handed}, 2*lease)
	})
}

// A waiting call of a Scope made WithSessions names the session in its
// queue entry and writes no renewal of its own: the session's renewals
// keep the entry live, so the Unlock hands it the lock after the entry's
// own time to live (four leases) has passed.
func TestSessionKeepsAWaitingEntryLive(t *testing.T) {
	needEmulator(t)
	t.Parallel() // waits out leases beside the other tests that do
	eachDialect(t, func(t *testing.T, db string) {
		// 1 s: at 500 ms, a race-detector run beside the other tests lost
		// the session once, and the waiter then renewed its entry itself.
		const lease = time.Second
		q := queueBehind(t, db, "waits", lease)
		require.NotEmpty(t, entrySession(t, q.c, "waits-0"), "the entry names the session")
		l := q.handOver(t, waiterTTLFactor*lease+300*time.Millisecond) // past the entry's own time to live
		assert.True(t, l.handedOff, "handed over by the Unlock, not taken free")
		assert.Equal(t, q.held.Token()+1, l.Token())
		require.NoError(t, q.waiter.Unlock(context.Background()))
		tags := q.log.tagsSince(0)
		assert.NotContains(t, tags, tagEntryRenew, "no renewal of the entry")
		assert.Contains(t, tags, tagSession, "the session renewed it")
	})
}

// queuedBehind is a lock prefix-0 held by a Lock of a Scope without
// sessions and waited for by a Lock call of a Scope made WithSessions,
// whose calls log counts.
type queuedBehind struct {
	c      *spanner.Client
	holder *Lock
	held   *Lease
	waiter *Lock
	log    *rpcLog
	got    chan *Lease
}

// queueBehind holds lock prefix-0 in database db and starts a waiting
// Lock call on it that declares lease, queued when it returns. The holder
// declares ten times lease, so that renewals slowed by a busy emulator do
// not let the waiter take it over.
func queueBehind(t *testing.T, db, prefix string, lease time.Duration) *queuedBehind {
	t.Helper()
	q := &queuedBehind{c: newClient(t, db), log: &rpcLog{}, got: make(chan *Lease, 1)}
	holders, held := holdAll(t, q.c, NewScope(WithoutWakeUps()), prefix, 1, WithLease(10*lease))
	q.holder, q.held = holders[0], held[0]
	var err error
	q.waiter, err = NewLock(countingClient(t, db, q.log), prefix+"-0", WithLease(lease), WithScope(NewScope(WithoutWakeUps(), WithSessions())))
	require.NoError(t, err)
	go func() {
		l, err := q.waiter.Lock(context.Background())
		assert.NoError(t, err)
		q.got <- l
	}()
	waitFor(t, time.Minute, "the waiter to queue", func() bool { return len(queuedIDs(t, q.c, prefix+"-0")) == 1 })
	return q
}

// handOver waits after (a wait, not a synchronisation), unlocks the
// holder and returns the lease the waiting call got.
func (q *queuedBehind) handOver(t *testing.T, after time.Duration) *Lease {
	t.Helper()
	<-time.After(after)
	require.NoError(t, q.holder.Unlock(context.Background()))
	select {
	case l := <-q.got:
		require.NotNil(t, l)
		return l
	case <-time.After(time.Minute):
		t.Fatal("the waiter was not handed the lock")
		return nil
	}
}

// entrySession returns the session the only queue entry of lock name names.
func entrySession(t *testing.T, c *spanner.Client, name string) string {
	t.Helper()
	var s spanner.NullString
	err := c.Single().Read(context.Background(), defaultTable+"Queue", spanner.Key{name}.AsPrefix(), []string{"Session"}).Do(func(r *spanner.Row) error {
		return r.Columns(&s)
	})
	require.NoError(t, err)
	return s.StringVal
}

// rowSession returns the session lock name's row names, "" if none.
func rowSession(t *testing.T, c *spanner.Client, name string) string {
	t.Helper()
	r, err := c.Single().ReadRow(context.Background(), defaultTable, spanner.Key{name}, []string{"Session"})
	require.NoError(t, err)
	var s spanner.NullString
	require.NoError(t, r.Columns(&s))
	return s.StringVal
}

// sessionIDs returns the ids of the default table's sessions' rows.
func sessionIDs(t *testing.T, c *spanner.Client) []string {
	t.Helper()
	var ids []string
	err := c.Single().Read(context.Background(), defaultTable+ddl.SessionsSuffix, spanner.AllKeys(), []string{"SessionID"}).Do(func(r *spanner.Row) error {
		var id string
		ids = append(ids, id)
		return r.Columns(&ids[len(ids)-1])
	})
	require.NoError(t, err)
	return ids
}

// A Lock of a Scope with sessions costs what it does without them on its
// first cycle, which starts the session: the acquisition's Commit inserts
// the session's row beside the lock's (session.next), in both dialects.
func TestLockCycleStartsItsSessionInItsCommit(t *testing.T) {
	needEmulator(t)
	eachDialect(t, func(t *testing.T, db string) {
		var log rpcLog
		c := countingClient(t, db, &log)
		plain, err := NewLock(c, "start-plain", WithScope(NewScope(WithoutWakeUps())))
		require.NoError(t, err)
		without := cycleRPCs(t, plain, &log)
		sessioned, err := NewLock(c, "start-session", WithScope(NewScope(WithoutWakeUps(), WithSessions())))
		require.NoError(t, err)
		with := cycleRPCs(t, sessioned, &log)
		without, with = withoutPoolRPCs(without), withoutPoolRPCs(with)
		t.Logf("a first cycle without sessions: %v; through a session it starts: %v", without, with)
		assert.Equal(t, without, with, "the session's start costs no RPC")
		require.Len(t, sessionIDs(t, c), 1, "the session's row, written by the acquisition")
		assert.Equal(t, sessionIDs(t, c)[0], rowSession(t, c, "start-session"), "the row names the session its Commit started")
	})
}

// A session whose row is gone (deleted here, as an operator or the row
// deletion policy would) loses every lease held through it at its next
// renewal, each signalled by Done with ErrLeaseLost; a contender then
// takes each over once the row's own RenewedAt is a lease old, with the
// next token.
func TestSessionGoneLosesEveryLease(t *testing.T) {
	needEmulator(t)
	t.Parallel() // waits out leases beside the other tests that do
	eachDialect(t, func(t *testing.T, db string) {
		ctx := context.Background()
		c := newClient(t, db)
		const lease = 900 * time.Millisecond
		_, leases := holdAll(t, c, NewScope(WithoutWakeUps(), WithSessions()), "gone", 3, WithLease(lease))
		require.NotEmpty(t, leases[0].session)
		for _, l := range leases[1:] {
			require.Equal(t, leases[0].session, l.session, "one session for the Scope")
		}
		_, err := c.Apply(ctx, []*spanner.Mutation{spanner.Delete(defaultTable+"Sessions", spanner.Key{leases[0].session})})
		require.NoError(t, err)
		requireLostWithSession(t, leases, 2*lease)
		taker, err := NewLock(c, "gone-1", WithLease(lease), WithScope(NewScope(WithoutWakeUps())))
		require.NoError(t, err)
		tctx, cancel := context.WithTimeout(ctx, 10*lease)
		defer cancel()
		got, err := taker.Lock(tctx)
		require.NoError(t, err)
		assert.True(t, got.TookOver())
		assert.Equal(t, leases[1].Token()+1, got.Token())
		require.NoError(t, taker.Unlock(ctx))
	})
}

// During a rolling upgrade, a process of a spanmutex older than sessions
// (which reads no session and writes none) shares locks with one that
// holds through a session: it never takes over a lock held through a
// session (the row declares a century), and waits for its Unlock, which
// hands it the lock; when the session's process dies, a process that
// reads sessions takes the lock over and passes it to the old process's
// waiting call, which was first in line.
func TestSessionsDuringARollingUpgrade(t *testing.T) {
	needEmulator(t)
	t.Parallel() // waits out leases beside the other tests that do
	eachDialect(t, func(t *testing.T, db string) {
		ctx := context.Background()
		const lease = time.Second
		older := func(name, owner string) *Lock {
			l, err := NewLock(newClient(t, db), name, WithLease(lease), WithOwner(owner), WithScope(NewScope(WithoutWakeUps())))
			require.NoError(t, err)
			l.sp.olderThanSessions = true
			return l
		}
		c := newClient(t, db)
		_, held := holdAll(t, c, NewScope(WithoutWakeUps(), WithSessions()), "upgrade", 1, WithLease(lease))
		old := older("upgrade-0", "old")
		_, err := old.TryLock(ctx)
		var he *HeldError
		require.ErrorAs(t, err, &he)
		assert.Greater(t, he.LeaseLeft, 24*time.Hour, "the old process sees the century the row declares")

		// The session's process dies: its session stops being renewed.
		got := make(chan *Lease, 1)
		go func() {
			l, err := old.Lock(ctx)
			assert.NoError(t, err)
			got <- l
		}()
		waitFor(t, time.Minute, "the old process to queue", func() bool { return len(queuedIDs(t, c, "upgrade-0")) == 1 })
		_, err = c.Apply(ctx, []*spanner.Mutation{spanner.Delete(defaultTable+"Sessions", spanner.Key{held[0].session})})
		require.NoError(t, err)
		select {
		case l := <-got:
			t.Fatalf("the old process took the lock (token %d) by itself", l.Token())
		case <-time.After(2 * lease):
		}
		newer, err := NewLock(newClient(t, db), "upgrade-0", WithLease(lease), WithOwner("new"), WithScope(NewScope(WithoutWakeUps())))
		require.NoError(t, err)
		tctx, cancel := context.WithTimeout(ctx, 10*lease)
		defer cancel()
		newerDone := make(chan error, 1)
		go func() {
			_, err := newer.Lock(tctx)
			if err == nil {
				err = newer.Unlock(ctx)
			}
			newerDone <- err
		}()
		var lo *Lease
		select {
		case lo = <-got:
		case <-time.After(10 * lease):
			t.Fatal("the old process's call was not handed the lock after the takeover")
		}
		assert.Equal(t, held[0].Token()+1, lo.Token(), "passed on by the taker's transaction, with the next token")
		require.NoError(t, old.Unlock(ctx))
		require.NoError(t, <-newerDone, "the newer process, behind it, gets the lock next")
	})
}

// idleSessionCommits waits window (a window to count idle calls in, not a
// synchronisation) and requires every call log records in it to be a
// session renewal, one Commit; it returns those calls.
func idleSessionCommits(t *testing.T, log *rpcLog, window time.Duration) []string {
	t.Helper()
	n := log.len()
	<-time.After(window)
	tags, calls := log.tagsSince(n), log.since(n)
	for i, tag := range tags {
		assert.Equal(t, tagSession, tag, "call %d (%s) is a session renewal", i, calls[i])
		assert.Equal(t, "Commit", calls[i], "call %d, a session renewal, is one Commit", i)
	}
	return calls
}

// requireLostWithSession requires each of leases to be lost, its Done
// closed within within and its Err an ErrLeaseLost naming its session, and
// returns when each was seen lost.
func requireLostWithSession(t *testing.T, leases []*Lease, within time.Duration) []time.Time {
	t.Helper()
	lostAt := make([]time.Time, len(leases))
	for i, l := range leases {
		select {
		case <-l.Done():
			lostAt[i] = time.Now()
		case <-time.After(within):
			t.Fatalf("lease %d: not lost within %v", i, within)
		}
		var lost *leaseLostError
		require.True(t, errors.As(l.Err(), &lost), "lease %d: %v", i, l.Err())
		assert.Contains(t, lost.Reason, "session", "lease %d", i)
	}
	return lostAt
}

// A waiter polling behind a lock held through another Scope's session reads
// the holder's session about once per lease, not at every poll: a read of
// the row alone is judged by the session as the store last read it while
// that shows it live (seenSession), so a poll costs one read, as behind a
// holder that renews its own row.
func TestWaiterReadsTheHoldersSessionAboutOncePerLease(t *testing.T) {
	needEmulator(t)
	t.Parallel()
	db := freshDatabase(t)
	const lease, wait = 900 * time.Millisecond, 2700 * time.Millisecond
	holders, leases := holdAll(t, newClient(t, db), NewScope(WithoutWakeUps(), WithSessions()), "polled", 1, WithLease(lease))
	require.NotEmpty(t, leases[0].session)
	var log rpcLog
	waiter, err := NewLock(countingClient(t, db, &log), "polled-0", WithLease(lease), WithScope(NewScope(WithoutWakeUps())))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	_, err = waiter.Lock(ctx)
	require.ErrorIs(t, err, ErrNotObtained, "the holder held on")
	reads := map[string]int{}
	for _, tag := range log.tagsSince(0) {
		reads[tag]++
	}
	t.Logf("waiting %v behind a session's holder: %d reads of the row, %d statements, %d reads of the session", wait, reads[tagRead], reads[tagPoll], reads[tagSessionRead])
	require.Greater(t, reads[tagRead], 6, "the waiter polled the row")
	assert.LessOrEqual(t, reads[tagSessionRead], int(wait/(lease*2/3))+2, "about one session read per two thirds of a lease")
	assert.Less(t, 2*reads[tagSessionRead], reads[tagRead], "most polls read the row alone")
	require.NoError(t, holders[0].Unlock(context.Background()))
}
