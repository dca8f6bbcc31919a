package spanmutex

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"cloud.google.com/go/spanner"
	"google.golang.org/grpc/codes"

	"github.com/spanmutex/spanmutex/internal/sqldialect"
	"github.com/spanmutex/spanmutex/internal/textcut"
)

// claim is who is trying to acquire: the owner identity and a fresh random
// id for this acquisition, by which a commit of unknown outcome is recognised.
type claim struct {
	owner   string
	leaseID string
	// wakeAddr is where a Lock's waiter listens for wake-ups, if it does.
	wakeAddr string
	// session is the session a Lock holds through if it takes the lock
	// ("": none; it renews the lease itself).
	session string
	// startSession is the session's row if the acquisition starts the
	// session (session.next): a write that names the session inserts it.
	startSession *sessionRow
}

// spannerStore is the store on a Cloud Spanner table.
type spannerStore struct {
	client *spanner.Client
	table  string
	// dialect is the database's SQL dialect, of the statements this store
	// issues (dialect.go).
	dialect *sqldialect.Of
	// lease is the caller's own lease, the judge of rows and queue
	// entries written without a declared lease.
	lease time.Duration
	stats *storeStats
	// versioned: the Mutex has a version, so rows are read and written with
	// the Version column, which the table must then have.
	versioned bool
	// hasVersion: checkSchema found the Version column.
	hasVersion atomic.Bool
	// hasPermits: checkSchema found the Semaphore's columns (Permits in
	// both tables, Token in the queue).
	hasPermits atomic.Bool
	// hasQueue: checkSchema found the waiters' queue table, which a Mutex
	// uses only for its watchers (mutex_watch.go) and may lack.
	hasQueue atomic.Bool
	// hasSessions: checkSchema found the sessions table (table+Sessions)
	// with its columns and the mutex table's Session column.
	hasSessions atomic.Bool
	// sawEntrySessions: a read of the queue found an entry that names a
	// session; from then on the queue's pages are read with their
	// sessions, by statement (headPage).
	sawEntrySessions atomic.Bool
	// olderThanSessions makes the store read and write as a spanmutex
	// older than sessions does (no Session column): the tests of a
	// rolling upgrade set it.
	olderThanSessions bool
	// sessionHeldSeen: a Semaphore's read found a holder's entry that
	// declares sessionHeldLease while the store did not read sessions
	// (its Scope has none): its next call checks whether the table has
	// them, to judge such holders by their sessions (readsSessions).
	sessionHeldSeen atomic.Bool
	// seenSession is the session a read of the store last found
	// (sessionOf), which later single-use reads judge rows by while it
	// shows the session live (sessionRead).
	seenSession atomic.Pointer[seenSession]
	// needsQueue: the store is a Lock's, which cannot work without the
	// queue table: checkSchema reports it missing.
	needsQueue bool
	// semaphore: the store is a Semaphore's, which needs the Permits
	// columns (checkSchema reports them missing).
	semaphore bool
	// readOnly: the store only reads (Inspect), so checkSchema does not
	// report what only writes need.
	readOnly bool
	// queuedCol: whether the table has the Queued column
	// (queue_mark.go), once checked.
	queuedCol atomic.Int32
	// queuedAt is the local time (UnixNano) of the check that set
	// queuedCol; queuedRecheck, how long an answer of absent stands.
	queuedAt      atomic.Int64
	queuedRecheck time.Duration
	// shared shares what checks of the Queued column found with the
	// other stores of a Scope; nil if not shared.
	shared *Scope
	// sender sends the wake-ups of a finish to the section's watchers
	// (mutex_watch.go); nil for a Lock's store.
	sender *Scope
	// contended: the last acquisition of a Lock on this store found the
	// lock held or waited for; a hint of which reads to try first.
	contended atomic.Bool
	// noRow: TryLock's glance just found no row for the lock, so the
	// acquisition that follows reads row and queue in one statement
	// (readToAcquire) rather than the row by key, then the queue. A hint
	// of which read to try first, consumed by that acquisition.
	noRow atomic.Bool
	// reached turns true on the first Spanner call that succeeds; until then
	// errors say that Spanner may be unreachable.
	reached atomic.Bool
}

// unreached adds, to an error that ends a call before any Spanner call has
// succeeded, that Spanner may not be reachable: otherwise an unreachable
// endpoint shows only as a deadline. An error of a call whose ctx ended
// is made to match ctx.Err(), whatever Spanner did.
//
// A call that began at local time began and was cut short by its ctx within
// a second says only that: so short a wait is no sign that Spanner is out of
// reach (an impatient caller on a busy database). Nor is a ctx the caller
// cancelled (see unanswered); an error of a call whose ctx ended matches
// ctx.Err().
func (s *spannerStore) unreached(ctx context.Context, err error, began time.Time) error {
	if err != nil && ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
		err = fmt.Errorf("%w: %w", err, ctx.Err())
	}
	if err == nil || s.reached.Load() || (errors.Is(err, ErrNotObtained) && time.Since(began) < time.Second) {
		return err
	}
	if ue := unanswered(ctx, s.client.DatabaseName(), err, began); ue != nil { // connect.go
		return ue
	}
	return err // Spanner answered: it is reachable
}

func newSpannerStore(client *spanner.Client, table string, lease time.Duration) *spannerStore {
	return &spannerStore{client: client, table: table, dialect: sqldialect.For(client), lease: lease, stats: &storeStats{}, queuedRecheck: queuedRecheck}
}

// newStore returns the store of c's table in client's database, judging by
// c's lease, in the dialect WithDialect gave, if it did, or else read; its
// Scope learns the dialect once for all its stores.
func (c *config) newStore(client *spanner.Client) *spannerStore {
	s := newSpannerStore(client, c.table, c.lease)
	s.dialect = c.scope.dialectOf(client, c.dialectSet, c.dialect) // dialect.go
	return s
}

// fencedUpdate runs a read-write transaction that calls write only while
// our row is still STARTED under lease l, and returns an error matching ErrLeaseLost if
// it is not; otherwise the commit timestamp.
//
// committed, if not nil, recognises in the row found instead (the
// error matching ErrLeaseLost) what write would have written: an earlier try whose
// answer was lost committed it, so nothing is written and fencedUpdate
// returns nil.
func (s *spannerStore) fencedUpdate(ctx context.Context, l *Lease, committed func(*leaseLostError) bool,
	write func(ctx context.Context, tx *spanner.ReadWriteTransaction) error) (time.Time, error) {
	ts, err := s.rw(ctx, tagRenew, func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
		s.stats.rwAttempts.Add(1)
		err := l.Guard(ctx, tx)
		var lost *leaseLostError
		if committed != nil && errors.As(err, &lost) && committed(lost) {
			return nil
		}
		if err != nil {
			return err
		}
		return write(ctx, tx)
	})
	var lost *leaseLostError
	if errors.As(err, &lost) {
		return time.Time{}, lost
	}
	if err != nil {
		return time.Time{}, s.explain(ctx, err)
	}
	return ts, nil
}

func (s *spannerStore) renew(ctx context.Context, l *Lease) error {
	ts, err := s.fencedUpdate(ctx, l, nil, func(_ context.Context, tx *spanner.ReadWriteTransaction) error {
		return tx.BufferWrite([]*spanner.Mutation{spanner.Update(s.table, []string{"Name", "RenewedAt"}, []any{l.name, spanner.CommitTimestamp})})
	})
	if err == nil {
		l.setRenewedAt(ts)
	}
	return err
}

// truncate cuts s to at most n bytes on a rune boundary, marked with "…",
// so that a STRING column gets valid UTF-8.
func truncate(s string, n int) string { return textcut.Cut(s, n, "…") }

// explain turns Spanner errors that mean a setup problem into errors that
// say what to do; others are wrapped as they are.
func (s *spannerStore) explain(ctx context.Context, err error) error {
	code, msg := spanner.ErrCode(err), err.Error()
	if code == codes.FailedPrecondition && strings.Contains(msg, "NOT NULL") {
		return s.schemaError(ctx, err) // an extra column of the table's (checkSchema)
	}
	if (code == codes.NotFound || code == codes.InvalidArgument) &&
		(strings.Contains(msg, "Table not found") || strings.Contains(msg, "Column not found") || strings.Contains(msg, "Unrecognized name") ||
			strings.Contains(msg, "not found inside") || strings.Contains(msg, "does not exist")) { // the last: PostgreSQL
		return s.schemaError(ctx, err)
	}
	return s.explainOther(err)
}

// explainOther explains database and instance errors, without looking at the
// schema.
func (s *spannerStore) explainOther(err error) error {
	if de := dialectError(err); de != nil { // dialect.go
		return de
	}
	if nf := notFound(s.client.DatabaseName(), err); nf != nil { // connect.go
		return nf
	}
	if strings.HasPrefix(err.Error(), "spanmutex: ") {
		return err // ours, and says what it is about: no second prefix
	}
	return fmt.Errorf("spanmutex: table %s: %w", s.table, err)
}

// renewer renews a held lease, fenced on it.
type renewer interface {
	renew(ctx context.Context, l *Lease) error
}
