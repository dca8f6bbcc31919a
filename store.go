package spanmutex

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"cloud.google.com/go/spanner"
	"google.golang.org/grpc/codes"

	"github.com/spanmutex/spanmutex/ddl"
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
}

// spannerStore is the store on a Cloud Spanner table.
type spannerStore struct {
	client *spanner.Client
	table  string
	// dialect is the database's SQL dialect, of the statements this store
	// issues (dialect.go).
	dialect *sqldialect.Of
	// watermark is the caller's own lease, the judge of rows and queue
	// entries written without a declared lease.
	watermark time.Duration
	stats     *storeStats
	// versioned: the Mutex has a version, so rows are read and written with
	// the Version column, which the table must then have.
	versioned bool
	// hasVersion: checkSchema found the Version column.
	hasVersion atomic.Bool
	// hasQueue: checkSchema found the waiters' queue table, which a Mutex
	// uses only for its watchers (mutex_watch.go) and may lack.
	hasQueue atomic.Bool
	// queuedCol: whether the table has the Queued column
	// (lock_queue_mark.go), once checked.
	queuedCol atomic.Int32
	// shared shares what checks of the Queued column found with the
	// other stores of a Scope; nil if not shared.
	shared *Scope
	// sender sends the wake-ups of a finish to the section's watchers
	// (mutex_watch.go); nil for a Lock's store.
	sender *Scope
	// contended: the last acquisition of a Lock on this store found the
	// lock held or waited for; a hint of which reads to try first.
	contended atomic.Bool
	// reached turns true on the first Spanner call that succeeds; until then
	// errors say that Spanner may be unreachable.
	reached atomic.Bool
}

// unreached adds, to an error that ends a call before any Spanner call has
// succeeded, that Spanner may not be reachable: otherwise an unreachable
// endpoint shows only as a deadline.
//
// A call that began at local time began and was cut short by its ctx within
// a second says only that: so short a wait is no sign that Spanner is out of
// reach (an impatient caller on a busy database).
func (s *spannerStore) unreached(err error, began time.Time) error {
	if err == nil || s.reached.Load() || (errors.Is(err, ErrNotObtained) && time.Since(began) < time.Second) {
		return err
	}
	if ue := diagnose(s.client.DatabaseName(), err); ue != nil { // connect.go
		return ue
	}
	return err // Spanner answered: it is reachable
}

func newSpannerStore(client *spanner.Client, table string, watermark time.Duration) *spannerStore {
	return &spannerStore{client: client, table: table, dialect: sqldialect.For(client), watermark: watermark, stats: &storeStats{}}
}

// newStore returns the store of c's table in client's database, judging by
// c's watermark, in the dialect WithDialect gave, if it did.
func (c *config) newStore(client *spanner.Client) *spannerStore {
	s := newSpannerStore(client, c.table, c.watermark)
	if c.dialectSet {
		s.dialect = sqldialect.Known(c.dialect)
	}
	return s
}

var rowColumns = []string{"State", "Owner", "LeaseID", "Token", "Attempts", "LastError",
	"StartedAt", "RenewedAt", "FinishedAt", "UpdatedAt", "LeaseMicros"}

// readSQL reads the row and CURRENT_TIMESTAMP() in one statement. The LEFT
// JOIN on a one-row subquery returns Spanner's clock even when the row is
// absent. Like every statement here, it is GoogleSQL with our identifiers
// quoted, which sqldialect.Statement turns into PostgreSQL when the
// database is.
func (s *spannerStore) readSQL() string {
	cols := rowSelectList()
	if s.versioned {
		cols += ", m.`Version`"
	}
	return fmt.Sprintf("SELECT CURRENT_TIMESTAMP(), m.`Name` IS NOT NULL, %s FROM (SELECT 1) AS one LEFT JOIN `%s` AS m ON m.`Name` = @name",
		cols, s.table)
}

// rowSelectList is rowColumns of the table aliased m, for a SELECT list.
func rowSelectList() string {
	cols := make([]string, len(rowColumns))
	for i, c := range rowColumns {
		cols[i] = "m.`" + c + "`"
	}
	return strings.Join(cols, ", ")
}

type querier interface {
	Query(ctx context.Context, stmt spanner.Statement) *spanner.RowIterator
}

// queryRow runs readSQL in dialect d.
func (s *spannerStore) queryRow(ctx context.Context, q querier, d ddl.Dialect, name string) (row, error) {
	it := q.Query(ctx, sqldialect.Statement(d, s.readSQL(), map[string]any{"name": name}))
	defer it.Stop()
	r, err := it.Next()
	if err != nil {
		return row{}, err
	}
	var version spanner.NullString
	var extra []any
	if s.versioned {
		extra = append(extra, &version)
	}
	out, err := decodeRow(r, extra...)
	out.Version = version.StringVal
	if err != nil {
		return row{}, fmt.Errorf("spanmutex: decode row %q of %s: %w", name, s.table, err)
	}
	if out.Exists && !out.State.Valid() {
		return row{}, s.unknownState(name, out.State)
	}
	return out, nil
}

// decodeRow decodes a result row that starts with CURRENT_TIMESTAMP(),
// whether the row exists, and rowColumns (as readSQL and lockSQL select
// them), into a row; extra receives the columns that follow.
func decodeRow(r *spanner.Row, extra ...any) (row, error) {
	var (
		cols   scannedColumns
		now    spanner.NullTime
		exists bool
	)
	if err := r.Columns(append(append([]any{&now, &exists}, cols.dest()...), extra...)...); err != nil {
		return row{}, err
	}
	out := cols.row(exists)
	out.Now = now.Time
	return out, nil
}

// scannedColumns receives rowColumns, which may be NULL, from a result row.
type scannedColumns struct {
	state, owner, leaseID, lastErr      spanner.NullString
	token, attempts, leaseMicros        spanner.NullInt64
	started, renewed, finished, updated spanner.NullTime
}

// dest returns the destinations of rowColumns, in their order, for
// spanner.Row.Columns.
func (c *scannedColumns) dest() []any {
	return []any{&c.state, &c.owner, &c.leaseID, &c.token, &c.attempts, &c.lastErr,
		&c.started, &c.renewed, &c.finished, &c.updated, &c.leaseMicros}
}

// row returns the row the scanned columns describe.
func (c *scannedColumns) row(exists bool) row {
	return row{
		Exists: exists, State: State(c.state.StringVal), Owner: c.owner.StringVal, LeaseID: c.leaseID.StringVal,
		Token: c.token.Int64, Attempts: c.attempts.Int64, LastError: c.lastErr.StringVal,
		StartedAt: nullTime(c.started), RenewedAt: nullTime(c.renewed), FinishedAt: nullTime(c.finished),
		UpdatedAt: nullTime(c.updated), Lease: time.Duration(c.leaseMicros.Int64) * time.Microsecond,
	}
}

// unknownState is the error for row name found in a state spanmutex never
// writes.
func (s *spannerStore) unknownState(name string, state State) error {
	return fmt.Errorf("spanmutex: row %q of %s has unknown state %q, written by something other than spanmutex; fix or delete the row", name, s.table, state)
}

func nullTime(t spanner.NullTime) time.Time {
	if !t.Valid {
		return time.Time{}
	}
	return t.Time
}

// read is a point read by key, not a query: on Spanner and even more on the
// emulator a key read costs a fraction of a SQL statement (0.5-0.9 ms
// against 2-3 ms there). Spanner's clock comes with it: the strong read's
// timestamp is the snapshot's time, as CURRENT_TIMESTAMP() would be.
func (s *spannerStore) read(ctx context.Context, name string) (row, error) {
	return s.readIn(ctx, s.client.Single(), name)
}

// readAt reads the row as it was at Spanner time at (an exact-timestamp
// read; Spanner keeps an hour of versions by default), with Now set to at.
func (s *spannerStore) readAt(ctx context.Context, name string, at time.Time) (row, error) {
	return s.readIn(ctx, s.client.Single().WithTimestampBound(spanner.ReadTimestamp(at)), name)
}

// readIn reads the row in the single-use read-only transaction ro, and
// closes it.
func (s *spannerStore) readIn(ctx context.Context, ro *spanner.ReadOnlyTransaction, name string) (row, error) {
	s.stats.reads.Add(1)
	defer ro.Close()
	cols := rowColumns
	if s.versioned {
		cols = append(slices.Clip(cols), "Version")
	}
	r, err := ro.ReadRow(ctx, s.table, spanner.Key{name}, cols)
	var out row
	switch {
	case errors.Is(err, spanner.ErrRowNotFound):
	case err != nil:
		return row{}, s.explain(ctx, err)
	default:
		if out, err = decodeReadRow(r, s.versioned); err != nil {
			return row{}, fmt.Errorf("spanmutex: decode row %q of %s: %w", name, s.table, err)
		}
		if !out.State.Valid() {
			return row{}, s.unknownState(name, out.State)
		}
	}
	if out.Now, err = ro.Timestamp(); err != nil {
		return row{}, fmt.Errorf("spanmutex: read %q of %s: no read timestamp: %w", name, s.table, err)
	}
	s.reached.Store(true)
	return out, nil
}

// decodeReadRow decodes rowColumns, and Version if versioned, read by key
// from an existing row; then any columns after them into extra.
func decodeReadRow(r *spanner.Row, versioned bool, extra ...any) (row, error) {
	var (
		cols    scannedColumns
		version spanner.NullString
	)
	dest := cols.dest()
	if versioned {
		dest = append(dest, &version)
	}
	if err := r.Columns(append(dest, extra...)...); err != nil {
		return row{}, err
	}
	out := cols.row(true)
	out.Version = version.StringVal
	return out, nil
}

// fencedUpdate runs a read-write transaction that calls write only while
// our row is still STARTED under lease l, and returns a *LeaseLostError if
// it is not; otherwise the commit timestamp.
//
// committed, if not nil, recognises in the row found instead (the
// *LeaseLostError) what write would have written: an earlier try whose
// answer was lost committed it, so nothing is written and fencedUpdate
// returns nil.
func (s *spannerStore) fencedUpdate(ctx context.Context, l *Lease, committed func(*LeaseLostError) bool,
	write func(ctx context.Context, tx *spanner.ReadWriteTransaction) error) (time.Time, error) {
	ts, err := s.client.ReadWriteTransaction(ctx, func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
		s.stats.rwAttempts.Add(1)
		err := l.Guard(ctx, tx)
		var lost *LeaseLostError
		if committed != nil && errors.As(err, &lost) && committed(lost) {
			return nil
		}
		if err != nil {
			return err
		}
		return write(ctx, tx)
	})
	var lost *LeaseLostError
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
	if nf := notFound(s.client.DatabaseName(), err); nf != nil { // connect.go
		return nf
	}
	return fmt.Errorf("spanmutex: table %s: %w", s.table, err)
}

// schemaError reads INFORMATION_SCHEMA to name exactly what is wrong with
// the table.
func (s *spannerStore) schemaError(ctx context.Context, cause error) error {
	if err := s.checkSchema(ctx); err != nil {
		var se *SchemaError
		if errors.As(err, &se) {
			se.Err = cause
		}
		return err
	}
	return fmt.Errorf("spanmutex: table %s: %w", s.table, cause)
}

// checkSchema reads INFORMATION_SCHEMA and returns a *SchemaError naming
// what is missing or mistyped, or nil if the table has every column. The
// waiters' queue table is checked too when it exists (a Mutex does not need
// it).
func (s *spannerStore) checkSchema(ctx context.Context) error {
	d, err := s.dialect.Get(ctx)
	if err != nil {
		return s.explainOther(err)
	}
	have, queue, err := s.columns(ctx, d)
	if err != nil {
		return err
	}
	if len(have) == 0 {
		return &SchemaError{Table: s.table, Problem: "does not exist in database " + s.client.DatabaseName(), Dialect: d}
	}
	s.hasVersion.Store(have["Version"] != "")
	s.recordQueued(have)
	missing := missingColumns(have, s.neededColumns(d), "")
	s.hasQueue.Store(len(queue) > 0)
	if len(queue) > 0 {
		missing = append(missing, missingColumns(queue, d.QueueColumns(), s.queueTable()+".")...)
	}
	if len(missing) == 0 {
		return nil
	}
	slices.Sort(missing)
	return &SchemaError{Table: s.table, Problem: "does not have the columns spanmutex needs", Missing: missing, Dialect: d}
}

// columns returns the columns of the mutex table and of its waiters' queue
// table with their Spanner types, as dialect d spells them, from one query;
// none for a table that does not exist.
func (s *spannerStore) columns(ctx context.Context, d ddl.Dialect) (mutex, queue map[string]string, err error) {
	stmt := sqldialect.Statement(d, "SELECT table_name, column_name, spanner_type FROM information_schema.columns "+
		"WHERE table_schema = @schema AND (table_name = @t OR table_name = @q)",
		map[string]any{"schema": sqldialect.Schema(d), "t": s.table, "q": s.queueTable()})
	mutex, queue = map[string]string{}, map[string]string{}
	err = s.client.Single().Query(ctx, stmt).Do(func(r *spanner.Row) error {
		var table, name, typ string
		if err := r.Columns(&table, &name, &typ); err != nil {
			return err
		}
		if table == s.table {
			mutex[name] = typ
		} else {
			queue[name] = typ
		}
		return nil
	})
	if err != nil {
		return nil, nil, s.explainOther(err)
	}
	s.reached.Store(true)
	return mutex, queue, nil
}

// neededColumns returns the mutex table's columns this store uses, typed
// in dialect d: every one but the optional ones (ddl.AddedMutexColumns),
// save Version when the Mutex has a version.
func (s *spannerStore) neededColumns(d ddl.Dialect) map[string]string {
	need := d.MutexColumns()
	for name := range d.AddedMutexColumns() {
		if !(name == "Version" && s.versioned) {
			delete(need, name)
		}
	}
	return need
}

// missingColumns describes the columns of want that have lacks or types
// otherwise, each prefixed with prefix.
func missingColumns(have, want map[string]string, prefix string) []string {
	var missing []string
	for name, typ := range want {
		if got, ok := have[name]; !ok {
			missing = append(missing, prefix+name+" "+typ+" missing")
		} else if got != typ {
			missing = append(missing, fmt.Sprintf("%s%s is %s, want %s", prefix, name, got, typ))
		}
	}
	return missing
}
