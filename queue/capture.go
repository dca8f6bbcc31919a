package queue

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/cenkalti/backoff/v4"
	"github.com/google/uuid"

	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/internal/spanerr"
)

// Mapper turns one changed row into the requests to enqueue for it: none,
// one or several. It must be a deterministic function of the Change (no
// clock, no random ids, no reads of the current data), because a change may
// be read more than once and its requests are recognised by ids derived from
// it. The requests' Kind, Resource and Payload are used; ID is set by the
// capture (CaptureRequestID) unless the Mapper sets one itself, which must
// then be just as deterministic. An error stops Run with a *MapperError.
type Mapper func(ch Change) ([]Request, error)

// ConflictPolicy says what the capture does with a request the queue would
// refuse: a create of a resource that already has one, or an update of a
// resource that has no create.
type ConflictPolicy int

const (
	// ConflictAdapt (the default) enqueues a create of a resource that
	// already has one as an update, and an update of a resource with no
	// create as its create: the captured table's first change to a row may
	// be an UPDATE (the row predates the stream) or a second INSERT (after a
	// DELETE), and the handler sees the data either way.
	ConflictAdapt ConflictPolicy = iota
	// ConflictRecordError enqueues such a request in status error, with a
	// LastError that says why, so that it is visible (Get, List, Counts)
	// but never handled. A refused create is stored with kind update, as
	// the queue allows one create per resource.
	ConflictRecordError
)

// Defaults of a Capture.
const (
	// DefaultCaptureWindow is how far each query of a partition reads
	// (its end_timestamp), and so about the capture's latency.
	DefaultCaptureWindow = 2 * time.Second
	// DefaultCaptureHeartbeat is the heartbeat_milliseconds of the queries.
	DefaultCaptureHeartbeat = time.Second
	// DefaultCaptureLease is how long a partition stays with an instance
	// that writes no checkpoint before another instance may take it over.
	DefaultCaptureLease = 30 * time.Second
	// DefaultCapturePoll is how often Run looks for partitions it may read
	// (children of partitions others finished, expired leases).
	DefaultCapturePoll = time.Second
	// DefaultCaptureBatch is how many data change records at most are
	// written in one transaction with their checkpoint.
	DefaultCaptureBatch = 100
)

// CaptureOption configures a Capture.
type CaptureOption func(*captureConfig)

type captureConfig struct {
	table     string
	start     time.Time
	window    time.Duration
	heartbeat time.Duration
	lease     time.Duration
	poll      time.Duration
	batch     int
	conflict  ConflictPolicy
	owner     string
	maxParts  int
	maxFails  int
	logger    *slog.Logger
	// backOff, set only by the simulation (nil otherwise), makes the
	// backoff of the loop what, drawn from its seed (newAttempts).
	backOff func(what string) backoff.BackOff
	// afterFunc, set only by the simulation (nil: time.AfterFunc), runs
	// the cut-off of the partition what's query in a turn of its own
	// (cutAfter).
	afterFunc func(what string, d time.Duration, f func()) (stop func() bool)
}

// WithCheckpointTable names the checkpoint table (default
// ddl.DefaultCaptureTable). Several streams may share one table.
func WithCheckpointTable(name string) CaptureOption {
	return func(c *captureConfig) { c.table = name }
}

// WithStartTimestamp sets where the first Run starts reading the stream when
// the checkpoint table has nothing for it yet: a time at or after the
// stream's creation and within its retention period. By default the first
// Run starts at Spanner's current time, and changes committed earlier are not
// captured. Once a stream has checkpoints, it is ignored.
func WithStartTimestamp(t time.Time) CaptureOption {
	return func(c *captureConfig) { c.start = t }
}

// WithQueryWindow sets how much of a partition each query reads (default
// DefaultCaptureWindow; 100ms to 1h).
func WithQueryWindow(d time.Duration) CaptureOption {
	return func(c *captureConfig) { c.window = d }
}

// WithHeartbeat sets the queries' heartbeat interval (default
// DefaultCaptureHeartbeat; 1s to 5m).
func WithHeartbeat(d time.Duration) CaptureOption {
	return func(c *captureConfig) { c.heartbeat = d }
}

// WithPartitionLease sets the lease this instance declares on the
// partitions it claims (default DefaultCaptureLease; at least twice the
// query window plus the heartbeat): no other instance takes one over
// before it has passed without a checkpoint, by Spanner's clock, whatever
// that instance's own lease. It judges only rows that declare none.
func WithPartitionLease(d time.Duration) CaptureOption {
	return func(c *captureConfig) { c.lease = d }
}

// WithCapturePollInterval sets how often Run looks for partitions to read (default
// DefaultCapturePoll; 10ms to 1m).
func WithCapturePollInterval(d time.Duration) CaptureOption {
	return func(c *captureConfig) { c.poll = d }
}

// WithCaptureBatchSize sets how many data change records at most go into one
// transaction (default DefaultCaptureBatch; 1 to 10000). Keep the requests
// of a batch within Spanner's limit on mutations per commit.
func WithCaptureBatchSize(n int) CaptureOption {
	return func(c *captureConfig) { c.batch = n }
}

// WithMaxPartitions sets how many partitions this instance reads at once
// (default 0: no limit). Without a limit, an instance takes every partition
// it finds free, and a second instance stands by, taking over what the
// first releases or lets expire; with a limit, instances share the stream.
// A partition left over waits until an instance has room.
func WithMaxPartitions(n int) CaptureOption {
	return func(c *captureConfig) { c.maxParts = n }
}

// WithCaptureMaxFailures sets how many Spanner calls of one loop of a Run
// may fail in a row (default DefaultCaptureMaxFailures; 1 to 1000): Run's
// start, its listing and claiming of partitions, and each partition's
// queries and checkpoints count apart. Each failure is retried after a
// backoff; the last ends Run with an error matching spanmutex.ErrOutage.
func WithCaptureMaxFailures(n int) CaptureOption {
	return func(c *captureConfig) { c.maxFails = n }
}

// WithCaptureLogger sets where the capture logs partitions claimed,
// finished and lost, and the errors it retries (default: nowhere).
func WithCaptureLogger(l *slog.Logger) CaptureOption {
	return func(c *captureConfig) { c.logger = l }
}

// WithConflictPolicy sets what happens to requests the queue would refuse
// (default ConflictAdapt).
func WithConflictPolicy(p ConflictPolicy) CaptureOption {
	return func(c *captureConfig) { c.conflict = p }
}

// WithCaptureID names this instance in the checkpoint table (default: a
// random UUID). A process that restarts with the same name takes its
// partitions back at once instead of waiting for their leases to expire;
// two running instances must never share a name.
func WithCaptureID(id string) CaptureOption {
	return func(c *captureConfig) { c.owner = id }
}

// Capture turns the changes of a change stream into requests of a Queue,
// exactly once (see the package documentation). Make one with NewCapture
// and call Run; its methods are safe for concurrent use, but Run runs once
// at a time.
type Capture struct {
	q      *Queue
	client *spanner.Client
	stream string
	mapper Mapper
	cfg    captureConfig
	store  captureStore // spannerCapture{c}, but in the simulation

	running atomic.Bool
}

// NewCapture returns a Capture of the change stream named stream, read with
// client (a client of the queue's database: requests and checkpoints are
// written in one transaction), whose changes mapper turns into requests of
// q. Every error wraps ErrInvalidConfig.
func (q *Queue) NewCapture(client *spanner.Client, stream string, mapper Mapper, opts ...CaptureOption) (*Capture, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: NewCapture: nil *spanner.Client", ErrInvalidConfig)
	}
	if client.DatabaseName() != q.client.DatabaseName() {
		return nil, fmt.Errorf("%w: NewCapture: the client is of %s, the queue of %s: requests and checkpoints must share a database",
			ErrInvalidConfig, client.DatabaseName(), q.client.DatabaseName())
	}
	if err := ddl.ValidateTableName(stream); err != nil {
		return nil, fmt.Errorf("%w: NewCapture: stream: %v", ErrInvalidConfig, err)
	}
	if mapper == nil {
		return nil, fmt.Errorf("%w: NewCapture: nil Mapper", ErrInvalidConfig)
	}
	cfg := captureConfig{
		table: ddl.DefaultCaptureTable, window: DefaultCaptureWindow, heartbeat: DefaultCaptureHeartbeat,
		lease: DefaultCaptureLease, poll: DefaultCapturePoll, batch: DefaultCaptureBatch,
		maxFails: DefaultCaptureMaxFailures, logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: NewCapture: nil CaptureOption", ErrInvalidConfig)
		}
		o(&cfg)
	}
	if cfg.owner == "" {
		cfg.owner = uuid.NewString()
	}
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("%w: NewCapture: %v", ErrInvalidConfig, err)
	}
	c := &Capture{q: q, client: client, stream: stream, mapper: mapper, cfg: cfg}
	c.store = spannerCapture{c}
	return c, nil
}

func (c captureConfig) validate() error {
	if err := ddl.ValidateTableName(c.table); err != nil {
		return fmt.Errorf("WithCheckpointTable: %v", err)
	}
	switch {
	case c.window < 100*time.Millisecond || c.window > time.Hour:
		return fmt.Errorf("WithQueryWindow(%v): use 100ms to 1h", c.window)
	case c.heartbeat < time.Second || c.heartbeat > 5*time.Minute:
		return fmt.Errorf("WithHeartbeat(%v): use 1s to 5m", c.heartbeat)
	case c.lease < 2*c.window+c.heartbeat:
		return fmt.Errorf("WithPartitionLease(%v): use at least twice the query window plus the heartbeat (%v), or every partition would change hands while it is read",
			c.lease, 2*c.window+c.heartbeat)
	case c.poll < 10*time.Millisecond || c.poll > time.Minute:
		return fmt.Errorf("WithCapturePollInterval(%v): use 10ms to 1m", c.poll)
	case c.batch < 1 || c.batch > 10000:
		return fmt.Errorf("WithCaptureBatchSize(%d): use 1 to 10000", c.batch)
	case c.conflict != ConflictAdapt && c.conflict != ConflictRecordError:
		return fmt.Errorf("WithConflictPolicy(%d): use ConflictAdapt or ConflictRecordError", c.conflict)
	case c.logger == nil:
		return errors.New("WithCaptureLogger(nil): give a logger, or leave the option out to log nowhere")
	case c.maxFails < 1 || c.maxFails > 1000:
		return fmt.Errorf("WithCaptureMaxFailures(%d): use 1 to 1000", c.maxFails)
	case c.maxParts < 0:
		return fmt.Errorf("WithMaxPartitions(%d): use 0 (no limit) or more", c.maxParts)
	case len(c.owner) > 64:
		return fmt.Errorf("WithCaptureID: %d bytes; at most 64", len(c.owner))
	}
	return nil
}

// ID returns the name of this instance in the checkpoint table.
func (c *Capture) ID() string { return c.cfg.owner }

// errAlreadyRunning is returned by a second concurrent Run of one Capture.
var errAlreadyRunning = errors.New("queue: capture: Run is already running on this Capture; make another Capture to run a second instance")

// Run reads the stream and enqueues the requests of its changes until ctx is
// done, then releases the partitions it holds and returns ctx's error. It
// returns earlier with an error matching ErrMapper or ErrUnsupportedRecord,
// or with a Spanner error it cannot retry (a missing table or stream, a
// checkpoint older than the stream's retention). Transient Spanner errors
// are retried from the last checkpoint, after a backoff (100 ms doubling
// to 2 s, see WithCaptureMaxFailures); once a loop's calls have failed
// WithCaptureMaxFailures times in a row, Run returns an error matching
// spanmutex.ErrOutage. Whatever Run returns, the checkpoint table holds
// where each partition stands, and another Run resumes there.
//
// Its pace: Run lists the partitions it may claim every poll interval, and
// at once when a partition it read has finished (its children may be
// runnable); while listing or claiming fails, no sooner than its backoff.
// Each partition it reads makes one query per query window, and one
// checkpoint per batch, per window with records, or per quarter lease;
// a failed query or checkpoint is retried after its backoff, from the
// checkpoint, without giving the partition back.
func (c *Capture) Run(ctx context.Context) error {
	if ctx == nil {
		return errNilContext
	}
	if !c.running.CompareAndSwap(false, true) {
		return errAlreadyRunning
	}
	defer c.running.Store(false)

	skew, err := c.begin(ctx)
	if err != nil {
		return ctxErrOr(ctx, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r := &captureRun{c: c, ctx: ctx, cancel: cancel, skew: skew, active: map[string]bool{},
		done: make(chan partitionResult), log: c.cfg.logger.With("stream", c.stream, "capture", c.cfg.owner),
		listing: c.newAttempts("listing and claiming partitions")}
	next := time.Now() // when Run lists the partitions next
	for {
		t := time.NewTimer(time.Until(next))
		select {
		case res := <-r.done:
			t.Stop()
			if err := r.ended(res); err != nil {
				return r.stop(err)
			}
			if r.listing.n > 0 {
				continue // listing fails: wait out its backoff (next)
			}
			// A finished partition may have made children runnable: look now.
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			if err := r.stop(nil); err != nil {
				return err
			}
			return ctx.Err()
		}
		wait, err := r.startRunnable()
		if err != nil {
			return r.stop(err)
		}
		next = time.Now().Add(wait)
	}
}

// begin checks the table, records the stream's first partitions if it has
// none, and returns how far the local clock is behind Spanner's
// (skewOnce). A transient error is retried after a backoff (captureAttempts),
// up to the failure limit.
func (c *Capture) begin(ctx context.Context) (skew time.Duration, err error) {
	fails := c.newAttempts("starting")
	for {
		if err = c.store.ensureRoot(ctx); err == nil {
			if skew, err = c.skewOnce(ctx, "run"); err == nil {
				return skew, nil
			}
		}
		if ctx.Err() != nil {
			return 0, err
		}
		c.cfg.logger.Warn("capture: starting failed", "stream", c.stream, "capture", c.cfg.owner, "err", err)
		if err := fails.failed(ctx, err); err != nil {
			return 0, err
		}
	}
}

// skewOnce measures for who ("run", or a partition's token), once per Run
// (and again by a partition whose query ended at once, its end already
// past, or ran a quarter lease past it: see measureSkew), how far the local
// clock is behind Spanner's, so that a query's end_timestamp is about one window after
// Spanner's now even when the local clock is off (it only paces queries).
// Spanner read its clock between the call and its answer, so the clock
// less the local time of the answer never makes a query run longer than
// its window: an overestimate would, and a query longer than the lease
// loses its partition before its first checkpoint. A round trip longer
// than a window (a pause, a slow network) is measured again, up to three
// times; the last is taken as it is.
func (c *Capture) skewOnce(ctx context.Context, who string) (time.Duration, error) {
	for try := 1; ; try++ {
		sent := time.Now()
		now, err := c.store.spannerNow(ctx, who)
		if err != nil {
			return 0, err
		}
		answered := time.Now()
		if answered.Sub(sent) <= c.cfg.window || try == 3 {
			return now.Sub(answered), nil
		}
	}
}

// captureRun is one Run of a Capture: the partitions it reads.
type captureRun struct {
	c      *Capture
	ctx    context.Context
	cancel context.CancelFunc
	skew   time.Duration // Spanner's clock less the local clock
	wg     sync.WaitGroup
	active map[string]bool // the tokens of the partitions being read
	done   chan partitionResult
	log    *slog.Logger
	// listing counts and paces the failures of startRunnable's calls.
	listing *captureAttempts
}

// partitionResult is how reading one partition ended.
type partitionResult struct {
	token string
	err   error
}

// startRunnable claims the runnable partitions not read yet, up to the
// limit, and starts reading each. It returns how long Run waits before it
// lists again (the poll interval; after a failed call, the longer of it
// and the backoff), or an error Run must end with: one not worth a retry,
// or the last of too many failures in a row.
func (r *captureRun) startRunnable() (time.Duration, error) {
	failed, err := r.claimRunnable()
	if failed == nil {
		r.listing.ok()
		return r.c.cfg.poll, err
	}
	if r.ctx.Err() == nil {
		r.log.Warn("capture: listing or claiming partitions failed; retrying", "err", failed)
	}
	wait, err := r.listing.count(r.ctx, failed)
	return max(wait, r.c.cfg.poll), err
}

// claimRunnable is startRunnable's work: it returns the last call that
// failed, if any, and an error Run must end with.
func (r *captureRun) claimRunnable() (failed, end error) {
	c := r.c
	runnable, err := c.store.runnable(r.ctx)
	if err != nil && !captureRetryable(r.ctx, err) {
		return nil, err
	}
	failed = err
	for _, p := range runnable {
		if r.active[p.token] {
			continue
		}
		if c.cfg.maxParts > 0 && len(r.active) >= c.cfg.maxParts {
			break
		}
		p, claimed, err := c.store.claim(r.ctx, p.token)
		if err != nil && !captureRetryable(r.ctx, err) {
			return nil, err
		}
		if err != nil {
			failed = err
		}
		if !claimed {
			continue
		}
		r.log.Debug("capture: partition claimed", "partition", shortToken(p.token), "resume", p.resume)
		r.active[p.token] = true
		r.wg.Add(1)
		go func(p capturePartition) {
			defer r.wg.Done()
			// Run's loop, or stop, always receives.
			r.done <- partitionResult{p.token, c.readPartition(r.ctx, p, r.skew)}
		}(p)
	}
	return failed, nil
}

// ended records how reading a partition ended; it returns an error Run
// must end with.
func (r *captureRun) ended(res partitionResult) error {
	delete(r.active, res.token)
	switch {
	case res.err == nil:
		r.log.Debug("capture: partition finished", "partition", shortToken(res.token))
	case errors.Is(res.err, errPartitionLost):
		r.log.Info("capture: partition taken over by another instance", "partition", shortToken(res.token))
	case !captureRetryable(r.ctx, res.err) || isOutage(res.err):
		return res.err
	case r.ctx.Err() == nil:
		r.log.Warn("capture: reading a partition failed; resuming from its checkpoint", "partition", shortToken(res.token), "err", res.err)
	}
	return nil
}

// stop ends the Run: it cancels the partitions' reads, waits for them, gives
// back the partitions' claims, and returns err.
func (r *captureRun) stop(err error) error {
	r.cancel()
	// Drain the partitions' results so that they all return. Stopping:
	// their errors are cancellations, or would be met again by the next
	// Run at the same checkpoint.
	go func() { r.wg.Wait(); close(r.done) }()
	for range r.done {
	}
	r.c.store.release(context.WithoutCancel(r.ctx))
	return err
}

// shortToken abbreviates a partition token for logs.
func shortToken(tok string) string {
	if len(tok) > 16 {
		return tok[:16] + "…"
	}
	return tok
}

// ctxErrOr returns ctx's error if ctx has ended, and err otherwise: a Run
// stopped before it reads the partitions returns ctx's error too, not the
// Spanner error (code Canceled) of the call its ctx cut short.
func ctxErrOr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// captureRetryable reports whether err is worth retrying from the checkpoint.
func captureRetryable(ctx context.Context, err error) bool {
	if err == nil || ctx.Err() != nil {
		return true // nil, or Run is stopping anyway
	}
	var table *captureTableError
	if errors.Is(err, ErrMapper) || errors.Is(err, ErrUnsupportedRecord) || errors.As(err, &table) || isOutage(err) {
		return false
	}
	// A step reads its checkpoint again, so a retry is harmless: of a
	// transaction Spanner ended behind the client's back (the emulator, on
	// one multiplexed session, does it often), and of an RPC whose outcome
	// is unknown (code Unknown or Internal). An error that is not an RPC's
	// (spanner.ErrCode calls it Unknown too) came from this code or the
	// client, and a retry meets it again: it ends Run.
	return spanerr.Retryable(err)
}
