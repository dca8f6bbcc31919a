package spanmutex

import (
	"context"
	"testing"
	"time"

	"cloud.google.com/go/spanner/apiv1/spannerpb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/spanmutex/spanmutex/internal/faultinject"
)

// loseJoinAnswer returns an injector that lets the first join's commit
// through and answers it UNAVAILABLE: the client sends it again, as it does
// with a single-use commit whose answer was lost, and the entry is
// inserted twice, under two commit timestamps (joinWrite). The second send
// is held until the injector is released.
func loseJoinAnswer(t *testing.T) *faultinject.Injector {
	t.Helper()
	join := func(_ string, req any) bool {
		cr, ok := req.(*spannerpb.CommitRequest)
		return ok && cr.GetRequestOptions().GetTransactionTag() == tagJoin
	}
	in, err := faultinject.New(3,
		faultinject.Rule{Name: "join answer lost", Methods: []string{"Commit"}, Match: join,
			Action: faultinject.DropResponse, Codes: []codes.Code{codes.Unavailable}, Probability: 1, Limit: 1},
		faultinject.Rule{Name: "join sent again, held", Methods: []string{"Commit"}, Match: join,
			Action: faultinject.Hold, Probability: 1, Skip: 1, Limit: 1})
	require.NoError(t, err)
	return in
}

// A join is one single-use commit, which the client sends again when its
// answer is lost: the waiter's id is then queued twice, once under a key it
// never learns, and another waiter's entry may come between the two.
// Neither entry may outlive the waiter's call: handed the lock through the
// older entry, its Unlock deletes the one it knows, although it is behind
// the other waiter's; giving up, it deletes both by its id. Either way the
// queue ends empty and the lock free.
func TestJoinSentTwice(t *testing.T) {
	needEmulator(t)
	for _, giveUp := range []bool{false, true} {
		t.Run(map[bool]string{false: "handed the lock", true: "gives up"}[giveUp], func(t *testing.T) {
			db := freshDatabase(t)
			name := "join-twice"
			in := loseJoinAnswer(t)
			c := faultyClients(t, db, in, 1)[0]
			check := newClient(t, db)
			scope := NewScope(WithoutWakeUps())
			h, err := NewLock(c, name, WithOwner("h"), WithScope(scope))
			require.NoError(t, err)
			w, err := NewLock(c, name, WithOwner("w"), WithScope(scope))
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()

			lh, err := h.Lock(ctx)
			require.NoError(t, err)
			wctx, stop := context.WithCancel(ctx)
			defer stop()
			got := make(chan *Lease, 1)
			errs := make(chan error, 1)
			go func() {
				lw, err := w.Lock(wctx) // behind a holder of its Scope: a blind join
				got <- lw
				errs <- err
			}()
			waitFor(t, 20*time.Second, "the waiter's entry inserted, its join sent again", func() bool {
				return len(queued(t, check, name)) == 1 && in.Stats().Injected(faultinject.Hold) == 1
			})
			x, err := NewLock(newClient(t, db), name, WithOwner("x"))
			require.NoError(t, err)
			xgot := make(chan *Lease, 1)
			go func() {
				lx, err := x.Lock(ctx)
				assert.NoError(t, err)
				xgot <- lx
			}()
			waitFor(t, 20*time.Second, "the other waiter's entry", func() bool { return len(queued(t, check, name)) == 2 })
			in.Release()
			waitFor(t, 20*time.Second, "the waiter's entry inserted again", func() bool { return len(queued(t, check, name)) == 3 })
			assert.Equal(t, []string{"w", "x", "w"}, queued(t, check, name))
			ids := queuedIDs(t, check, name)
			assert.Equal(t, ids[0], ids[2], "both entries carry the waiter's id")

			if giveUp {
				stop()
				assert.Nil(t, <-got)
				assert.ErrorIs(t, <-errs, ErrNotObtained)
				assert.Equal(t, []string{"x"}, queued(t, check, name), "leaving deleted both entries, by the waiter's id")
				require.NoError(t, h.Unlock(ctx))
			} else {
				require.NoError(t, h.Unlock(ctx))
				lw := <-got
				require.NoError(t, <-errs)
				require.NotNil(t, lw)
				assert.Equal(t, lh.Token()+1, lw.Token())
				assert.Equal(t, []string{"x", "w"}, queued(t, check, name), "handed through the older entry: the one it knows stays")
				require.NoError(t, w.Unlock(ctx))
				assert.Empty(t, queued(t, check, name), "the Unlock handed the lock to x and deleted the entry the waiter knew")
			}
			lx := <-xgot
			require.NotNil(t, lx)
			require.NoError(t, x.Unlock(ctx))
			st := inspectOne(t, check, name)
			assert.Equal(t, StateNeeded, st.State, "nobody holds the lock: the row shows owner %q, token %d", st.Owner, st.Token)
			y, err := NewLock(newClient(t, db), name, WithOwner("y"))
			require.NoError(t, err)
			_, err = y.TryLock(ctx)
			require.NoError(t, err, "the lock is free for the next contender")
			require.NoError(t, y.Unlock(ctx))
		})
	}
}
