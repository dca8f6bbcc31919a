package queue

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spanmutex/spanmutex"
)

// backlogUpdates is the idle-cost test's backlog: updates of one resource
// behind its create, over three pages of the pending index.
const backlogUpdates = 1600

// TestIdleWorkerReadsAboutOnePagePerPollBehindABacklogOthersHold: while
// worker A holds a resource and handles its create (in progress), with
// 1,600 updates pending behind it (four pages of the index), idle worker
// B makes about one page read per poll between its sweeps, not one per 512
// pending requests (issue 41, item 10); and once A goes silent, B still
// recovers A's claim within the Worker's stated bound.
func TestIdleWorkerReadsAboutOnePagePerPollBehindABacklogOthersHold(t *testing.T) {
	if testing.Short() {
		t.Skip("a backlog of 1,600 requests and a lease's wait: skipped with -short")
	}
	db := freshDatabase(t)
	lockOpts := WithLockOptions(spanmutex.WithLease(testLease))
	ca, silenced := silenceableClient(t, db)
	qa, err := New(ca, lockOpts)
	require.NoError(t, err)
	qb, err := New(newClient(t, db), lockOpts)
	require.NoError(t, err)
	enqueueBacklog(t, qb, "sheet", backlogUpdates)

	// A blocks in the create's job, deaf to its context, until the test
	// ends. (Not in a job of 1,000 updates: the emulator runs one
	// read-write transaction at a time, and a claim of 1,000 takes it
	// longer than the lease, stalling the holder's renewals.)
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	a, err := qa.NewWorker(func(ctx context.Context, job *Job) error {
		if job.Kind == KindCreate {
			once.Do(func() { close(entered) })
			<-release
		}
		return nil
	}, WithWorkerID("A"), WithLogger(testLoggerAt(t, slog.LevelWarn)))
	require.NoError(t, err)
	stopA := runWorker(t, a)
	t.Cleanup(func() { closeOnce(release) })
	waitChan(t, entered, 60*time.Second, "A's create job")

	const maxPoll = 200 * time.Millisecond
	b, err := qb.NewWorker(func(context.Context, *Job) error { return nil },
		WithWorkerID("B"), WithPollInterval(20*time.Millisecond, maxPoll), WithLogger(testLoggerAt(t, slog.LevelWarn)))
	require.NoError(t, err)
	runWorker(t, b)
	waitFor(t, 30*time.Second, "B to pass over the held resource", func() bool { return b.Stats().Skipped > 0 })
	// B's poll interval doubles from 20ms to maxPoll (200ms) in four idle
	// passes: wait for six.
	idleFrom := b.Stats().Scans
	waitFor(t, 30*time.Second, "B's poll interval to reach maxPoll", func() bool { return b.Stats().Scans >= idleFrom+6 })

	before, sweepsBefore := b.Stats(), b.stats.sweeps.Load()
	<-time.After(3 * testLease) // the window being measured, not a synchronisation
	after, sweeps := b.Stats(), b.stats.sweeps.Load()-sweepsBefore
	passes, reads := after.Scans-before.Scans, after.Reads-before.Reads
	require.Zero(t, after.Jobs, "B found nothing to do")
	perSweep := int64((backlogUpdates + 1 + scanPageSize - 1) / scanPageSize)
	between := float64(reads-sweeps*perSweep) / float64(max(passes-sweeps, 1))
	t.Logf("idle B over %v: %d passes (%d sweeps), %d page reads: %.2f reads per poll, %.2f per pass between sweeps (a sweep reads %d)",
		3*testLease, passes, sweeps, reads, float64(reads)/float64(passes), between, perSweep)
	require.Greater(t, passes, int64(10), "B polled")
	require.LessOrEqual(t, sweeps, int64(3*testLease/b.sweepEvery())+1, "B sweeps once a sweep interval, a quarter lease, not every poll")
	// Not every pass is a sweep (that was the cost before). How many
	// passes fit between two sweeps depends on the machine's speed: beside
	// the root package's simulations, B made 21 passes, 10 of them sweeps.
	require.Less(t, sweeps, passes-passes/4, "not every pass is a sweep")
	require.LessOrEqual(t, between, 1.0, "between sweeps a pass reads one page")

	// A goes silent: B recovers its claim within the lease, the takeover's
	// jitter, one sweep interval and two poll intervals (Worker's godoc),
	// plus a second for the reads and the claim themselves.
	silenced.Store(true)
	silencedAt := time.Now()
	bound := testLease + testLease/5 + b.sweepEvery() + 2*maxPoll
	waitFor(t, 60*time.Second, "B to recover A's claim", func() bool { return b.Stats().Recovered > 0 })
	took := time.Since(silencedAt)
	t.Logf("B recovered A's claim %v after A went silent (stated bound %v, sweep interval %v)", took.Round(time.Millisecond), bound, b.sweepEvery())
	require.LessOrEqual(t, took, bound+time.Second)

	silenced.Store(false)
	closeOnce(release)
	stopA()
}

// enqueueBacklog enqueues resource's create and n updates of it, 400 a
// commit.
func enqueueBacklog(t *testing.T, q *Queue, resource string, n int) {
	t.Helper()
	enqueue(t, q, Request{Kind: KindCreate, Resource: resource})
	for n > 0 {
		batch := make([]Request, min(n, 400))
		for i := range batch {
			batch[i] = Request{Kind: KindUpdate, Resource: resource}
		}
		enqueue(t, q, batch...)
		n -= len(batch)
	}
}

// closeOnce closes c unless it is closed.
func closeOnce(c chan struct{}) {
	select {
	case <-c:
	default:
		close(c)
	}
}
