package spanmutex

import (
	"context"
	"slices"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A Semaphore of a Scope made WithSessions holds its permits through the
// session: three holders of one Scope (5 permits of 6) cost nothing but
// the session's renewals, one Commit each, about 4 in 1.2 s with a 900ms
// lease. Inspect from another process judges them by the session (their
// lease left is the session's, not the century their entries declare).
// Deleting the session's row loses every lease, each signalled by Done
// with ErrLeaseLost naming the session; a contender of a Scope without
// sessions then takes all the permits, with a newer token, once the
// holders' own RenewedAt is a lease old.
func TestSessionHoldsSemaphorePermits(t *testing.T) {
	needEmulator(t)
	t.Parallel() // waits out leases beside the other tests that do
	eachDialect(t, func(t *testing.T, db string) {
		ctx := context.Background()
		const lease = 900 * time.Millisecond
		var log rpcLog
		client := countingClient(t, db, &log)
		scope := NewScope(WithoutWakeUps(), WithSessions())
		var leases []*Lease
		for _, n := range []int64{2, 2, 1} {
			s, err := NewSemaphore(client, "permits", 6, WithLease(lease), WithScope(scope))
			require.NoError(t, err)
			l, err := s.Acquire(ctx, n)
			require.NoError(t, err)
			require.NotEmpty(t, l.session, "held through the session")
			require.Equal(t, leases0Session(leases, l), l.session, "one session for the Scope")
			leases = append(leases, l)
		}
		calls := idleSessionCommits(t, &log, 1200*time.Millisecond)
		assert.InDelta(t, 4, len(calls), 1.5, "one renewal every third of the lease, for 3 holders")
		t.Logf("3 holders (5 permits) held 1.2 s: %d RPCs, all session renewals", len(calls))

		c := newClient(t, db)
		recs, err := Inspect(ctx, c, "permits")
		require.NoError(t, err)
		require.Len(t, recs, 1)
		require.Len(t, recs[0].Holders, 3)
		for _, h := range recs[0].Holders {
			assert.LessOrEqual(t, h.LeaseLeft, lease, "judged by the session's lease")
			assert.Positive(t, h.LeaseLeft, "live while the session is")
		}

		_, err = c.Apply(ctx, []*spanner.Mutation{spanner.Delete(defaultTable+"Sessions", spanner.Key{leases[0].session})})
		require.NoError(t, err)
		requireLostWithSession(t, leases, 2*lease)
		taker, err := NewSemaphore(c, "permits", 6, WithLease(lease), WithScope(NewScope(WithoutWakeUps())))
		require.NoError(t, err)
		tctx, cancel := context.WithTimeout(ctx, 10*lease)
		defer cancel()
		got, err := taker.Acquire(tctx, 6)
		require.NoError(t, err, "all the permits, once the lost holders lapse")
		assert.Greater(t, got.Token(), leases[2].Token())
		require.NoError(t, taker.Release(ctx))
	})
}

// leases0Session is the session of the first of leases, or l's if none.
func leases0Session(leases []*Lease, l *Lease) string {
	if len(leases) == 0 {
		return l.session
	}
	return leases[0].session
}

// An RWLock of a Scope made WithSessions: its writer holds through the
// session; its reader, waiting behind the writer, names the session in its
// entry and renews nothing of its own; the writer's Unlock grants the
// reader, renewed on its own until its first renewal moves it into the
// session (its entry then names the session), after which it costs only
// the session's renewals.
func TestSessionHoldsRWLockReaderAndWriter(t *testing.T) {
	needEmulator(t)
	t.Parallel() // waits out leases beside the other tests that do
	eachDialect(t, func(t *testing.T, db string) {
		ctx := context.Background()
		const lease = 900 * time.Millisecond
		c := newClient(t, db)
		var log rpcLog
		client := countingClient(t, db, &log)
		scope := NewScope(WithoutWakeUps(), WithSessions())
		writer, err := NewRWLock(client, "rw", WithLease(lease), WithScope(scope))
		require.NoError(t, err)
		reader, err := NewRWLock(client, "rw", WithLease(lease), WithScope(scope))
		require.NoError(t, err)
		w, err := writer.Lock(ctx)
		require.NoError(t, err)
		require.NotEmpty(t, w.session, "the writer holds through the session")
		got := make(chan *Lease, 1)
		go func() {
			l, err := reader.RLock(ctx)
			assert.NoError(t, err)
			got <- l
		}()
		waitFor(t, time.Minute, "the reader to queue", func() bool { return len(semEntrySessions(t, c, "rw")) == 2 })
		assert.Equal(t, []string{w.session, w.session}, semEntrySessions(t, c, "rw"), "the reader's entry names the session")
		<-time.After(2*lease + 300*time.Millisecond) // past the time a waiter renews its entry, not a synchronisation
		require.NoError(t, writer.Unlock(ctx))
		var r *Lease
		select {
		case r = <-got:
		case <-time.After(time.Minute):
			t.Fatal("the reader was not granted")
		}
		assert.Greater(t, r.Token(), w.Token())
		assert.Empty(t, r.session, "granted by the writer's Unlock: renewed on its own")
		waitFor(t, time.Minute, "the reader to join the session", func() bool {
			// Its entry still names the session it waited through: joined,
			// it declares the century.
			return slices.Equal(semEntryLeases(t, c, "rw"), []time.Duration{sessionHeldLease})
		})
		// The Scope's session live at the renewal: another than the
		// writer's if that one, left with no member, was let go.
		assert.NotEmpty(t, semEntrySessions(t, c, "rw")[0])
		idleSessionCommits(t, &log, time.Second)
		require.NoError(t, reader.RUnlock(ctx))
		tags := log.tagsSince(0)
		renews := 0
		for _, tag := range tags {
			if tag == tagSemRenew {
				renews++
			}
		}
		// The renewal that joined the session, and perhaps freshen's, if
		// the grant was learnt a renewal interval late; none of the
		// waiting entry, waiting past two leases.
		assert.Contains(t, []int{1, 2}, renews, "the reader's renewals of its own")
	})
}

// semEntrySessions returns the session each queue entry of name names,
// oldest first ("" for none).
func semEntrySessions(t *testing.T, c *spanner.Client, name string) []string {
	t.Helper()
	var out []string
	err := c.Single().Read(context.Background(), defaultTable+"Queue", spanner.Key{name}.AsPrefix(), []string{"Session"}).Do(func(r *spanner.Row) error {
		var s spanner.NullString
		err := r.Columns(&s)
		out = append(out, s.StringVal)
		return err
	})
	require.NoError(t, err)
	return out
}

// semEntryLeases returns the lease each queue entry of name declares,
// oldest first.
func semEntryLeases(t *testing.T, c *spanner.Client, name string) []time.Duration {
	t.Helper()
	var out []time.Duration
	err := c.Single().Read(context.Background(), defaultTable+"Queue", spanner.Key{name}.AsPrefix(), []string{"LeaseMicros"}).Do(func(r *spanner.Row) error {
		var micros spanner.NullInt64
		err := r.Columns(&micros)
		out = append(out, time.Duration(micros.Int64)*time.Microsecond)
		return err
	})
	require.NoError(t, err)
	return out
}

// A Semaphore of a Scope with sessions makes the Commits it makes without
// them on its first Acquire and Release, whose acquisition starts the
// session: its Commit inserts the session's row beside the holder's entry
// (session.next), in both dialects. The one RPC more is the store's check,
// once, that the table has sessions (a statement on INFORMATION_SCHEMA).
func TestSemaphoreAcquireStartsItsSessionInItsCommit(t *testing.T) {
	needEmulator(t)
	eachDialect(t, func(t *testing.T, db string) {
		ctx := context.Background()
		var log rpcLog
		client := countingClient(t, db, &log)
		cycle := func(name string, opts ...ScopeOption) ([]string, *Lease) {
			s, err := NewSemaphore(client, name, 2, WithScope(NewScope(append(opts, WithoutWakeUps())...)))
			require.NoError(t, err)
			n := log.len()
			l, err := s.Acquire(ctx, 1)
			require.NoError(t, err)
			require.NoError(t, s.Release(ctx))
			return withoutPoolRPCs(log.since(n)), l
		}
		without, _ := cycle("start-plain")
		with, l := cycle("start-session", WithSessions())
		t.Logf("a first Acquire and Release without sessions: %v; through a session it starts: %v", without, with)
		assert.Equal(t, append([]string{"ExecuteStreamingSql"}, without...), with, "the session's start costs no RPC; its columns are checked once")
		assert.Equal(t, []string{l.session}, sessionIDs(t, client), "the session's row, written by the acquisition the lease names")
	})
}
