package queue

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/spanmutex/spanmutex/internal/faultinject"
)

// A step records the create's outcome and claims its updates in one commit.
// When that commit lands but its answer is lost, and the read that should
// settle it fails too, the step is retried: the retry must recognise its own
// first try (same claim id) and neither count a second claim nor a recovery.
func TestWorkerRetriedStepRecognisesItsOwnLandedClaim(t *testing.T) {
	db := freshDatabase(t)
	var commitDropped atomic.Bool
	in, err := faultinject.New(1,
		faultinject.Rule{Name: "lose the step's commit answer", Methods: []string{"Commit"}, Action: faultinject.DropResponse,
			Codes: []codes.Code{codes.DeadlineExceeded}, Probability: 1, Limit: 1,
			Match: func(string, any) bool { commitDropped.Store(true); return true }},
		faultinject.Rule{Name: "fail the read that settles it", Methods: []string{"StreamingRead"}, Action: faultinject.Fail,
			Codes: []codes.Code{codes.Internal}, Probability: 1, Limit: 1,
			Match: func(string, any) bool { return commitDropped.Load() }},
	)
	require.NoError(t, err)
	in.SetEnabled(false)
	c, err := emu.NewClient(context.Background(), db, in.ClientOptions()...)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	q, err := New(c)
	require.NoError(t, err)

	var mu sync.Mutex
	var jobs []Job
	w, err := q.NewWorker(func(ctx context.Context, job *Job) error {
		mu.Lock()
		jobs = append(jobs, *job)
		mu.Unlock()
		if job.Kind == KindCreate {
			in.SetEnabled(true) // the next commit is the step after this job
		}
		return nil
	}, WithLogger(testLogger(t)))
	require.NoError(t, err)
	ids := enqueue(t, q, Request{Kind: KindCreate, Resource: "sheet"})
	ids = append(ids, enqueue(t, q, Request{Kind: KindUpdate, Resource: "sheet"}, Request{Kind: KindUpdate, Resource: "sheet"})...)
	// The test reads through a client of its own: a read of its on the
	// faulty client could take the fault meant for the worker's.
	reader, err := emu.NewClient(context.Background(), db)
	require.NoError(t, err)
	t.Cleanup(reader.Close)
	rq, err := New(reader)
	require.NoError(t, err)
	runWorker(t, w)
	got := waitFinished(t, rq, 30*time.Second, ids...)

	st := in.Stats()
	require.Len(t, st.Rules, 2)
	require.Equal(t, int64(1), st.Rules[0].Injected, "the step's commit answer was lost")
	require.Equal(t, int64(1), st.Rules[1].Injected, "the read that settles it failed")
	for _, r := range got {
		require.Equal(t, StatusComplete, r.Status)
		require.Equal(t, int64(1), r.Attempts, "request %s: claimed once, not again by the retry", r.ID)
	}
	require.Zero(t, w.Stats().Recovered, "a retry of our own step is no recovery")
	require.Equal(t, int64(3), w.Stats().RequestsCompleted)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, jobs, 2, "the create, then both updates in one job")
	require.Len(t, jobs[1].Requests, 2)
}
