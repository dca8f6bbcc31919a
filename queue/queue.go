package queue

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/google/uuid"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"

	"github.com/spanmutex/spanmutex"
	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/internal/spanerr"
	"github.com/spanmutex/spanmutex/internal/sqldialect"
)

// Queue is a request queue stored in one Spanner table (see ddl.RequestsTable).
// It is safe for concurrent use. Workers made from a Queue are woken at once
// by that Queue's Enqueue calls (an in-process notification); work enqueued
// by other processes is found by polling.
type Queue struct {
	client *spanner.Client
	cfg    config
	tel    *telemetry
	// dialect is the database's SQL dialect, of the statements the queue
	// issues: given by WithDialect or read on first use.
	dialect *sqldialect.Of

	mu   sync.Mutex
	wake chan struct{} // closed and replaced by Notify
}

// Option configures a Queue.
type Option func(*config)

type config struct {
	table      string
	maxPayload int
	lockOpts   []spanmutex.LockOption // LeaseOptions only (WithLockOptions, WithTracerProvider, WithMeterProvider)
	dialect    *ddl.Dialect           // nil: read from the database
	// telemetry.go: nil for the global providers.
	tracerProvider trace.TracerProvider
	meterProvider  metric.MeterProvider
}

// WithTable names the requests table (default ddl.DefaultRequestsTable).
func WithTable(name string) Option { return func(c *config) { c.table = name } }

// WithMaxPayload sets the largest payload Enqueue accepts, in bytes (default
// DefaultMaxPayload; at most 10 MiB, Spanner's limit on one cell).
func WithMaxPayload(n int) Option { return func(c *config) { c.maxPayload = n } }

// WithDialect says which SQL dialect the database was created with
// (ddl.GoogleSQL or ddl.PostgreSQL), so that the queue, its workers' locks
// and its capture need not read it; without it, it is read from the
// database once, by the first call that needs it, for all of them.
func WithDialect(d ddl.Dialect) Option {
	return func(c *config) { c.dialect = &d }
}

// WithLockOptions passes options to the per-resource spanmutex locks that
// workers hold while they handle a resource: the mutex table (WithTable),
// the lease after which a dead worker's claim is taken over
// (WithLease), the logger, and so on. They are LeaseOptions: each
// Worker sets its locks' owner and Scope itself. New validates them as
// spanmutex.NewLock does.
func WithLockOptions(opts ...spanmutex.LeaseOption) Option {
	return func(c *config) {
		for _, o := range opts {
			c.lockOpts = append(c.lockOpts, o)
		}
	}
}

// New returns the queue stored in client's database. Every error wraps
// ErrInvalidConfig.
func New(client *spanner.Client, opts ...Option) (*Queue, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: nil *spanner.Client: open one with spanner.NewClient", ErrInvalidConfig)
	}
	cfg := config{table: ddl.DefaultRequestsTable, maxPayload: DefaultMaxPayload}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: nil Option", ErrInvalidConfig)
		}
		o(&cfg)
	}
	if err := ddl.ValidateTableName(cfg.table); err != nil {
		return nil, fmt.Errorf("%w: WithTable: %v", ErrInvalidConfig, err)
	}
	if cfg.maxPayload < 0 || cfg.maxPayload > maxPayloadLimit {
		return nil, fmt.Errorf("%w: WithMaxPayload(%d): use 0 to %d bytes", ErrInvalidConfig, cfg.maxPayload, maxPayloadLimit)
	}
	of := sqldialect.For(client)
	if cfg.dialect != nil {
		if !cfg.dialect.Valid() {
			return nil, fmt.Errorf("%w: WithDialect(%v): use ddl.GoogleSQL or ddl.PostgreSQL", ErrInvalidConfig, *cfg.dialect)
		}
		of = sqldialect.Known(*cfg.dialect) // the workers' locks' too (tenure)
	}
	// Check the lock options now, so that a worker never fails on them later.
	if err := checkLockOptions(client, cfg.lockOpts); err != nil {
		return nil, err
	}
	tel, err := newTelemetry(&cfg)
	if err != nil {
		return nil, fmt.Errorf("queue: make the OpenTelemetry instruments: %w", err)
	}
	return &Queue{client: client, cfg: cfg, wake: make(chan struct{}), tel: tel, dialect: of}, nil
}

// checkLockOptions returns the error spanmutex.NewLock gives for opts; it
// makes a Lock it drops, which does no I/O.
func checkLockOptions(client *spanner.Client, opts []spanmutex.LockOption) error {
	if _, err := spanmutex.NewLock(client, "queue-lock-options", opts...); err != nil {
		return fmt.Errorf("%w: WithLockOptions: %w", ErrInvalidConfig, err)
	}
	return nil
}

// Table returns the name of the requests table.
func (q *Queue) Table() string { return q.cfg.table }

// Notify wakes this Queue's idle workers at once. Enqueue calls it after its
// commit; call it after committing a transaction in which you called
// EnqueueTx, or leave the workers to find the requests at their next poll.
func (q *Queue) Notify() {
	q.mu.Lock()
	close(q.wake)
	q.wake = make(chan struct{})
	q.mu.Unlock()
}

// woken returns a channel that is closed at the next Notify.
func (q *Queue) woken() <-chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.wake
}

// Enqueue adds requests to the queue in one read-write transaction, all or
// none, and returns their ids in order. A create for a resource that already
// has one returns a *DuplicateCreateError; an update of a resource with no
// create (committed, or earlier in reqs) returns ErrNoCreate; a malformed
// request returns an *InvalidRequestError; a caller-chosen id that exists
// already returns ErrDuplicateID. In each case nothing is written.
// A commit whose outcome is unknown is settled by reading the ids back.
func (q *Queue) Enqueue(ctx context.Context, reqs ...Request) ([]string, error) {
	if ctx == nil {
		return nil, errNilContext
	}
	prepared, err := q.prepare(reqs)
	if err != nil {
		return nil, err
	}
	_, err = q.client.ReadWriteTransactionWithOptions(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		return q.insert(ctx, txn, prepared)
	}, spanner.TransactionOptions{TransactionTag: tagEnqueue})
	if err != nil && spanerr.UnknownOutcome(err) {
		// The commit may have landed: read our ids back to know.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		landed, rerr := q.existingIDs(rctx, q.client.Single(), ids(prepared))
		cancel()
		if rerr == nil && len(landed) == len(prepared) {
			err = nil
		}
	}
	if err != nil {
		return nil, q.enqueueError(ctx, prepared, err)
	}
	q.Notify()
	return ids(prepared), nil
}

// EnqueueTx adds requests inside the caller's own read-write transaction, so
// that they exist if and only if the caller's transaction commits: no lost
// requests, no phantom ones. It checks as Enqueue does, with reads in txn,
// and buffers the inserts; it returns the ids. The client may run the
// caller's transaction function more than once: call EnqueueTx in it each
// time. After the commit, call Notify to wake this process's workers. A
// caller-chosen id that already exists makes the caller's commit fail with
// Spanner's AlreadyExists.
func (q *Queue) EnqueueTx(ctx context.Context, txn *spanner.ReadWriteTransaction, reqs ...Request) ([]string, error) {
	if ctx == nil {
		return nil, errNilContext
	}
	if txn == nil {
		return nil, fmt.Errorf("%w: nil transaction: call EnqueueTx inside client.ReadWriteTransaction", ErrInvalidConfig)
	}
	prepared, err := q.prepare(reqs)
	if err != nil {
		return nil, err
	}
	if err := q.insert(ctx, txn, prepared); err != nil {
		return nil, err
	}
	return ids(prepared), nil
}

// prepare validates reqs and gives each an id, before any transaction, so
// that a retried transaction writes the same ids.
func (q *Queue) prepare(reqs []Request) ([]Request, error) {
	if len(reqs) == 0 {
		return nil, &InvalidRequestError{Index: -1, Reason: "no requests given"}
	}
	out := make([]Request, len(reqs))
	seen := map[string]bool{}
	for i, r := range reqs {
		if reason := r.validate(q.cfg.maxPayload); reason != "" {
			return nil, &InvalidRequestError{Index: i, Reason: reason}
		}
		if r.ID == "" {
			r.ID = uuid.NewString()
		}
		if seen[r.ID] {
			return nil, &InvalidRequestError{Index: i, Reason: fmt.Sprintf("id %q appears twice", r.ID)}
		}
		seen[r.ID] = true
		out[i] = r
	}
	return out, nil
}

// insert checks reqs against the creates already committed, with a read in
// txn (whose locks make two concurrent creates of one resource serialize),
// and buffers their inserts.
func (q *Queue) insert(ctx context.Context, txn *spanner.ReadWriteTransaction, reqs []Request) error {
	var resources []string
	for _, r := range reqs {
		resources = append(resources, r.Resource)
	}
	created, err := q.createdAmong(ctx, txn, resources)
	if err != nil {
		return err
	}
	for _, r := range reqs {
		switch r.Kind {
		case KindCreate:
			if created[r.Resource] {
				return &DuplicateCreateError{Resource: r.Resource}
			}
			created[r.Resource] = true
		case KindUpdate:
			if !created[r.Resource] {
				return fmt.Errorf("%w: resource %q: enqueue its create first (or in the same call); nothing was enqueued", ErrNoCreate, r.Resource)
			}
		}
	}
	ms := make([]*spanner.Mutation, len(reqs))
	for i, r := range reqs {
		ms[i] = spanner.InsertMap(q.cfg.table, map[string]any{
			"RequestID":    r.ID,
			"Status":       string(StatusNew),
			"Kind":         string(r.Kind),
			"Resource":     r.Resource,
			"Payload":      r.Payload,
			"Attempts":     int64(0),
			"CreatedAt":    spanner.CommitTimestamp,
			"PendingSince": spanner.CommitTimestamp,
		})
	}
	return txn.BufferWrite(ms)
}

// createdAmong returns which of resources have a create request, read with
// r (a read-write transaction, whose read locks make two concurrent creates
// of one resource serialize, or a single-use strong read) through the
// unique index on creates, by key (the emulator answers a query by scanning
// the whole table; a read by key it answers from the index).
func (q *Queue) createdAmong(ctx context.Context, r rowReader, resources []string) (map[string]bool, error) {
	created := map[string]bool{}
	err := r.ReadUsingIndex(ctx, q.cfg.table, q.cfg.table+"OneCreatePerResource", keysOf(resources), []string{"CreateOf"}).Do(func(row *spanner.Row) error {
		var res string
		if err := row.Columns(&res); err != nil {
			return err
		}
		created[res] = true
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("queue: read the creates of %d resources in table %s: %w", len(resources), q.cfg.table, err)
	}
	return created, nil
}

// existingIDs returns which of ids are in the table, read with r.
func (q *Queue) existingIDs(ctx context.Context, r rowReader, idList []string) (map[string]bool, error) {
	existing := map[string]bool{}
	err := r.Read(ctx, q.cfg.table, keysOf(idList), []string{"RequestID"}).Do(func(row *spanner.Row) error {
		var id string
		if err := row.Columns(&id); err != nil {
			return err
		}
		existing[id] = true
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("queue: look up %d request ids in table %s: %w", len(idList), q.cfg.table, err)
	}
	return existing, nil
}

// enqueueError names what Spanner refused. AlreadyExists means that a
// request id, or a create of one of the resources, was committed by someone
// else after our checks: a strong read tells which.
func (q *Queue) enqueueError(ctx context.Context, reqs []Request, err error) error {
	var dup *DuplicateCreateError
	if errors.As(err, &dup) || errors.Is(err, ErrNoCreate) || errors.Is(err, ErrInvalidRequest) {
		return err
	}
	if spanner.ErrCode(err) != codes.AlreadyExists {
		return fmt.Errorf("queue: enqueue: %w", err)
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if existing, rerr := q.existingIDs(rctx, q.client.Single(), ids(reqs)); rerr == nil {
		for _, r := range reqs {
			if existing[r.ID] {
				return fmt.Errorf("%w: %q; nothing was enqueued (a retry of an Enqueue that had committed finds its own requests: check with Get): %w", ErrDuplicateID, r.ID, err)
			}
		}
	}
	var creates []string
	for _, r := range reqs {
		if r.Kind == KindCreate {
			creates = append(creates, r.Resource)
		}
	}
	if created, rerr := q.createdAmong(rctx, q.client.Single(), creates); rerr == nil {
		for _, res := range creates {
			if created[res] {
				return &DuplicateCreateError{Resource: res, Err: err}
			}
		}
	}
	return fmt.Errorf("queue: enqueue: %w", err)
}

func ids(reqs []Request) []string {
	out := make([]string, len(reqs))
	for i, r := range reqs {
		out[i] = r.ID
	}
	return out
}

var errNilContext = errors.New("queue: nil context; pass context.Background() or a context with a deadline")
