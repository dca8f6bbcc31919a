package spanmutex

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A Mutex whose Scope was made WithSessions runs its section through the
// session: while it runs, the only calls on the wire are the session's
// renewals (one Commit each, about every third of the lease), Inspect
// shows the row renewed by them, a process of a spanmutex older than
// sessions waits (the row declares a century), and a Reset
// from another process judges the row by the session (a live holder,
// refused) though the row's own RenewedAt is more than a lease old. Once
// the session's row is gone (deleted, as an operator or the row deletion
// policy would), the lease is lost with it (Done, ErrLeaseLost naming the
// session) and the section's ctx cancelled; a Mutex of another process
// takes the section over with the next token, and the old holder's finish
// is fenced.
func TestMutexSessionRenewsOnlyTheSession(t *testing.T) {
	needEmulator(t)
	t.Parallel() // waits out leases beside the other tests that do
	eachDialect(t, func(t *testing.T, db string) {
		ctx := context.Background()
		const lease = 900 * time.Millisecond
		var log rpcLog
		m, err := New(countingClient(t, db, &log), "mx-session", WithLease(lease), WithOwner("a"),
			WithScope(NewScope(WithoutWakeUps(), WithSessions())))
		require.NoError(t, err)
		held, causes, release := make(chan *Lease, 1), make(chan error, 1), make(chan struct{})
		letGo := sync.OnceFunc(func() { close(release) })
		t.Cleanup(letGo) // a failed test lets the section end too
		type ran struct {
			out Outcome
			err error
		}
		done := make(chan ran, 1)
		go func() {
			out, err := m.Run(ctx, func(sctx context.Context, l *Lease) error {
				held <- l
				<-sctx.Done()
				causes <- context.Cause(sctx)
				<-release // a process that has not noticed yet
				return nil
			})
			done <- ran{out, err}
		}()
		var l *Lease
		select {
		case l = <-held:
		case <-time.After(time.Minute):
			t.Fatal("the section did not begin")
		}
		require.NotEmpty(t, l.session, "held through the Scope's session")

		// A process of a spanmutex older than sessions reads the century
		// the row declares: it waits, though the row's own RenewedAt
		// passes the lease, and its Run ends with its ctx.
		older, err := New(newClient(t, db), "mx-session", WithLease(lease), WithOwner("older"), WithScope(NewScope(WithoutWakeUps())))
		require.NoError(t, err)
		older.store.(*spannerStore).olderThanSessions = true
		olderDone := make(chan ran, 1)
		go func() {
			octx, cancel := context.WithTimeout(ctx, 1400*time.Millisecond)
			defer cancel()
			out, err := older.Run(octx, func(context.Context, *Lease) error { return nil })
			olderDone <- ran{out, err}
		}()

		calls := idleSessionCommits(t, &log, 1500*time.Millisecond)
		assert.InDelta(t, 5, len(calls), 1.5, "one renewal every third of the lease: %v", calls)
		t.Logf("a section held 1.5 s through its session: %d RPCs %v", len(calls), calls)
		r := <-olderDone
		assert.Equal(t, NoOutcome, r.out, "the older process never took the section over")
		assert.ErrorIs(t, r.err, ErrNotObtained)

		c := newClient(t, db)
		recs, err := Inspect(ctx, c, "mx-session")
		require.NoError(t, err)
		require.Len(t, recs, 1)
		assert.GreaterOrEqual(t, recs[0].RenewedAt.Sub(recs[0].StartedAt), time.Second, "Inspect shows the session's renewals")
		other, err := New(c, "mx-session", WithLease(lease), WithOwner("b"), WithScope(NewScope(WithoutWakeUps())))
		require.NoError(t, err)
		_, err = other.Reset(ctx)
		require.ErrorIs(t, err, ErrResetRefused, "a live holder, by its session")

		_, err = c.Apply(ctx, []*spanner.Mutation{spanner.Delete(defaultTable+"Sessions", spanner.Key{l.session})})
		require.NoError(t, err)
		requireLostWithSession(t, []*Lease{l}, 2*lease)
		select {
		case cause := <-causes:
			var lost *leaseLostError
			assert.True(t, errors.As(cause, &lost), "the section's ctx is cancelled with the loss: %v", cause)
		case <-time.After(time.Minute):
			t.Fatal("the section's ctx was not cancelled")
		}

		tctx, cancel := context.WithTimeout(ctx, 10*lease)
		defer cancel()
		var took *Lease
		out, err := other.Run(tctx, func(_ context.Context, l *Lease) error { took = l; return nil })
		require.NoError(t, err)
		assert.Equal(t, Executed, out)
		require.NotNil(t, took)
		assert.True(t, took.TookOver(), "taken over")
		assert.Equal(t, l.Token()+1, took.Token(), "with the next token")
		assert.Empty(t, took.session, "a Mutex without sessions holds on its own")

		letGo()
		r = <-done
		assert.Equal(t, Executed, r.out)
		assert.ErrorIs(t, r.err, ErrLeaseLost, "the old holder's finish is fenced")
	})
}
