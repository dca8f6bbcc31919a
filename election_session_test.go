package spanmutex

import (
	"context"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An Election whose Scope is made WithSessions holds its term through the
// session: the leader's idle cost is the session's renewals (one Commit
// each) and nothing of its own; another process's Leader and Observe
// report the term; losing the session (its row deleted) ends the
// Leadership, its Context cancelled and its Lease lost, and the waiting
// candidate leads with the next token. A leader whose process dies (its
// client closed: nothing is renewed any more) is no leader once its
// session has lapsed: Leader, in another process, judges the term by the
// session, not by the century the row declares, and the cut-off leader's
// Leadership ends.
func TestElectionHeldThroughASession(t *testing.T) {
	needEmulator(t)
	t.Parallel() // waits out leases beside the other tests that do
	eachDialect(t, func(t *testing.T, db string) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		const lease = 900 * time.Millisecond
		sessions := func(c *spanner.Client) *Election {
			e, err := NewElection(c, "term", WithLease(lease), WithScope(NewScope(WithoutWakeUps(), WithSessions())))
			require.NoError(t, err)
			return e
		}
		watcher := newTestElection(t, db, "term", WithLease(lease))
		terms := watcher.Observe(ctx)

		var log rpcLog
		la, err := sessions(countingClient(t, db, &log)).Campaign(ctx, "a")
		require.NoError(t, err)
		require.NotEmpty(t, la.Lease().session, "the term is held through the session")
		calls := idleSessionCommits(t, &log, 1200*time.Millisecond)
		assert.InDelta(t, 4, len(calls), 1.5, "one renewal every third of the lease: %v", calls)
		t.Logf("a leader held 1.2 s through its session: %d RPCs %v", len(calls), calls)
		info, err := watcher.Leader(ctx)
		require.NoError(t, err)
		assert.Equal(t, LeaderInfo{Value: "a", Token: la.Lease().Token(), Since: la.Lease().AcquiredAt().UTC()}, info)

		check := newClient(t, db)
		won := make(chan *Leadership, 1)
		go func() {
			lb, err := newTestElection(t, db, "term", WithLease(lease)).Campaign(ctx, "b")
			assert.NoError(t, err)
			won <- lb
		}()
		waitFor(t, time.Minute, "b to queue", func() bool { return len(queuedIDs(t, check, "term")) == 1 })
		_, err = check.Apply(ctx, []*spanner.Mutation{spanner.Delete(defaultTable+"Sessions", spanner.Key{la.Lease().session})})
		require.NoError(t, err)
		requireLostWithSession(t, []*Lease{la.Lease()}, 2*lease)
		select {
		case <-la.Context().Done():
		case <-time.After(lease):
			t.Fatal("the Leadership's Context is not done once its lease is lost")
		}
		assert.ErrorIs(t, context.Cause(la.Context()), ErrLeaseLost)
		var lb *Leadership
		select {
		case lb = <-won:
		case <-time.After(10 * lease):
			t.Fatal("the waiting candidate did not lead after the session was lost")
		}
		require.NotNil(t, lb)
		assert.Equal(t, la.Lease().Token()+1, lb.Lease().Token(), "the next term has the next token")
		require.NoError(t, lb.Resign(ctx))

		dying := newClient(t, db)
		ld, err := sessions(dying).Campaign(ctx, "d")
		require.NoError(t, err)
		require.NotEmpty(t, ld.Lease().session)
		info, err = watcher.Leader(ctx)
		require.NoError(t, err)
		assert.Equal(t, "d", info.Value)
		died := time.Now()
		dying.Close() // the leader's process dies: neither the session nor the term is renewed again
		t.Logf("the dying client's Close took %v", time.Since(died).Round(time.Millisecond))
		waitFor(t, 4*lease, "Leader to see the term end with its session", func() bool {
			_, err := watcher.Leader(ctx)
			return err != nil
		})
		t.Logf("Leader reported no leader %v after the leader's client began to close (lease %v)", time.Since(died).Round(time.Millisecond), lease)
		_, err = watcher.Leader(ctx)
		assert.ErrorIs(t, err, ErrNoLeader)
		select { // cut off from Spanner, the leader learns of the loss by its own clock
		case <-ld.Context().Done():
			assert.ErrorIs(t, context.Cause(ld.Context()), ErrLeaseLost)
		case <-time.After(2 * lease):
			t.Fatal("the dead leader's Leadership did not end")
		}

		var got []string
		for _, want := range []LeaderInfo{
			{Value: "a", Token: la.Lease().Token(), Since: la.Lease().AcquiredAt().UTC()},
			{Value: "b", Token: lb.Lease().Token(), Since: lb.Lease().AcquiredAt().UTC()},
			{Value: "d", Token: ld.Lease().Token(), Since: ld.Lease().AcquiredAt().UTC()},
		} {
			select {
			case info := <-terms:
				assert.Equal(t, want, info)
				got = append(got, info.Value)
			case <-time.After(time.Minute):
				t.Fatalf("Observe reported %v, then not %q", got, want.Value)
			}
		}
	})
}
