package queue

import (
	"context"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/stretchr/testify/require"

	"github.com/spanmutex/spanmutex"
	"github.com/spanmutex/spanmutex/internal/cutoff"
)

// silenceableClient opens a client of db whose RPCs can be cut off, as if
// its process were paused or its network dropped: while silenced
// (Store(true)), every RPC fails with UNAVAILABLE before it reaches Spanner.
func silenceableClient(t *testing.T, db string) (*spanner.Client, *cutoff.Switch) {
	t.Helper()
	cut := &cutoff.Switch{Reason: "test: silenced"}
	c, err := emu.NewClient(context.Background(), db, cut.ClientOptions()...)
	require.NoError(t, err)
	t.Cleanup(func() { cut.Store(false); c.Close() })
	return c, cut
}

func TestWorkerRecoversTheClaimOfASilencedWorker(t *testing.T) {
	db := freshDatabase(t)
	const lease = time.Second
	lockOpts := WithLockOptions(spanmutex.WithLease(lease))
	ca, silenced := silenceableClient(t, db)
	qa, err := New(ca, lockOpts)
	require.NoError(t, err)
	qb, err := New(newClient(t, db), lockOpts)
	require.NoError(t, err)
	ctx := context.Background()

	ids := enqueue(t, qb, Request{Kind: KindCreate, Resource: "sheet"}, Request{Kind: KindUpdate, Resource: "sheet"})

	// A claims the create, then goes silent while its handler runs on.
	g := newGate("sheet")
	var aJob *Job
	var aCause error
	var mu sync.Mutex
	a, err := qa.NewWorker(func(hctx context.Context, job *Job) error {
		mu.Lock()
		aJob = job
		mu.Unlock()
		err := g.pass(hctx, job.Resource, false) // deaf to hctx: it keeps running
		mu.Lock()
		aCause = context.Cause(hctx)
		mu.Unlock()
		return err
	}, WithWorkerID("A"), WithLogger(testLogger(t)))
	require.NoError(t, err)
	stopA := runWorker(t, a)
	waitChan(t, g.entered["sheet"], 30*time.Second, "A's handler")
	mu.Lock()
	claimA := aJob.Requests[0]
	tokenA := aJob.Token()
	leaseA := aJob.Lease
	mu.Unlock()
	require.Equal(t, ids[0], claimA.ID)
	silenced.Store(true)
	// A's renewals fail; within the lease its lease is declared lost.
	waitChan(t, leaseA.Done(), 10*lease, "A's lease to be lost")

	var mb sync.Mutex
	var bJobs []*Job
	b, err := qb.NewWorker(func(hctx context.Context, job *Job) error {
		mb.Lock()
		bJobs = append(bJobs, job)
		mb.Unlock()
		return nil
	}, WithWorkerID("B"), WithPollInterval(20*time.Millisecond, 200*time.Millisecond), WithLogger(testLogger(t)))
	require.NoError(t, err)
	runWorker(t, b)
	done := waitFinished(t, qb, 30*time.Second, ids...)
	for _, r := range done {
		require.Equal(t, StatusComplete, r.Status)
		require.Greater(t, r.Token, tokenA, "B took over with a higher token")
		require.NotEqual(t, claimA.ProcessID, r.ProcessID)
	}
	require.Equal(t, int64(2), done[0].Attempts, "the create was claimed twice: by A, then by B")
	require.Equal(t, int64(1), b.Stats().Recovered)
	mb.Lock()
	require.Len(t, bJobs, 2, "B handled the create, then the update")
	require.True(t, bJobs[0].Lease.TookOver())
	mb.Unlock()

	// A comes back and finishes its handler: its fenced finish is rejected.
	silenced.Store(false)
	close(g.released["sheet"])
	waitFor(t, 30*time.Second, "A's stale finish to be rejected", func() bool { return a.Stats().LeasesLost >= 1 })
	stopA()
	mu.Lock()
	require.ErrorIs(t, aCause, spanmutex.ErrLeaseLost, "A's handler context was cancelled by the lost lease")
	mu.Unlock()
	require.Zero(t, a.Stats().RequestsCompleted)
	after, err := qb.Get(ctx, ids[0])
	require.NoError(t, err)
	require.Equal(t, done[0], after, "A's stale finish wrote nothing")
	require.Equal(t, int64(2), b.Stats().RequestsCompleted, "each request finished exactly once")
}
