//go:build go1.25

package queue

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/spanmutex/spanmutex"
)

// faultyCapture is a Capture's store whose calls fail as told: a query,
// a checkpoint, or a listing of the partitions answers err. It counts each
// kind of call. Counting stops the Run (cancel) past limit calls, so that a
// loop with no pause ends too, inside a synctest bubble where it would
// never let virtual time move.
type faultyCapture struct {
	captureStore
	queryErr, commitErr, listErr error
	queries, commits, lists      atomic.Int64
	claims                       atomic.Int64
	limit                        int64
	cancel                       context.CancelFunc
}

func (f *faultyCapture) over(n int64) {
	if f.limit > 0 && n > f.limit {
		f.cancel()
	}
}

func (f *faultyCapture) query(ctx context.Context, start time.Time, end *time.Time, token *string, fn func(csRecord) error) error {
	f.over(f.queries.Add(1))
	if f.queryErr != nil {
		return f.queryErr
	}
	return f.captureStore.query(ctx, start, end, token, fn)
}

func (f *faultyCapture) commit(ctx context.Context, cp captureCheckpoint) (int, error) {
	f.over(f.commits.Add(1))
	if f.commitErr != nil {
		return 0, f.commitErr
	}
	return f.captureStore.commit(ctx, cp)
}

func (f *faultyCapture) runnable(ctx context.Context) ([]capturePartition, error) {
	f.over(f.lists.Add(1))
	if f.listErr != nil {
		return nil, f.listErr
	}
	return f.captureStore.runnable(ctx)
}

func (f *faultyCapture) claim(ctx context.Context, token string) (capturePartition, bool, error) {
	f.claims.Add(1)
	return f.captureStore.claim(ctx, token)
}

// A partition whose query keeps failing is retried after a backoff, not at
// once, on the emulator: one Run of a second made 172,000 to 191,000
// list-claim-query cycles before, with the query failing Unavailable or
// ResourceExhausted.
func TestCaptureFailingQueryBacksOffOnTheEmulator(t *testing.T) {
	for _, code := range []codes.Code{codes.Unavailable, codes.ResourceExhausted} {
		t.Run(code.String(), func(t *testing.T) {
			c, start := captureDatabase(t)
			q, err := New(c)
			require.NoError(t, err)
			capt := fastCapture(t, q, c, start)
			const window = time.Second
			ctx, cancel := context.WithTimeout(context.Background(), window)
			defer cancel()
			f := &faultyCapture{captureStore: capt.store, limit: 100_000, cancel: cancel,
				queryErr: spanner.ToSpannerError(status.Error(code, "injected"))}
			capt.store = f
			err = capt.Run(ctx)
			t.Logf("one Run of %v: %d queries, %d claims, %d listings; Run: %v", window, f.queries.Load(), f.claims.Load(), f.lists.Load(), err)
			assert.ErrorIs(t, err, context.DeadlineExceeded)
			// Backoff from 100 ms (randomised by half, growing 1.6 times):
			// at most about a dozen tries in a second.
			assert.LessOrEqual(t, f.queries.Load(), int64(15), "queries in %v", window)
			assert.LessOrEqual(t, f.claims.Load(), int64(2), "the partition is kept while its query is retried")
		})
	}
}

// simpleCaptureStore is a store of one partition that never ends: its
// query waits until end, the rest succeeds.
type simpleCaptureStore struct{ captureStore }

func (simpleCaptureStore) ensureRoot(context.Context) error { return nil }
func (simpleCaptureStore) spannerNow(context.Context, string) (time.Time, error) {
	return time.Now(), nil
}
func (simpleCaptureStore) commit(context.Context, captureCheckpoint) (int, error) { return 0, nil }
func (simpleCaptureStore) release(context.Context)                                {}
func (simpleCaptureStore) runnable(context.Context) ([]capturePartition, error) {
	return []capturePartition{{token: "p1", resume: time.Now()}}, nil
}
func (simpleCaptureStore) claim(_ context.Context, token string) (capturePartition, bool, error) {
	return capturePartition{token: token, resume: time.Now()}, true, nil
}
func (simpleCaptureStore) query(ctx context.Context, _ time.Time, end *time.Time, _ *string, _ func(csRecord) error) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Until(*end)):
		return nil
	}
}

// runFaulty runs a Capture over f (wrapping a simpleCaptureStore) in a
// synctest bubble for at most a virtual minute, and returns Run's error and
// how long it ran.
func runFaulty(t *testing.T, f *faultyCapture, opts ...CaptureOption) (error, time.Duration) {
	t.Helper()
	var (
		err  error
		took time.Duration
	)
	synctest.Test(t, func(t *testing.T) {
		cfg := captureConfig{window: 100 * time.Millisecond, heartbeat: time.Second, lease: 3 * time.Second,
			poll: 100 * time.Millisecond, batch: 10, owner: "me", maxFails: DefaultCaptureMaxFailures}
		cfg.logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		for _, o := range opts {
			o(&cfg)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		f.captureStore, f.cancel, f.limit = simpleCaptureStore{}, cancel, 10_000
		c := &Capture{q: &Queue{}, stream: "S", cfg: cfg, store: f}
		began := time.Now()
		err = c.Run(ctx)
		took = time.Since(began)
	})
	return err, took
}

// Each loop of a Run counts its failed calls: the failure limit ends Run
// with an error matching spanmutex.ErrOutage and the last failure, after
// backing off between the tries (about 8 virtual seconds for ten).
func TestCaptureFailuresInARowEndRun(t *testing.T) {
	unavailable := spanner.ToSpannerError(status.Error(codes.Unavailable, "injected"))
	for _, tc := range []struct {
		name  string
		f     *faultyCapture
		calls func(f *faultyCapture) int64
	}{
		{"query", &faultyCapture{queryErr: unavailable}, func(f *faultyCapture) int64 { return f.queries.Load() }},
		{"checkpoint", &faultyCapture{commitErr: unavailable}, func(f *faultyCapture) int64 { return f.commits.Load() }},
		{"listing", &faultyCapture{listErr: unavailable}, func(f *faultyCapture) int64 { return f.lists.Load() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err, took := runFaulty(t, tc.f, WithCaptureMaxFailures(DefaultCaptureMaxFailures))
			t.Logf("%d failed calls in %v; Run: %v", tc.calls(tc.f), took, err)
			require.ErrorIs(t, err, spanmutex.ErrOutage)
			assert.Equal(t, spanner.ErrCode(err), codes.Unavailable, "the last failure is wrapped")
			assert.Equal(t, int64(DefaultCaptureMaxFailures), tc.calls(tc.f), "calls before giving up")
			assert.Greater(t, took, 2*time.Second, "failed calls backed off")
		})
	}
}

// An error that is not an RPC's is not retried: a retry would meet it
// again. It ends Run at once.
func TestCaptureNonRPCErrorEndsRun(t *testing.T) {
	bad := errors.New("queue: something of our own went wrong")
	f := &faultyCapture{queryErr: bad}
	err, took := runFaulty(t, f)
	t.Logf("%d queries in %v; Run: %v", f.queries.Load(), took, err)
	require.ErrorIs(t, err, bad)
	assert.Equal(t, int64(1), f.queries.Load())
	assert.False(t, captureRetryable(context.Background(), bad))
	assert.True(t, captureRetryable(context.Background(), spanner.ToSpannerError(status.Error(codes.Unknown, "RPC outcome unknown"))))
}

// readSkewed reads a partition whose checkpoint is resume from now for 10
// virtual seconds (at most 1,000 queries), Spanner's clock being the
// bubble's and skew what Run measured of the local one; call it in a
// synctest bubble. It returns the store, the Capture, how long it read and
// readPartition's error.
func readSkewed(skew, resume time.Duration) (*faultyCapture, *Capture, time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	f := &faultyCapture{captureStore: simpleCaptureStore{}, limit: 1_000, cancel: cancel}
	c := &Capture{q: &Queue{}, stream: "S", store: f, cfg: captureConfig{window: 100 * time.Millisecond,
		heartbeat: time.Second, lease: 3 * time.Second, poll: 100 * time.Millisecond, batch: 10, owner: "me",
		logger: slog.New(slog.NewTextHandler(io.Discard, nil))}}
	began := time.Now()
	err := c.readPartition(ctx, capturePartition{token: "p1", resume: began.Add(resume)}, skew)
	return f, c, time.Since(began), err
}

// A local clock stepped back after Run measured its skew, by more than the
// query window, makes a query's end already past: the query ends at once.
// The partition measures the skew again instead of reading one past window
// after another, back to back: a clock stepped back an hour, with a
// checkpoint two hours old, made 36,000 queries in no time before.
func TestCaptureClockSteppedBackDoesNotPollWithoutPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The local clock, as Run measured it, an hour behind.
		f, c, took, err := readSkewed(-time.Hour, -2*time.Hour)
		t.Logf("%d queries in %v; readPartition: %v", f.queries.Load(), took, err)
		require.ErrorIs(t, err, context.DeadlineExceeded, "read until ctx ended, not stopped by the query count")
		// About one query per window once the skew is right.
		assert.LessOrEqual(t, f.queries.Load(), int64(took/c.cfg.window)+3)
	})
}

// A local clock stepped forward after Run measured its skew, by more than
// the lease, made every query end that much past Spanner's now: the query
// ran that long, the partition wrote no checkpoint meanwhile, and its lease
// lapsed (another instance took it over, and ours lost its work), query
// after query. A query that runs past its end by a quarter lease on the
// monotonic clock is cut short and the skew measured again: the partition
// goes on a query per window, with a checkpoint every quarter lease.
func TestCaptureClockSteppedForwardKeepsTheLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The local clock, as Run measured it, an hour ahead.
		f, c, took, err := readSkewed(time.Hour, 0)
		t.Logf("%d queries, %d checkpoints in %v; readPartition: %v", f.queries.Load(), f.commits.Load(), took, err)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		// A checkpoint every quarter lease, from the first within a lease.
		assert.GreaterOrEqual(t, f.commits.Load(), int64(took/(c.cfg.lease/4))-2, "checkpoints: the lease was kept")
		assert.GreaterOrEqual(t, f.queries.Load(), int64(took/c.cfg.window)/2, "about one query per window")
		assert.LessOrEqual(t, f.queries.Load(), int64(took/c.cfg.window)+3)
	})
}
