package queue

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/stretchr/testify/require"

	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/internal/testutil"
)

func TestCaptureConflictPolicies(t *testing.T) {
	t.Parallel() // waits out leases beside the other waiting tests, on its own database
	type want struct {
		kind   Kind
		status Status
		reason string // in LastError
	}
	for name, tc := range map[string]struct {
		policy      ConflictPolicy
		pre, second want // the UPDATE of a row older than the stream; the second INSERT of a row
	}{
		"adapt": {ConflictAdapt,
			want{KindCreate, StatusNew, ""},
			want{KindUpdate, StatusNew, ""}},
		"record error": {ConflictRecordError,
			want{KindUpdate, StatusError, "has no create request"},
			want{KindUpdate, StatusError, "already has a create request"}},
	} {
		t.Run(name, func(t *testing.T) {
			c, _ := captureDatabase(t)
			q, err := New(c)
			require.NoError(t, err)
			ctx := context.Background()
			app := &legacyApp{client: c}
			// "pre" exists before the capture's start: its INSERT is never
			// captured, so its first captured change is an UPDATE.
			require.NoError(t, app.insert(ctx, "pre", 1))
			row, err := c.Single().Query(ctx, spanner.Statement{SQL: "SELECT CURRENT_TIMESTAMP()"}).Next()
			require.NoError(t, err)
			var start time.Time
			require.NoError(t, row.Columns(&start))

			require.NoError(t, app.update(ctx, "pre", "pre", 2))
			require.NoError(t, app.insert(ctx, "again", 1))
			_, err = c.Apply(ctx, []*spanner.Mutation{spanner.Delete(ordersTable, spanner.Key{"again"})})
			require.NoError(t, err)
			require.NoError(t, app.insert(ctx, "again", 2))
			_, last := app.snapshot()

			stop := runCapture(t, fastCapture(t, q, c, start, WithConflictPolicy(tc.policy)))
			waitFor(t, time.Minute, "the capture to read past the last commit", func() bool {
				return caughtUp(t, c, ddl.DefaultCaptureTable, ordersStream, last)
			})
			require.ErrorIs(t, stop(), context.Canceled)

			check := func(r Request, w want) {
				t.Helper()
				require.Equal(t, w.kind, r.Kind, "request %s of %s", r.ID, r.Resource)
				require.Equal(t, w.status, r.Status, "request %s of %s", r.ID, r.Resource)
				if w.reason == "" {
					require.Empty(t, r.LastError)
				} else {
					require.Contains(t, r.LastError, w.reason)
				}
			}
			pre, err := q.List(ctx, "order/pre")
			require.NoError(t, err)
			require.Len(t, pre, 1, "the UPDATE was neither dropped nor duplicated")
			check(pre[0], tc.pre)

			again, err := q.List(ctx, "order/again")
			require.NoError(t, err)
			require.Len(t, again, 3, "INSERT, DELETE, INSERT: three requests")
			check(again[0], want{KindCreate, StatusNew, ""})
			check(again[1], want{KindUpdate, StatusNew, ""}) // the DELETE
			check(again[2], tc.second)
		})
	}
}

func TestCaptureStopsOnAMapperErrorAndResumesAfterTheFix(t *testing.T) {
	c, start := captureDatabase(t)
	q, err := New(c)
	require.NoError(t, err)
	ctx := context.Background()
	app := &legacyApp{client: c}
	for i := 0; i < 20; i++ {
		require.NoError(t, app.step(ctx, i))
	}
	_, last := app.snapshot()

	mapperBug := errors.New("mapper bug")
	broken := func(ch Change) ([]Request, error) {
		if strings.Contains(ch.Keys, "o0011") {
			return nil, mapperBug
		}
		return testMapper(ch)
	}
	capt, err := q.NewCapture(c, ordersStream, broken, WithStartTimestamp(start), WithQueryWindow(300*time.Millisecond),
		WithPartitionLease(3*time.Second), WithCapturePollInterval(100*time.Millisecond))
	require.NoError(t, err)
	runCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err = capt.Run(runCtx)
	require.ErrorIs(t, err, ErrMapper)
	require.ErrorIs(t, err, mapperBug)
	var me *MapperError
	require.ErrorAs(t, err, &me)
	require.Equal(t, ordersTable, me.Table)
	require.Contains(t, me.Keys, "o0011")
	_, err = q.Get(ctx, CaptureRequestID(Change{Stream: ordersStream, Table: me.Table, Keys: me.Keys, CommitTimestamp: me.CommitTimestamp,
		ServerTransactionID: me.ServerTransactionID, RecordSequence: me.RecordSequence, ModIndex: me.ModIndex}, 0))
	require.ErrorIs(t, err, ErrNotFound, "nothing was enqueued for the failing change")

	// A mapper that returns a malformed request fails the same way.
	invalid := func(ch Change) ([]Request, error) { return []Request{{Kind: KindCreate}}, nil }
	capt, err = q.NewCapture(c, ordersStream, invalid, WithQueryWindow(300*time.Millisecond),
		WithPartitionLease(3*time.Second), WithCapturePollInterval(100*time.Millisecond))
	require.NoError(t, err)
	err = capt.Run(runCtx)
	require.ErrorIs(t, err, ErrMapper)
	require.ErrorIs(t, err, ErrInvalidRequest)

	// The fixed mapper resumes from the checkpoints: every change exactly once.
	stop := runCapture(t, fastCapture(t, q, c, start))
	waitFor(t, time.Minute, "the capture to read past the last commit", func() bool {
		return caughtUp(t, c, ddl.DefaultCaptureTable, ordersStream, last)
	})
	require.ErrorIs(t, stop(), context.Canceled)
	requireExactlyOnce(t, app, c)
}

func TestCaptureNewCaptureValidates(t *testing.T) {
	c := newClient(t, freshDatabase(t))
	q, err := New(c)
	require.NoError(t, err)
	other := newClient(t, freshDatabase(t))
	for name, tc := range map[string]struct {
		client *spanner.Client
		stream string
		mapper Mapper
		opts   []CaptureOption
	}{
		"nil client":      {nil, "CS", testMapper, nil},
		"other database":  {other, "CS", testMapper, nil},
		"bad stream":      {c, "CS; DROP", testMapper, nil},
		"nil mapper":      {c, "CS", nil, nil},
		"nil option":      {c, "CS", testMapper, []CaptureOption{nil}},
		"bad table":       {c, "CS", testMapper, []CaptureOption{WithCheckpointTable("a-b")}},
		"tiny window":     {c, "CS", testMapper, []CaptureOption{WithQueryWindow(time.Millisecond)}},
		"tiny heartbeat":  {c, "CS", testMapper, []CaptureOption{WithHeartbeat(10 * time.Millisecond)}},
		"short lease":     {c, "CS", testMapper, []CaptureOption{WithQueryWindow(time.Second), WithPartitionLease(2 * time.Second)}},
		"zero poll":       {c, "CS", testMapper, []CaptureOption{WithCapturePollInterval(0)}},
		"zero batch":      {c, "CS", testMapper, []CaptureOption{WithCaptureBatchSize(0)}},
		"unknown policy":  {c, "CS", testMapper, []CaptureOption{WithConflictPolicy(7)}},
		"long capture id": {c, "CS", testMapper, []CaptureOption{WithCaptureID(strings.Repeat("x", 65))}},
		"negative max":    {c, "CS", testMapper, []CaptureOption{WithMaxPartitions(-1)}},
		"nil logger":      {c, "CS", testMapper, []CaptureOption{WithCaptureLogger(nil)}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := q.NewCapture(tc.client, tc.stream, tc.mapper, tc.opts...)
			require.ErrorIs(t, err, ErrInvalidConfig)
		})
	}
	capt, err := q.NewCapture(c, "CS", testMapper, WithCaptureID("capture-1"))
	require.NoError(t, err)
	require.Equal(t, "capture-1", capt.ID())
}

func TestCaptureRunTwiceAtOnceIsRefused(t *testing.T) {
	c, start := captureDatabase(t)
	q, err := New(c)
	require.NoError(t, err)
	capt := fastCapture(t, q, c, start)
	stop := runCapture(t, capt)
	waitFor(t, time.Minute, "the first Run to record the partitions", func() bool {
		return len(checkpointRows(t, c, ddl.DefaultCaptureTable, ordersStream)) > 1
	})
	err = capt.Run(context.Background())
	require.Error(t, err)
	require.Contains(t, err.Error(), "already running")
	require.Positive(t, captureGoroutines(), "the leak check sees a running capture")
	require.ErrorIs(t, stop(), context.Canceled)
	waitFor(t, 10*time.Second, "the capture's goroutines to end", func() bool { return captureGoroutines() == 0 })
	var nilCtx context.Context
	require.Error(t, capt.Run(nilCtx), "a nil context")
}

// captureGoroutines counts the goroutines running Capture code.
func captureGoroutines() int { return testutil.Goroutines("queue.(*Capture)") }

func TestCaptureRunReportsWhatItCannotRetry(t *testing.T) {
	c, start := captureDatabase(t)
	q, err := New(c)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for name, tc := range map[string]struct {
		stream string
		opts   []CaptureOption
		says   string
	}{
		"no such stream":          {"Missing_CS", []CaptureOption{WithStartTimestamp(start)}, "Missing_CS"},
		"no checkpoint table":     {ordersStream, []CaptureOption{WithStartTimestamp(start), WithCheckpointTable("NoSuchTable")}, "NoSuchTable"},
		"start before the stream": {ordersStream, []CaptureOption{WithStartTimestamp(start.Add(-time.Hour))}, "too far in the past"},
		"start a year ahead":      {ordersStream, []CaptureOption{WithStartTimestamp(start.Add(24 * 365 * time.Hour))}, "too far in the future"},
	} {
		t.Run(name, func(t *testing.T) {
			capt, err := q.NewCapture(c, tc.stream, testMapper, tc.opts...)
			require.NoError(t, err)
			err = capt.Run(ctx)
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.says)
			require.NoError(t, ctx.Err(), "Run returned at once, without waiting for its context")
		})
	}
}
