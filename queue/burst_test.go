package queue

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/stretchr/testify/require"

	"github.com/spanmutex/spanmutex/internal/testutil"
)

// burstChecker is the burst test's handler: it checks the invariants as
// jobs run, and counts what it saw.
type burstChecker struct {
	mu         sync.Mutex
	inflight   map[string]string // resource → worker handling it now
	created    map[string]bool   // resources whose create handler returned
	lastToken  map[string]int64
	handled    map[string]int // request id → handler calls
	violations []string
}

func newBurstChecker() *burstChecker {
	return &burstChecker{inflight: map[string]string{}, created: map[string]bool{},
		lastToken: map[string]int64{}, handled: map[string]int{}}
}

func (c *burstChecker) violate(format string, args ...any) {
	if len(c.violations) < 20 {
		c.violations = append(c.violations, fmt.Sprintf(format, args...))
	}
}

func (c *burstChecker) handler(worker string) Handler {
	return func(ctx context.Context, job *Job) error {
		c.mu.Lock()
		if other, ok := c.inflight[job.Resource]; ok {
			c.violate("%s: handled by %s and %s at once", job.Resource, other, worker)
		}
		c.inflight[job.Resource] = worker
		if job.Token() < c.lastToken[job.Resource] {
			c.violate("%s: token went back from %d to %d", job.Resource, c.lastToken[job.Resource], job.Token())
		}
		c.lastToken[job.Resource] = job.Token()
		if job.Kind == KindUpdate && !c.created[job.Resource] {
			c.violate("%s: update handled before its create", job.Resource)
		}
		for _, r := range job.Requests {
			c.handled[r.ID]++
			if r.Kind != job.Kind || r.Resource != job.Resource || r.Status != StatusInProgress {
				c.violate("%s: request %s (%s %s %s) in a %s job", job.Resource, r.ID, r.Kind, r.Resource, r.Status, job.Kind)
			}
		}
		c.mu.Unlock()

		c.mu.Lock()
		delete(c.inflight, job.Resource)
		if job.Kind == KindCreate {
			c.created[job.Resource] = true
		}
		c.mu.Unlock()
		return nil
	}
}

// burstSize reads the burst's size from QUEUE_BURST_RESOURCES (default
// 1000 resources), QUEUE_BURST_UPDATES (updates per resource, default 9:
// with the creates, 10,000 requests) and QUEUE_BURST_WORKERS (default 8).
//
// Why 1000 resources of 10 requests, not 2000 of 5: each resource leaves a
// row in the lock table, and the emulator answers every SQL query by
// scanning the table it reads (measured: a lock's TryLock+Unlock took 10 ms
// with no other rows, 19 ms with 1,000 and 49 ms with 4,000), so the burst's
// time grows with the square of the resources there. Production Spanner
// looks the row up by key. 2000 resources took 5m25s under -race.
func burstSize(t *testing.T) (resources, updatesPer, workers int) {
	get := func(env string, def int) int {
		s := os.Getenv(env)
		if s == "" {
			return def
		}
		n, err := strconv.Atoi(s)
		require.NoError(t, err)
		require.Positive(t, n, env)
		return n
	}
	return get("QUEUE_BURST_RESOURCES", testutil.Scale(100, 1000)), get("QUEUE_BURST_UPDATES", 9), get("QUEUE_BURST_WORKERS", 8)
}

func TestWorkerBurst(t *testing.T) {
	t.Parallel() // waits out leases beside the other waiting tests, on its own database
	if testing.Short() {
		t.Skip("burst of 10,000 requests: skipped with -short")
	}
	const (
		clients = 4
		batch   = 50 // resources per Enqueue call
	)
	resources, updatesPer, workers := burstSize(t)
	total := resources * (1 + updatesPer)
	db := freshDatabase(t)
	var queues []*Queue
	for range clients {
		q, err := New(newClient(t, db))
		require.NoError(t, err)
		queues = append(queues, q)
	}
	checker := newBurstChecker()
	var ws []*Worker
	for i := range workers {
		w, err := queues[i%clients].NewWorker(checker.handler(fmt.Sprintf("w%d", i)),
			WithWorkerID(fmt.Sprintf("w%d", i)), WithPollInterval(20*time.Millisecond, 200*time.Millisecond),
			WithLogger(testLoggerAt(t, slog.LevelWarn)))
		require.NoError(t, err)
		ws = append(ws, w)
	}

	// The front end: each batch of resources gets its creates in one
	// commit, then updatesPer commits of one update each, through the
	// queues in turn. All is enqueued before the workers start: the
	// emulator runs one read-write transaction at a time and aborts the
	// others, so an enqueuer competing with 8 workers starves.
	ctx := context.Background()
	enqueueStart := time.Now()
	for b := 0; b < resources; b += batch {
		for round := 0; round <= updatesPer; round++ {
			var reqs []Request
			for r := b; r < min(b+batch, resources); r++ {
				kind := KindCreate
				if round > 0 {
					kind = KindUpdate
				}
				reqs = append(reqs, Request{Kind: kind, Resource: fmt.Sprintf("sheet-%05d", r)})
			}
			_, err := queues[(b/batch+round)%clients].Enqueue(ctx, reqs...)
			require.NoError(t, err)
		}
	}
	enqueueTook := time.Since(enqueueStart)

	start := time.Now()
	for _, w := range ws {
		runWorker(t, w)
	}
	sum := func() WorkerStats { return sumStats(ws) }
	// On the emulator the burst takes minutes (about 10 on a loaded 2-core
	// machine): it runs one read-write transaction at a time and aborts the
	// others, and it answers the locks' queries by scanning their tables.
	// Run it with -timeout 20m; it fails, saying so, if the test's
	// deadline comes first.
	budget := 15 * time.Minute
	if d, ok := t.Deadline(); ok && time.Until(d)-30*time.Second < budget {
		budget = time.Until(d) - 30*time.Second
	}
	deadline := time.Now().Add(budget)
	lastLog := time.Now()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for sum().RequestsCompleted < int64(total) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d requests complete after %v (the test's deadline is near: run it with -timeout 20m)",
				sum().RequestsCompleted, total, budget.Round(time.Second))
		}
		if time.Since(lastLog) > 30*time.Second {
			lastLog = time.Now()
			t.Logf("  after %v: %d of %d complete", time.Since(start).Round(time.Second), sum().RequestsCompleted, total)
		}
		<-tick.C
	}
	took := time.Since(start)
	st := sum()
	t.Logf("burst: %d requests (%d resources) over %d workers: enqueued in %v, then all complete in %v: %.0f req/s; "+
		"%d jobs, %d grouped, %d skipped, %d tenures (%d idle), %d scans; per request: %.2f queue transactions, %.2f reads",
		total, resources, workers, enqueueTook.Round(time.Millisecond), took.Round(time.Millisecond), float64(total)/took.Seconds(),
		st.Jobs, st.Grouped, st.Skipped, st.Tenures, st.IdleTenures, st.Scans,
		float64(st.Transactions)/float64(total), float64(st.Reads)/float64(total))
	for _, w := range ws {
		x := w.Stats()
		t.Logf("  %s: %d jobs, %d completed, %d skipped, %d scans", w.ID(), x.Jobs, x.RequestsCompleted, x.Skipped, x.Scans)
	}

	// The invariants, as the handler saw them. A request may be handled
	// again only after its claim was recovered: its worker lost the lease,
	// or could not record the outcome, before the next holder claimed it
	// (on the emulator, aborts can starve a transaction for seconds).
	checker.mu.Lock()
	require.Empty(t, checker.violations)
	require.Len(t, checker.handled, total, "every request reached a handler")
	again := 0
	for _, n := range checker.handled {
		again += n - 1
	}
	checker.mu.Unlock()
	t.Logf("burst: %d handler runs beyond the first on a request, %d requests recovered, %d leases lost", again, st.Recovered, st.LeasesLost)
	require.LessOrEqual(t, int64(again), st.Recovered, "a request was handled again without its claim being recovered")
	require.Equal(t, int64(total), st.RequestsCompleted, "each request recorded complete exactly once")
	require.Zero(t, st.RequestsFailed)

	// And as Spanner recorded them: all complete, none pending, every
	// update claimed after its create finished (by commit timestamps).
	type row struct {
		kind                  Kind
		status                Status
		claimedAt, finishedAt time.Time
		attempts              int64
	}
	rows := map[string][]row{}
	q := queues[0]
	iter := q.client.Single().Query(context.Background(), spanner.Statement{SQL: "SELECT Resource, Kind, Status, ClaimedAt, FinishedAt, Attempts, PendingSince IS NULL FROM " + q.Table()})
	n := 0
	require.NoError(t, iter.Do(func(r *spanner.Row) error {
		var res, kind, status string
		var x row
		var notPending bool
		if err := r.Columns(&res, &kind, &status, &x.claimedAt, &x.finishedAt, &x.attempts, &notPending); err != nil {
			return err
		}
		x.kind, x.status = Kind(kind), Status(status)
		if !notPending {
			return fmt.Errorf("a finished request of %s is still in the pending index", res)
		}
		rows[res] = append(rows[res], x)
		n++
		return nil
	}))
	require.Equal(t, total, n)
	for res, rs := range rows {
		var create row
		for _, x := range rs {
			require.Equal(t, StatusComplete, x.status, res)
			if x.attempts != 1 {
				require.Positive(t, st.Recovered, "%s: claimed %d times without a recovery", res, x.attempts)
			}
			if x.kind == KindCreate {
				create = x
			}
		}
		for _, x := range rs {
			if x.kind == KindUpdate {
				require.False(t, x.claimedAt.Before(create.finishedAt), "%s: an update was claimed before its create finished (it may be claimed in the transaction that completes the create)", res)
			}
		}
	}
}

// sumStats adds up the stats of ws.
func sumStats(ws []*Worker) WorkerStats {
	var s WorkerStats
	for _, w := range ws {
		x := w.Stats()
		s.Jobs += x.Jobs
		s.RequestsCompleted += x.RequestsCompleted
		s.RequestsFailed += x.RequestsFailed
		s.RequestsReleased += x.RequestsReleased
		s.Grouped += x.Grouped
		s.Skipped += x.Skipped
		s.Tenures += x.Tenures
		s.IdleTenures += x.IdleTenures
		s.Scans += x.Scans
		s.Recovered += x.Recovered
		s.LeasesLost += x.LeasesLost
		s.Transactions += x.Transactions
		s.Reads += x.Reads
	}
	return s
}
