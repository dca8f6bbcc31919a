package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/internal/sqldialect"
)

// The legacy application's table, watched by the change stream Orders_CS.
const (
	ordersTable  = "Orders"
	ordersStream = "Orders_CS"
)

// captureDatabase creates a database with the queue, the legacy table, the
// change stream over it and the checkpoint table, and returns a client of
// it and a start timestamp for the capture: Spanner's clock once the stream
// exists, so that every change the test makes afterwards is in range.
func captureDatabase(t *testing.T) (*spanner.Client, time.Time) {
	t.Helper()
	return captureDatabaseIn(t, ddl.GoogleSQL)
}

// captureSchema returns the statements of captureDatabaseIn's schema in
// dialect d: the orders table, the stream over it, the checkpoint table.
func captureSchema(t *testing.T, d ddl.Dialect) []string {
	t.Helper()
	stream, err := d.ChangeStream(ordersStream, ordersTable)
	require.NoError(t, err)
	ckpt, err := d.CaptureStatements(ddl.DefaultCaptureTable)
	require.NoError(t, err)
	orders := "CREATE TABLE " + ordersTable + " (OrderID STRING(64) NOT NULL, Status STRING(32), Amount INT64) PRIMARY KEY (OrderID)"
	if d == ddl.PostgreSQL {
		orders = `CREATE TABLE "` + ordersTable + `" ("OrderID" varchar(64) NOT NULL, "Status" varchar(32), "Amount" bigint, PRIMARY KEY ("OrderID"))`
	}
	return append([]string{orders, stream}, ckpt...)
}

// captureDatabaseIn is captureDatabase in dialect d.
func captureDatabaseIn(t *testing.T, d ddl.Dialect) (*spanner.Client, time.Time) {
	t.Helper()
	c := newClient(t, freshDatabaseIn(t, d, captureSchema(t, d)...))
	row, err := c.Single().Query(context.Background(), sqldialect.Statement(d, "SELECT CURRENT_TIMESTAMP()", nil)).Next()
	require.NoError(t, err)
	var start time.Time
	require.NoError(t, row.Columns(&start))
	return c, start
}

// capturedChange is what the test mapper puts in a request's payload: the
// change's identity, to compare with what the application committed.
type capturedChange struct {
	Table  string `json:"table"`
	Mod    string `json:"mod"`
	Key    string `json:"key"`
	Commit string `json:"commit"`
	New    string `json:"new"`
}

// testMapper makes one request per changed order: a create for an INSERT,
// an update for an UPDATE or DELETE, with the change in the payload.
func testMapper(ch Change) ([]Request, error) {
	var keys struct{ OrderID string }
	if err := json.Unmarshal([]byte(ch.Keys), &keys); err != nil {
		return nil, fmt.Errorf("keys %s: %w", ch.Keys, err)
	}
	kind := KindUpdate
	if ch.Mod == ModInsert {
		kind = KindCreate
	}
	payload, err := json.Marshal(capturedChange{Table: ch.Table, Mod: string(ch.Mod), Key: keys.OrderID,
		Commit: ch.CommitTimestamp.UTC().Format(time.RFC3339Nano), New: ch.NewValues})
	if err != nil {
		return nil, err
	}
	return []Request{{Kind: kind, Resource: "order/" + keys.OrderID, Payload: payload}}, nil
}

// legacyApp writes orders in its own transactions, as an application that
// knows nothing of the queue would, and remembers what it committed.
type legacyApp struct {
	client *spanner.Client

	mu        sync.Mutex
	committed []string // "mod key commit", one per committed row change
	last      time.Time
}

func (a *legacyApp) record(ts time.Time, mod, key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.committed = append(a.committed, fmt.Sprintf("%s %s %s", mod, key, ts.UTC().Format(time.RFC3339Nano)))
	if ts.After(a.last) {
		a.last = ts
	}
}

// insert creates order key in a transaction of its own.
func (a *legacyApp) insert(ctx context.Context, key string, amount int64) error {
	ts, err := a.client.Apply(ctx, []*spanner.Mutation{spanner.InsertMap(ordersTable, map[string]any{
		"OrderID": key, "Status": "new", "Amount": amount,
	})})
	if err == nil {
		a.record(ts, "INSERT", key)
	}
	return err
}

// update changes two existing orders in one transaction (two mods of one
// data change record).
func (a *legacyApp) update(ctx context.Context, k1, k2 string, amount int64) error {
	ts, err := a.client.ReadWriteTransaction(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		return txn.BufferWrite([]*spanner.Mutation{
			spanner.UpdateMap(ordersTable, map[string]any{"OrderID": k1, "Amount": amount, "Status": "paid"}),
			spanner.UpdateMap(ordersTable, map[string]any{"OrderID": k2, "Amount": amount + 1}),
		})
	})
	if err == nil {
		a.record(ts, "UPDATE", k1)
		if k2 != k1 {
			a.record(ts, "UPDATE", k2)
		}
	}
	return err
}

// rollBack writes an order and then fails its transaction: no change.
func (a *legacyApp) rollBack(ctx context.Context, key string) error {
	failed := errors.New("the application changed its mind")
	_, err := a.client.ReadWriteTransaction(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		if err := txn.BufferWrite([]*spanner.Mutation{spanner.InsertMap(ordersTable, map[string]any{"OrderID": key, "Amount": 0})}); err != nil {
			return err
		}
		return failed
	})
	if errors.Is(err, failed) {
		return nil
	}
	return fmt.Errorf("rollBack: %w", err)
}

// step i of the application's history: an order inserted, every third step
// an update of two earlier orders, every seventh a rolled-back insert.
func (a *legacyApp) step(ctx context.Context, i int) error {
	if err := a.insert(ctx, fmt.Sprintf("o%04d", i), int64(i)); err != nil {
		return err
	}
	if i%3 == 2 {
		if err := a.update(ctx, fmt.Sprintf("o%04d", i/2), fmt.Sprintf("o%04d", i-1), int64(100+i)); err != nil {
			return err
		}
	}
	if i%7 == 3 {
		return a.rollBack(ctx, fmt.Sprintf("rolled-back-%04d", i))
	}
	return nil
}

func (a *legacyApp) snapshot() ([]string, time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := append([]string(nil), a.committed...)
	sort.Strings(out)
	return out, a.last
}

// capturedRequests returns every request of the queue as "mod key commit"
// from its payload, sorted, and the requests themselves.
func capturedRequests(t *testing.T, c *spanner.Client) ([]string, []Request) {
	t.Helper()
	var out []string
	var reqs []Request
	// Key reads, here and in checkpointRows: the same in both dialects.
	err := c.Single().Read(context.Background(), ddl.DefaultRequestsTable, spanner.AllKeys(), requestColumns).Do(func(row *spanner.Row) error {
		r, err := decodeRequest(row)
		if err != nil {
			return err
		}
		var ch capturedChange
		if err := json.Unmarshal(r.Payload, &ch); err != nil {
			return err
		}
		out = append(out, fmt.Sprintf("%s %s %s", ch.Mod, ch.Key, ch.Commit))
		reqs = append(reqs, r)
		return nil
	})
	require.NoError(t, err)
	sort.Strings(out)
	return out, reqs
}

// partitionRow is a checkpoint row, as the tests look at it.
type partitionRow struct {
	Token             string
	State             string
	Parents           []string
	Resume            time.Time
	Owner             string
	Records, Requests int64
}

func checkpointRows(t *testing.T, c *spanner.Client, table, stream string) []partitionRow {
	t.Helper()
	var out []partitionRow
	cols := []string{"PartitionToken", "State", "ParentTokens", "ResumeTimestamp", "Owner", "Records", "Requests"}
	err := c.Single().Read(context.Background(), table, spanner.Key{stream}.AsPrefix(), cols).Do(func(row *spanner.Row) error {
		var p partitionRow
		var owner spanner.NullString
		if err := row.Columns(&p.Token, &p.State, &p.Parents, &p.Resume, &owner, &p.Records, &p.Requests); err != nil {
			return err
		}
		p.Owner = owner.StringVal
		out = append(out, p)
		return nil
	})
	require.NoError(t, err)
	return out
}

// caughtUp reports whether the capture has read past last in every
// partition still open: everything committed up to last is in the queue.
func caughtUp(t *testing.T, c *spanner.Client, table, stream string, last time.Time) bool {
	rows := checkpointRows(t, c, table, stream)
	if len(rows) == 0 {
		return false
	}
	for _, p := range rows {
		if p.State != partitionFinished && !p.Resume.After(last) {
			return false
		}
	}
	return true
}

// runCapture runs a capture in the background until the returned stop is
// called; stop returns Run's error.
func runCapture(t *testing.T, capt *Capture) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- capt.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-errc:
			case <-time.After(30 * time.Second):
				err = errors.New("Run did not return within 30s of its context's cancellation")
			}
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// fastCapture makes a capture with short windows and leases, for tests.
func fastCapture(t *testing.T, q *Queue, c *spanner.Client, start time.Time, opts ...CaptureOption) *Capture {
	t.Helper()
	opts = append([]CaptureOption{
		WithStartTimestamp(start), WithQueryWindow(300 * time.Millisecond), WithHeartbeat(time.Second),
		WithPartitionLease(3 * time.Second), WithCapturePollInterval(100 * time.Millisecond), WithCaptureBatchSize(7),
	}, opts...)
	capt, err := q.NewCapture(c, ordersStream, testMapper, opts...)
	require.NoError(t, err)
	return capt
}

// requireExactlyOnce checks that the queue holds one request per committed
// change: none lost, none duplicated, none invented.
func requireExactlyOnce(t *testing.T, app *legacyApp, c *spanner.Client) []Request {
	t.Helper()
	want, _ := app.snapshot()
	got, reqs := capturedRequests(t, c)
	seen := map[string]int{}
	for _, g := range got {
		seen[g]++
		require.Equal(t, 1, seen[g], "captured twice: %s", g)
	}
	for _, r := range reqs {
		require.False(t, strings.Contains(r.Resource, "rolled-back"), "a rolled-back transaction produced request %s", r.ID)
	}
	require.Equal(t, want, got, "the requests are exactly the committed changes")
	return reqs
}

// On both dialects: GoogleSQL streams return STRUCTs, PostgreSQL ones JSONB.
func TestCaptureTurnsEachCommittedChangeIntoOneRequest(t *testing.T) {
	t.Parallel() // waits out leases beside the other waiting tests, on its own database
	eachDialect(t, testCaptureTurnsEachCommittedChangeIntoOneRequest)
}

func testCaptureTurnsEachCommittedChangeIntoOneRequest(t *testing.T, d ddl.Dialect) {
	c, start := captureDatabaseIn(t, d)
	q, err := New(c)
	require.NoError(t, err)
	ctx := context.Background()
	app := &legacyApp{client: c}
	// Changes committed before the capture first runs are captured too:
	// they are after its start timestamp.
	for i := 0; i < 10; i++ {
		require.NoError(t, app.step(ctx, i))
	}
	capt := fastCapture(t, q, c, start)
	stop := runCapture(t, capt)
	for i := 10; i < 40; i++ {
		require.NoError(t, app.step(ctx, i))
	}
	_, last := app.snapshot()
	waitFor(t, time.Minute, "the capture to read past the last commit", func() bool {
		return caughtUp(t, c, ddl.DefaultCaptureTable, ordersStream, last)
	})
	require.ErrorIs(t, stop(), context.Canceled)

	reqs := requireExactlyOnce(t, app, c)
	want, _ := app.snapshot()
	t.Logf("%d committed changes, %d requests", len(want), len(reqs))
	for _, r := range reqs {
		require.True(t, strings.HasPrefix(r.ID, captureIDPrefix), "derived id %q", r.ID)
		require.Equal(t, StatusNew, r.Status)
		switch {
		case strings.Contains(string(r.Payload), `"mod":"INSERT"`):
			require.Equal(t, KindCreate, r.Kind)
		default:
			require.Equal(t, KindUpdate, r.Kind)
		}
	}
	for _, p := range checkpointRows(t, c, ddl.DefaultCaptureTable, ordersStream) {
		require.Empty(t, p.Owner, "Run released partition %.16s… when it stopped", p.Token)
	}
	requireCommitOrder(t, q, reqs)
}

// requireCommitOrder checks that the queue hands out each resource's
// requests (List's order: CreatedAt, then id) in the commit order of the
// changes they came from.
func requireCommitOrder(t *testing.T, q *Queue, reqs []Request) {
	t.Helper()
	resources := map[string]bool{}
	for _, r := range reqs {
		resources[r.Resource] = true
	}
	for res := range resources {
		list, err := q.List(context.Background(), res)
		require.NoError(t, err)
		var prev time.Time
		for _, r := range list {
			var ch capturedChange
			require.NoError(t, json.Unmarshal(r.Payload, &ch))
			ts, err := time.Parse(time.RFC3339Nano, ch.Commit)
			require.NoError(t, err)
			require.False(t, ts.Before(prev), "%s: a change committed at %s is queued after one committed at %s", res, ts, prev)
			prev = ts
		}
	}
}

// writeUntil runs app steps from first on, paced, until stop is closed, and
// returns the next step's number.
func writeUntil(ctx context.Context, app *legacyApp, first int, stop <-chan struct{}) (int, error) {
	pace := time.NewTicker(40 * time.Millisecond) // load, not synchronisation
	defer pace.Stop()
	for i := first; ; i++ {
		select {
		case <-stop:
			return i, nil
		case <-pace.C:
		}
		if err := app.step(ctx, i); err != nil {
			return i, err
		}
	}
}

func countRequests(t *testing.T, q *Queue) int64 {
	t.Helper()
	n, err := q.Counts(context.Background())
	require.NoError(t, err)
	var total int64
	for _, v := range n {
		total += v
	}
	return total
}

// childSeen reports whether the capture has recorded a child partition with
// parents: Spanner (the emulator churns every 20-40s) split or merged a
// partition while it was read.
func childSeen(t *testing.T, c *spanner.Client) bool {
	for _, p := range checkpointRows(t, c, ddl.DefaultCaptureTable, ordersStream) {
		if len(p.Parents) > 0 && p.State != partitionCreated {
			return true
		}
	}
	return false
}

func TestCaptureKilledAndRestartedLosesAndDuplicatesNothing(t *testing.T) {
	t.Parallel() // waits out leases beside the other waiting tests, on its own database
	c, start := captureDatabase(t)
	q, err := New(c)
	require.NoError(t, err)
	ctx := context.Background()
	app := &legacyApp{client: c}

	stopWriting := make(chan struct{})
	writerDone := make(chan error, 1)
	go func() {
		_, err := writeUntil(ctx, app, 0, stopWriting)
		writerDone <- err
	}()

	// Each round runs a capture, on a client of its own, until more
	// requests have arrived, then ends it abruptly while changes keep
	// coming: by cancelling Run's context (it releases its partitions) or,
	// every other round, by a crash: from then on its client's calls fail,
	// those in flight after the server has done them (a commit lands, its
	// caller never learns), so nothing is released and the partitions stay
	// leased until the lease expires.
	kills := 0
	for round := 0; kills < 4 || !childSeen(t, c); round++ {
		require.Less(t, round, 40, "no child partition appeared in 40 rounds")
		crash := round%2 == 1
		var crashed atomic.Bool
		cc, err := emu.NewClient(ctx, c.DatabaseName(), crashable(&crashed)...)
		require.NoError(t, err)
		t.Cleanup(cc.Close)
		qq, err := New(cc)
		require.NoError(t, err)
		stop := runCapture(t, fastCapture(t, qq, cc, start))
		before := countRequests(t, q)
		waitFor(t, time.Minute, "more requests", func() bool { return countRequests(t, q) > before+int64(5+round%4) })
		crashed.Store(crash)
		require.ErrorIs(t, stop(), context.Canceled)
		kills++
	}
	close(stopWriting)
	require.NoError(t, <-writerDone)

	stop := runCapture(t, fastCapture(t, q, c, start))
	_, last := app.snapshot()
	waitFor(t, 2*time.Minute, "the last capture to read past the last commit", func() bool {
		return caughtUp(t, c, ddl.DefaultCaptureTable, ordersStream, last)
	})
	require.ErrorIs(t, stop(), context.Canceled)

	// No requireCommitOrder here: the emulator's partition churn does not
	// keep a key within one line of partitions (a key's next change may be
	// in a partition that is not a child of the one that held the previous
	// change), so, across a split or merge, the emulator does not give the
	// per-key order that Spanner's parent-before-child rule does.
	reqs := requireExactlyOnce(t, app, c)
	rows := checkpointRows(t, c, ddl.DefaultCaptureTable, ordersStream)
	var records, requests, withParents, merged int64
	for _, p := range rows {
		records += p.Records
		requests += p.Requests
		if len(p.Parents) > 0 {
			withParents++
		}
		if len(p.Parents) > 1 {
			merged++
		}
	}
	require.Equal(t, int64(len(reqs)), requests, "each request was counted once by the checkpoint that enqueued it")
	t.Logf("%d kills; %d requests for %d committed changes; %d data change records read (replays included); %d partition rows, %d children, %d of them merges",
		kills, len(reqs), len(reqs), records, len(rows), withParents, merged)
}

func TestCaptureTwoInstancesAtOnceDuplicateNothing(t *testing.T) {
	t.Parallel() // waits out leases beside the other waiting tests, on its own database
	c, start := captureDatabase(t)
	q, err := New(c)
	require.NoError(t, err)
	ctx := context.Background()
	app := &legacyApp{client: c}

	c2 := newClient(t, c.DatabaseName())
	q2, err := New(c2)
	require.NoError(t, err)
	// One partition each, at most: the emulator starts a stream with two.
	a, b := fastCapture(t, q, c, start, WithMaxPartitions(1)), fastCapture(t, q2, c2, start, WithMaxPartitions(1))
	stopA, stopB := runCapture(t, a), runCapture(t, b)

	stopWriting := make(chan struct{})
	writerDone := make(chan error, 1)
	go func() {
		_, err := writeUntil(ctx, app, 0, stopWriting)
		writerDone <- err
	}()
	owners := map[string]int{} // partitions seen held by each instance
	waitFor(t, time.Minute, "100 requests", func() bool {
		for _, p := range checkpointRows(t, c, ddl.DefaultCaptureTable, ordersStream) {
			if p.Owner != "" {
				require.Contains(t, []string{a.ID(), b.ID()}, p.Owner)
				owners[p.Owner]++
			}
		}
		return countRequests(t, q) >= 100
	})
	close(stopWriting)
	require.NoError(t, <-writerDone)
	_, last := app.snapshot()
	waitFor(t, time.Minute, "the captures to read past the last commit", func() bool {
		return caughtUp(t, c, ddl.DefaultCaptureTable, ordersStream, last)
	})
	require.ErrorIs(t, stopA(), context.Canceled)
	require.ErrorIs(t, stopB(), context.Canceled)
	require.Positive(t, owners[a.ID()], "A read partitions")
	require.Positive(t, owners[b.ID()], "B read partitions")
	reqs := requireExactlyOnce(t, app, c)
	t.Logf("two instances: %d requests for %d committed changes; partition-holdings sampled: A %d, B %d",
		len(reqs), len(reqs), owners[a.ID()], owners[b.ID()])
}

func TestCaptureReplayOfTheWholeStreamIsANoOp(t *testing.T) {
	t.Parallel() // waits out leases beside the other waiting tests, on its own database
	c, start := captureDatabase(t)
	replayTable, err := ddl.CaptureStatements("CaptureReplay")
	require.NoError(t, err)
	applyDDL(t, c.DatabaseName(), replayTable...)
	q, err := New(c)
	require.NoError(t, err)
	ctx := context.Background()
	app := &legacyApp{client: c}
	for i := 0; i < 30; i++ {
		require.NoError(t, app.step(ctx, i))
	}
	_, last := app.snapshot()
	stop := runCapture(t, fastCapture(t, q, c, start))
	waitFor(t, time.Minute, "the capture to read past the last commit", func() bool {
		return caughtUp(t, c, ddl.DefaultCaptureTable, ordersStream, last)
	})
	require.ErrorIs(t, stop(), context.Canceled)
	first := requireExactlyOnce(t, app, c)

	// A second capture with checkpoints of its own shares nothing with the
	// first: no lease, no checkpoint. It reads the whole stream again; the
	// deterministic ids alone make that harmless.
	stop = runCapture(t, fastCapture(t, q, c, start, WithCheckpointTable("CaptureReplay")))
	waitFor(t, time.Minute, "the replay to read past the last commit", func() bool {
		return caughtUp(t, c, "CaptureReplay", ordersStream, last)
	})
	require.ErrorIs(t, stop(), context.Canceled)
	again := requireExactlyOnce(t, app, c)
	require.Equal(t, len(first), len(again))
	var records, requests int64
	for _, p := range checkpointRows(t, c, "CaptureReplay", ordersStream) {
		records += p.Records
		requests += p.Requests
	}
	require.Positive(t, records, "the replay read the records")
	require.Zero(t, requests, "and found every request already enqueued")
	t.Logf("replay read %d data change records and enqueued nothing; %d requests", records, len(again))
}

// crashable returns client options under which, once crashed is set,
// every call fails with Unavailable: unary calls after the server has
// handled them, streaming calls before they start.
func crashable(crashed *atomic.Bool) []option.ClientOption {
	unavailable := status.Error(codes.Unavailable, "test: the process crashed")
	return []option.ClientOption{
		option.WithGRPCDialOption(grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			err := invoker(ctx, method, req, reply, cc, opts...)
			if crashed.Load() {
				return unavailable
			}
			return err
		})),
		option.WithGRPCDialOption(grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			if crashed.Load() {
				return nil, unavailable
			}
			return streamer(ctx, desc, cc, method, opts...)
		})),
	}
}

// applyDDL runs statements on db.
func applyDDL(t *testing.T, db string, stmts ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, emu.UpdateDDL(ctx, db, stmts...))
}
