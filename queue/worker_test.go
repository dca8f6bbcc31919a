package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/spanmutex/spanmutex"
	"github.com/spanmutex/spanmutex/ddl"
)

// testLease is the lock lease of the worker tests: short, so that a
// dead worker's claim is taken over within seconds.
const testLease = 2 * time.Second

// newTestQueue opens a queue on a fresh database with a short lease.
func newTestQueue(t *testing.T) (*Queue, *spanner.Client) {
	t.Helper()
	return newTestQueueIn(t, ddl.GoogleSQL)
}

// newTestQueueIn is newTestQueue on a database of dialect d.
func newTestQueueIn(t *testing.T, d ddl.Dialect) (*Queue, *spanner.Client) {
	t.Helper()
	c := newClient(t, freshDatabaseIn(t, d))
	q, err := New(c, WithLockOptions(spanmutex.WithLease(testLease)))
	require.NoError(t, err)
	return q, c
}

// runWorker runs w until the returned stop is called (or the test ends),
// and fails the test unless Run then returns nil within a deadline.
func runWorker(t *testing.T, w *Worker) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-errc:
				if err != nil {
					t.Errorf("worker %s: Run returned %v", w.ID(), err)
				}
			case <-time.After(time.Minute):
				t.Errorf("worker %s: Run did not return within a minute of its context's end", w.ID())
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// jobRecord is one handler call as the test saw it.
type jobRecord struct {
	worker   string
	resource string
	kind     Kind
	ids      []string
	token    int64
}

// journal records handler calls in the order they started.
type journal struct {
	mu   sync.Mutex
	jobs []jobRecord
}

func (j *journal) add(worker string, job *Job) {
	ids := make([]string, len(job.Requests))
	for i, r := range job.Requests {
		ids[i] = r.ID
	}
	j.mu.Lock()
	j.jobs = append(j.jobs, jobRecord{worker: worker, resource: job.Resource, kind: job.Kind, ids: ids, token: job.Token()})
	j.mu.Unlock()
}

func (j *journal) snapshot() []jobRecord {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]jobRecord(nil), j.jobs...)
}

// waitFinished waits until every request of ids is finished, and returns them.
func waitFinished(t *testing.T, q *Queue, timeout time.Duration, ids ...string) []Request {
	t.Helper()
	var got []Request
	waitFor(t, timeout, fmt.Sprintf("%d requests to finish", len(ids)), func() bool {
		got = got[:0]
		for _, id := range ids {
			r, err := q.Get(context.Background(), id)
			require.NoError(t, err)
			if !r.Status.Finished() {
				return false
			}
			got = append(got, r)
		}
		return true
	})
	return got
}

func enqueue(t *testing.T, q *Queue, reqs ...Request) []string {
	t.Helper()
	ids, err := q.Enqueue(context.Background(), reqs...)
	require.NoError(t, err)
	return ids
}

func TestNewWorkerRejectsBadOptions(t *testing.T) {
	c := newClient(t, freshDatabase(t))
	q, err := New(c)
	require.NoError(t, err)
	h := func(context.Context, *Job) error { return nil }
	for name, opts := range map[string][]WorkerOption{
		"nil option":      {nil},
		"empty id":        {WithWorkerID("")},
		"control char id": {WithWorkerID("a\nb")},
		"zero poll":       {WithPollInterval(0, time.Second)},
		"max below min":   {WithPollInterval(time.Second, time.Millisecond)},
		"negative grace":  {WithShutdownGrace(-time.Second)},
		"zero attempts":   {WithMaxAttempts(0)},
		"nil logger":      {WithLogger(nil)},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := q.NewWorker(h, opts...)
			require.ErrorIs(t, err, ErrInvalidConfig)
		})
	}
	_, err = q.NewWorker(nil)
	require.ErrorIs(t, err, ErrInvalidConfig)
	w, err := q.NewWorker(h, WithWorkerID("w-1"))
	require.NoError(t, err)
	require.Equal(t, "w-1", w.ID())
}

func TestPlanClaim(t *testing.T) {
	create := func(s Status, attempts int64, lastErr string) *Request {
		return &Request{ID: "c", Kind: KindCreate, Status: s, Attempts: attempts, LastError: lastErr}
	}
	upd := func(id string, s Status, attempts int64) Request {
		return Request{ID: id, Kind: KindUpdate, Status: s, Attempts: attempts}
	}
	ids := func(rs []Request) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.ID)
		}
		return out
	}
	for _, tc := range []struct {
		name      string
		pending   []Request
		create    *Request
		kind      Kind
		claim     []string
		fail      map[string]string
		reclaimed int
	}{
		{name: "nothing pending", create: create(StatusComplete, 1, "")},
		{name: "pending create alone, updates wait",
			create:  create(StatusNew, 0, ""),
			pending: []Request{*create(StatusNew, 0, ""), upd("u1", StatusNew, 0)},
			kind:    KindCreate, claim: []string{"c"}},
		{name: "create abandoned in-progress is claimed again",
			create:  create(StatusInProgress, 1, ""),
			pending: []Request{*create(StatusInProgress, 1, "")},
			kind:    KindCreate, claim: []string{"c"}, reclaimed: 1},
		{name: "create claimed too often gives up",
			create:  create(StatusInProgress, 3, ""),
			pending: []Request{*create(StatusInProgress, 3, ""), upd("u1", StatusNew, 0)},
			kind:    KindCreate, fail: map[string]string{"c": "gave up after 3 claims"}},
		{name: "complete create: all updates grouped, oldest first",
			create:  create(StatusComplete, 1, ""),
			pending: []Request{upd("u1", StatusNew, 0), upd("u2", StatusInProgress, 1), upd("u3", StatusNew, 0)},
			kind:    KindUpdate, claim: []string{"u1", "u2", "u3"}, reclaimed: 1},
		{name: "an update claimed too often gives up, the rest go on",
			create:  create(StatusComplete, 1, ""),
			pending: []Request{upd("u1", StatusInProgress, 3), upd("u2", StatusNew, 0)},
			kind:    KindUpdate, claim: []string{"u2"}, fail: map[string]string{"u1": "gave up after 3 claims"}},
		{name: "failed create fails its updates",
			create:  create(StatusError, 1, "boom"),
			pending: []Request{upd("u1", StatusNew, 0), upd("u2", StatusNew, 0)},
			fail:    map[string]string{"u1": "create failed: boom", "u2": "create failed: boom"}},
		{name: "no create at all",
			pending: []Request{upd("u1", StatusNew, 0)},
			fail:    map[string]string{"u1": `resource "r" has no create request`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := planClaim("r", tc.pending, tc.create, 3)
			require.Equal(t, tc.claim, ids(p.claim))
			if len(tc.claim) > 0 {
				require.Equal(t, tc.kind, p.kind)
			}
			fail := map[string]string{}
			for _, f := range p.fail {
				fail[f.req.ID] = f.reason
			}
			if tc.fail == nil {
				tc.fail = map[string]string{}
			}
			require.Equal(t, tc.fail, fail)
			require.Equal(t, tc.reclaimed, p.reclaimed)
			require.Equal(t, len(tc.claim) == 0 && len(tc.fail) == 0, p.empty())
		})
	}
}

func TestWorkerHandlesRequestsInFIFOOrder(t *testing.T) {
	t.Parallel() // waits out leases beside the other waiting tests, on its own database
	eachDialect(t, testWorkerHandlesRequestsInFIFOOrder)
}

func testWorkerHandlesRequestsInFIFOOrder(t *testing.T, d ddl.Dialect) {
	q, _ := newTestQueueIn(t, d)
	var want []string
	const n = 40 // more than a scan page
	for i := range n {
		// One commit each: their commit timestamps order the queue.
		want = append(want, enqueue(t, q, Request{Kind: KindCreate, Resource: fmt.Sprintf("sheet-%02d", n-i)})...)
	}
	var j journal
	w, err := q.NewWorker(func(ctx context.Context, job *Job) error {
		j.add("w", job)
		return nil
	})
	require.NoError(t, err)
	runWorker(t, w)
	for _, r := range waitFinished(t, q, 30*time.Second, want...) {
		require.Equal(t, StatusComplete, r.Status)
		require.Equal(t, int64(1), r.Attempts)
		require.False(t, r.FinishedAt.Before(r.ClaimedAt))
	}
	var got []string
	for _, rec := range j.snapshot() {
		require.Equal(t, KindCreate, rec.kind)
		got = append(got, rec.ids...)
	}
	require.Equal(t, want, got, "handled in enqueue order")
	require.Equal(t, int64(n), w.Stats().RequestsCompleted)
	require.Equal(t, int64(n), w.Stats().Jobs)
}

// gate blocks handlers of chosen resources until released.
type gate struct {
	entered  map[string]chan struct{} // closed when a handler of the resource enters; never changed
	released map[string]chan struct{} // closed by the test to let it go on; never changed
	mu       sync.Mutex
	used     map[string]bool // the resources whose handler has entered
}

func newGate(resources ...string) *gate {
	g := &gate{entered: map[string]chan struct{}{}, released: map[string]chan struct{}{}, used: map[string]bool{}}
	for _, r := range resources {
		g.entered[r], g.released[r] = make(chan struct{}), make(chan struct{})
	}
	return g
}

// pass blocks a handler of resource until release(resource), once; ctx's
// end does not unblock it unless honourCtx.
func (g *gate) pass(ctx context.Context, resource string, honourCtx bool) error {
	entered, released := g.entered[resource], g.released[resource]
	g.mu.Lock()
	used := g.used[resource]
	g.used[resource] = true
	g.mu.Unlock()
	if entered == nil || used {
		return nil
	}
	close(entered)
	if !honourCtx {
		<-released
		return nil
	}
	select {
	case <-released:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func waitChan(t *testing.T, c <-chan struct{}, timeout time.Duration, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(timeout):
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
}

func TestWorkerSkipsAResourceHeldByAnotherAndReturnsToIt(t *testing.T) {
	q, _ := newTestQueue(t)
	g := newGate("busy")
	entered, release := g.entered["busy"], g.released["busy"]
	var j journal
	handler := func(name string) Handler {
		return func(ctx context.Context, job *Job) error {
			j.add(name, job)
			return g.pass(ctx, job.Resource, false)
		}
	}
	a, err := q.NewWorker(handler("A"), WithWorkerID("A"))
	require.NoError(t, err)
	b, err := q.NewWorker(handler("B"), WithWorkerID("B"), WithPollInterval(20*time.Millisecond, 100*time.Millisecond))
	require.NoError(t, err)

	busy := enqueue(t, q, Request{Kind: KindCreate, Resource: "busy"})
	runWorker(t, a)
	waitChan(t, entered, 30*time.Second, "A to handle busy's create")
	// While A holds "busy": an update of it, and another resource behind it.
	upd := enqueue(t, q, Request{Kind: KindUpdate, Resource: "busy"})
	free := enqueue(t, q, Request{Kind: KindCreate, Resource: "free"})
	runWorker(t, b)
	waitFinished(t, q, 30*time.Second, free...)
	waitFor(t, 30*time.Second, "B to skip the held resource", func() bool { return b.Stats().Skipped > 0 })
	r, err := q.Get(context.Background(), upd[0])
	require.NoError(t, err)
	require.Equal(t, StatusNew, r.Status, "the update of a held resource waits")

	close(release)
	all := waitFinished(t, q, 30*time.Second, append(busy, upd...)...)
	for _, r := range all {
		require.Equal(t, StatusComplete, r.Status)
	}
	for _, rec := range j.snapshot() {
		if rec.resource == "free" {
			require.Equal(t, "B", rec.worker, "B handled what A did not hold")
		}
	}
	require.Len(t, j.snapshot(), 3, "one job each: busy's create, busy's update, free's create")
}

func TestWorkerHandlesUpdatesOnlyAfterTheirCreateCompleted(t *testing.T) {
	eachDialect(t, testWorkerHandlesUpdatesOnlyAfterTheirCreateCompleted)
}

func testWorkerHandlesUpdatesOnlyAfterTheirCreateCompleted(t *testing.T, d ddl.Dialect) {
	q, _ := newTestQueueIn(t, d)
	g := newGate("sheet")
	var mu sync.Mutex
	createDone := false
	var violations []string
	handler := func(ctx context.Context, job *Job) error {
		if job.Kind == KindCreate {
			err := g.pass(ctx, job.Resource, false)
			mu.Lock()
			createDone = true
			mu.Unlock()
			return err
		}
		// The create's outcome is recorded only after its handler returns;
		// an update handled before then would see it unfinished.
		c, err := q.Get(ctx, job.Requests[0].ID)
		if err != nil {
			return err
		}
		mu.Lock()
		if !createDone {
			violations = append(violations, "update handled while the create's handler ran")
		}
		mu.Unlock()
		all, err := q.List(ctx, job.Resource)
		if err != nil {
			return err
		}
		if all[0].Kind != KindCreate || all[0].Status != StatusComplete {
			mu.Lock()
			violations = append(violations, fmt.Sprintf("update %s handled while the create is %s", c.ID, all[0].Status))
			mu.Unlock()
		}
		return nil
	}
	var ws []*Worker
	for i := range 3 {
		w, err := q.NewWorker(handler, WithWorkerID(fmt.Sprintf("w%d", i)), WithPollInterval(10*time.Millisecond, 50*time.Millisecond))
		require.NoError(t, err)
		ws = append(ws, w)
		runWorker(t, w)
	}
	ids := enqueue(t, q, Request{Kind: KindCreate, Resource: "sheet"})
	waitChan(t, g.entered["sheet"], 30*time.Second, "the create's handler")
	for range 3 {
		ids = append(ids, enqueue(t, q, Request{Kind: KindUpdate, Resource: "sheet"})...)
	}
	// Every worker passes over the updates at least once while the create runs.
	waitFor(t, 30*time.Second, "the other workers to skip the held resource", func() bool {
		n := 0
		for _, w := range ws {
			if w.Stats().Skipped > 0 {
				n++
			}
		}
		return n >= 2
	})
	close(g.released["sheet"])
	for _, r := range waitFinished(t, q, 30*time.Second, ids...) {
		require.Equal(t, StatusComplete, r.Status)
	}
	mu.Lock()
	defer mu.Unlock()
	require.Empty(t, violations)
}

func TestWorkerGroupsOutstandingUpdatesIntoOneJob(t *testing.T) {
	eachDialect(t, testWorkerGroupsOutstandingUpdatesIntoOneJob)
}

func testWorkerGroupsOutstandingUpdatesIntoOneJob(t *testing.T, d ddl.Dialect) {
	q, _ := newTestQueueIn(t, d)
	g := newGate("sheet")
	var j journal
	w, err := q.NewWorker(func(ctx context.Context, job *Job) error {
		j.add("w", job)
		return g.pass(ctx, job.Resource, false)
	})
	require.NoError(t, err)
	runWorker(t, w)
	create := enqueue(t, q, Request{Kind: KindCreate, Resource: "sheet"})
	waitChan(t, g.entered["sheet"], 30*time.Second, "the create's handler")
	var updates []string
	for i := range 20 {
		updates = append(updates, enqueue(t, q, Request{Kind: KindUpdate, Resource: "sheet", Payload: []byte{byte(i)}})...)
	}
	close(g.released["sheet"])
	for _, r := range waitFinished(t, q, 30*time.Second, append(create, updates...)...) {
		require.Equal(t, StatusComplete, r.Status)
	}
	jobs := j.snapshot()
	require.Len(t, jobs, 2, "the create, then one job for all 20 updates")
	require.Equal(t, KindUpdate, jobs[1].kind)
	require.Equal(t, updates, jobs[1].ids, "every update, oldest first")
	require.Equal(t, jobs[0].token, jobs[1].token, "in one tenure of the lease")
	st := w.Stats()
	require.Equal(t, int64(19), st.Grouped)
	require.Equal(t, int64(21), st.RequestsCompleted)
}

func TestWorkerFailsTheUpdatesOfAFailedCreate(t *testing.T) {
	eachDialect(t, testWorkerFailsTheUpdatesOfAFailedCreate)
}

func testWorkerFailsTheUpdatesOfAFailedCreate(t *testing.T, d ddl.Dialect) {
	q, _ := newTestQueueIn(t, d)
	var j journal
	w, err := q.NewWorker(func(ctx context.Context, job *Job) error {
		j.add("w", job)
		if job.Kind == KindCreate {
			return errors.New("no quota left")
		}
		return nil
	})
	require.NoError(t, err)
	ids := enqueue(t, q, Request{Kind: KindCreate, Resource: "sheet"},
		Request{Kind: KindUpdate, Resource: "sheet"}, Request{Kind: KindUpdate, Resource: "sheet"})
	runWorker(t, w)
	got := waitFinished(t, q, 30*time.Second, ids...)
	require.Equal(t, StatusError, got[0].Status)
	require.Equal(t, "no quota left", got[0].LastError)
	for _, r := range got[1:] {
		require.Equal(t, StatusError, r.Status)
		require.Equal(t, "create failed: no quota left", r.LastError)
		require.Zero(t, r.Attempts, "never handed to a handler")
	}
	require.Len(t, j.snapshot(), 1, "only the create reached the handler")
	require.Equal(t, int64(3), w.Stats().RequestsFailed)
}

func TestWorkerRecoversPanicsAsErrors(t *testing.T) {
	q, _ := newTestQueue(t)
	w, err := q.NewWorker(func(ctx context.Context, job *Job) error { panic("kaboom") })
	require.NoError(t, err)
	ids := enqueue(t, q, Request{Kind: KindCreate, Resource: "sheet"})
	runWorker(t, w)
	got := waitFinished(t, q, 30*time.Second, ids...)
	require.Equal(t, StatusError, got[0].Status)
	require.Contains(t, got[0].LastError, "kaboom")
}

func TestWorkerGivesUpOnARequestClaimedTooOften(t *testing.T) {
	q, c := newTestQueue(t)
	ids := enqueue(t, q, Request{Kind: KindCreate, Resource: "sheet"}, Request{Kind: KindUpdate, Resource: "sheet"})
	// As if two workers had claimed the create and died.
	_, err := c.Apply(context.Background(), []*spanner.Mutation{spanner.UpdateMap(q.Table(), map[string]any{
		"RequestID": ids[0], "Status": string(StatusInProgress), "ProcessID": "dead", "Attempts": int64(2)})})
	require.NoError(t, err)
	calls := 0
	w, err := q.NewWorker(func(ctx context.Context, job *Job) error { calls++; return nil }, WithMaxAttempts(2))
	require.NoError(t, err)
	runWorker(t, w)
	got := waitFinished(t, q, 30*time.Second, ids...)
	require.Equal(t, StatusError, got[0].Status)
	require.Equal(t, "gave up after 2 claims", got[0].LastError)
	require.Equal(t, StatusError, got[1].Status)
	require.Equal(t, "create failed: gave up after 2 claims", got[1].LastError)
	require.Zero(t, calls)
}

func TestWorkerShutdownLetsAHandlerInFlightFinish(t *testing.T) {
	q, _ := newTestQueue(t)
	g := newGate("sheet")
	w, err := q.NewWorker(func(ctx context.Context, job *Job) error {
		return g.pass(ctx, job.Resource, true)
	}, WithShutdownGrace(time.Minute))
	require.NoError(t, err)
	ids := enqueue(t, q, Request{Kind: KindCreate, Resource: "sheet"})
	stop := runWorker(t, w)
	waitChan(t, g.entered["sheet"], 30*time.Second, "the handler")
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	// Run waits for the handler, within its grace.
	select {
	case <-stopped:
		t.Fatal("Run returned while its handler was still running")
	case <-time.After(200 * time.Millisecond):
	}
	close(g.released["sheet"])
	waitChan(t, stopped, 30*time.Second, "Run to return")
	r, err := q.Get(context.Background(), ids[0])
	require.NoError(t, err)
	require.Equal(t, StatusComplete, r.Status, "the outcome of the handler in flight is recorded")
}

func TestWorkerShutdownReleasesTheRequestsOfAnOverrunningHandler(t *testing.T) {
	q, _ := newTestQueue(t)
	g := newGate("sheet")
	var cause error
	a, err := q.NewWorker(func(ctx context.Context, job *Job) error {
		err := g.pass(ctx, job.Resource, true)
		cause = err
		return err
	}, WithWorkerID("A"), WithShutdownGrace(100*time.Millisecond))
	require.NoError(t, err)
	ids := enqueue(t, q, Request{Kind: KindCreate, Resource: "sheet"}, Request{Kind: KindUpdate, Resource: "sheet"})
	stopA := runWorker(t, a)
	waitChan(t, g.entered["sheet"], 30*time.Second, "A's handler")
	stopA()
	require.ErrorIs(t, cause, errShutdownGrace)
	r, err := q.Get(context.Background(), ids[0])
	require.NoError(t, err)
	require.Equal(t, StatusNew, r.Status, "released back to new")
	require.Equal(t, releasedAtShutdown, r.LastError)
	require.Equal(t, int64(1), a.Stats().RequestsReleased)

	var j journal
	b, err := q.NewWorker(func(ctx context.Context, job *Job) error { j.add("B", job); return nil }, WithWorkerID("B"))
	require.NoError(t, err)
	runWorker(t, b)
	for _, r := range waitFinished(t, q, 30*time.Second, ids...) {
		require.Equal(t, StatusComplete, r.Status)
	}
	jobs := j.snapshot()
	require.Len(t, jobs, 2)
	require.Equal(t, ids[:1], jobs[0].ids, "B handled the released create first")
	require.Greater(t, jobs[0].token, int64(0))
}

func TestWorkerIsWokenByEnqueue(t *testing.T) {
	q, _ := newTestQueue(t)
	// A poll interval far longer than the test: only Notify can wake it.
	w, err := q.NewWorker(func(context.Context, *Job) error { return nil }, WithPollInterval(time.Hour, time.Hour), WithLogger(testLogger(t)))
	require.NoError(t, err)
	runWorker(t, w)
	waitFor(t, 30*time.Second, "the first scan", func() bool { return w.Stats().Scans >= 1 })
	ids := enqueue(t, q, Request{Kind: KindCreate, Resource: "sheet"})
	waitFinished(t, q, 30*time.Second, ids...)
}

// testLogger logs everything to the test's log.
func testLogger(t *testing.T) *slog.Logger { return testLoggerAt(t, slog.LevelDebug) }

// testLoggerAt logs records of level and above to the test's log.
func testLoggerAt(t *testing.T, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: level}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func TestWorkerRunStopsOnAMissingTable(t *testing.T) {
	c := newClient(t, freshDatabase(t))
	q, err := New(c, WithTable("NoSuchRequests"))
	require.NoError(t, err)
	w, err := q.NewWorker(func(context.Context, *Job) error { return nil })
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = w.Run(ctx)
	require.Error(t, err, "retrying cannot create the table")
	require.Equal(t, codes.NotFound, spanner.ErrCode(err))
	require.NoError(t, ctx.Err(), "Run returned at once, not at the deadline")
}
