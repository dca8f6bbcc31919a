//go:build go1.25

package spanmutex

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/spanmutex/spanmutex/internal/faultinject"
)

// Issue 41, fault 3, as its author saw it: a waiter of a semaphore whose
// client has every Commit refused once it waits (a read-only role:
// PermissionDenied; or Spanner unavailable). Its entry's renewal fails:
// a permanent refusal ends Acquire at once with that error, a transient
// one after WithMaxFailures (3) failures in a row, each backed off, with
// an error matching ErrOutage. Before, the waiter neither counted nor
// backed off: some 20 failed Commits a second until its ctx ended.
func TestSemaphoreWaiterFailedRenewalsAreBounded(t *testing.T) {
	needEmulator(t)
	for _, code := range []codes.Code{codes.PermissionDenied, codes.Unavailable} {
		t.Run(code.String(), func(t *testing.T) {
			t.Parallel()
			db := freshDatabase(t)
			in, err := faultinject.New(41, faultinject.Rule{Name: "commit refused", Methods: []string{"Commit"},
				Action: faultinject.Fail, Probability: 1, Codes: []codes.Code{code}})
			require.NoError(t, err)
			wc := faultyClients(t, db, in, 1)[0]
			in.SetEnabled(false)
			c := newClient(t, db)
			const name = "renewals"
			ctx := context.Background()
			h, err := NewSemaphore(c, name, 1, WithOwner("h"), WithLease(time.Second))
			require.NoError(t, err)
			_, err = h.Acquire(ctx, 1)
			require.NoError(t, err)
			defer releaseIfHeld(h)
			w, err := NewSemaphore(wc, name, 1, WithOwner("w"), WithLease(time.Second), WithMaxFailures(3),
				WithFinishTimeout(2*time.Second), WithScope(NewScope(WithoutWakeUps())))
			require.NoError(t, err)
			// No deadline: the leave that follows keeps trying for the
			// finish timeout, not for the rest of a deadline.
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			werr := acquireErr(wctx, w, 1)
			waitQueued(t, c, name, 2)
			in.SetEnabled(true)
			began := time.Now()
			defer func() {
				t.Logf("%d Commits refused in %v", in.Stats().Injected(faultinject.Fail), time.Since(began).Round(time.Millisecond))
			}()
			err = awaitErr(t, werr, cancel, 25*time.Second, "the waiter whose commits are refused")
			took, refused := time.Since(began), in.Stats().Injected(faultinject.Fail)
			t.Logf("the waiter ended after %v, %d Commits refused: %v", took.Round(time.Millisecond), refused, err)
			if code == codes.PermissionDenied {
				assert.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)
				// The renewal, and the leave's settle, refused as well.
				assert.LessOrEqual(t, refused, int64(2), "Commits refused")
			} else {
				require.ErrorIs(t, err, ErrOutage)
				// Three renewals, each perhaps tried again by the client,
				// and the leave's settles for the finish timeout, backed off.
				assert.LessOrEqual(t, float64(refused)/took.Seconds(), 5.0, "Commits refused a second")
			}
			assert.Len(t, queuedIDs(t, c, name), 2, "w's entry could not leave: it expires")
		})
	}
}
