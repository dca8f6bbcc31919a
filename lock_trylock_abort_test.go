package spanmutex

import (
	"context"
	"testing"

	"cloud.google.com/go/spanner/apiv1/spannerpb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/spanmutex/spanmutex/internal/faultinject"
)

// abortAcquisitions returns an injector that answers the first n commits
// of Lock acquisitions ABORTED before they reach Spanner: nothing written,
// as when another transaction overlapped them.
func abortAcquisitions(t *testing.T, n int) *faultinject.Injector {
	t.Helper()
	in, err := faultinject.New(1, faultinject.Rule{Name: "acquisition aborted", Methods: []string{"Commit"},
		Match: func(_ string, req any) bool {
			cr, ok := req.(*spannerpb.CommitRequest)
			return ok && cr.GetRequestOptions().GetTransactionTag() == tagAcquire
		},
		Action: faultinject.Fail, Codes: []codes.Code{codes.Aborted}, Probability: 1, Limit: n})
	require.NoError(t, err)
	return in
}

// A TryLock whose attempt Spanner aborts attempts again, up to 3 times: an
// abort says another transaction overlapped it, not that the lock is held.
// After a fourth abort it reports the lock held by a concurrent contender.
func TestTryLockAttemptsAgainAfterAnAbort(t *testing.T) {
	needEmulator(t)
	eachDialect(t, func(t *testing.T, db string) {
		ctx := context.Background()
		for _, c := range []struct {
			aborts int
			taken  bool
		}{{aborts: 3, taken: true}, {aborts: 4, taken: false}} {
			in := abortAcquisitions(t, c.aborts)
			client := faultyClients(t, db, in, 1)[0]
			l, err := NewLock(client, "aborted", WithScope(NewScope(WithoutWakeUps())))
			require.NoError(t, err)
			lease, err := l.TryLock(ctx)
			assert.Equal(t, int64(c.aborts), in.Stats().Injected(faultinject.Fail), "every abort was injected")
			if c.taken {
				require.NoError(t, err, "taken on the attempt after %d aborts", c.aborts)
				require.NoError(t, l.Unlock(ctx))
				continue
			}
			var held *HeldError
			require.ErrorAs(t, err, &held, "after %d aborts", c.aborts)
			assert.Equal(t, "(a concurrent contender)", held.Holder)
			assert.Nil(t, lease)
		}
	})
}
