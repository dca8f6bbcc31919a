package spanmutex

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"cloud.google.com/go/spanner"

	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/internal/sqldialect"
)

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
	return fmt.Sprintf("SELECT CURRENT_TIMESTAMP(), m.`Name` IS NOT NULL, %s%s FROM (SELECT 1) AS one LEFT JOIN `%s` AS m ON m.`Name` = @name%s",
		cols, s.sessionSelect(), s.table, s.sessionJoin())
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
	var (
		version spanner.NullString
		sess    scannedSession
		extra   []any
	)
	if s.versioned {
		extra = append(extra, &version)
	}
	out, err := decodeRow(r, append(extra, sess.dest(s.sessioned())...)...)
	if err != nil {
		return row{}, fmt.Errorf("spanmutex: decode row %q of %s: %w", name, s.table, err)
	}
	out.Version = version.StringVal
	out = sess.judge(out)
	s.sawSession(&sess)
	if out.Exists && !out.State.valid() {
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
	if state == StateShared {
		return fmt.Errorf("spanmutex: %q of %s is a Semaphore's or RWLock's (state SHARED); use another name", name, s.table)
	}
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
	return s.readIn(ctx, s.client.Single, name)
}

// readAt reads the row as it was at Spanner time at (an exact-timestamp
// read; Spanner keeps an hour of versions by default), with Now set to at.
func (s *spannerStore) readAt(ctx context.Context, name string, at time.Time) (row, error) {
	return s.readIn(ctx, func() *spanner.ReadOnlyTransaction {
		return s.client.Single().WithTimestampBound(spanner.ReadTimestamp(at))
	}, name)
}

// readIn reads the row in a single-use read-only transaction made by
// single, and its session, if it names one, in another (as of the same
// bound: a strong read of the session is at or after the row's, which
// only makes the holder look renewed later than it was by Now).
func (s *spannerStore) readIn(ctx context.Context, single func() *spanner.ReadOnlyTransaction, name string) (row, error) {
	s.stats.reads.Add(1)
	ro := single()
	defer ro.Close()
	cols := rowColumns
	if s.versioned {
		cols = append(slices.Clip(cols), "Version")
	}
	sessioned := s.sessioned()
	if sessioned {
		cols = append(slices.Clip(cols), "Session")
	}
	r, err := ro.ReadRowWithOptions(ctx, s.table, spanner.Key{name}, cols, &spanner.ReadOptions{RequestTag: tagRead})
	var out row
	switch {
	case errors.Is(err, spanner.ErrRowNotFound):
	case err != nil:
		return row{}, s.explain(ctx, err)
	default:
		var session spanner.NullString
		if out, err = decodeReadRow(r, s.versioned, sessionDest(sessioned, &session)...); err != nil {
			return row{}, fmt.Errorf("spanmutex: decode row %q of %s: %w", name, s.table, err)
		}
		if !out.State.valid() {
			return row{}, s.unknownState(name, out.State)
		}
		out.Session = session.StringVal
	}
	if out.Now, err = ro.Timestamp(); err != nil {
		return row{}, fmt.Errorf("spanmutex: read %q of %s: no read timestamp: %w", name, s.table, err)
	}
	s.reached.Store(true)
	return s.sessionRead(ctx, out, single)
}

// sessionRead returns r judged by its session, if r is held through one:
// by the session as the store last read it, while that shows it live at
// r's read (seenSession.judge: a waiter polling behind a holder reads
// the session about once a lease, not at every poll), else read in a
// single-use read of its own (single makes it). r as it is otherwise: a
// free row keeps the Session of its last holder, which decides nothing,
// so reading it would be a round trip for nothing. A strong read of the
// session is at or after the row's: the holder only looks renewed later
// than it was by Now. Nothing is decided on this judgement alone: a
// takeover is decided again in its transaction, on the session read there.
func (s *spannerStore) sessionRead(ctx context.Context, r row, single func() *spanner.ReadOnlyTransaction) (row, error) {
	if r.Session == "" || r.State != StateStarted {
		return r, nil
	}
	if out, ok := s.seenSession.Load().judge(r); ok {
		return out, nil
	}
	rd := taggedReader{single(), tagSessionRead}
	defer rd.Close()
	out, err := s.sessionOf(ctx, rd, r)
	if err != nil {
		return row{}, s.explain(ctx, err)
	}
	return out, nil
}

// sessionDest is the destination of the Session column where the table
// has it (sessioned), to pass as decodeReadRow's extra; none otherwise.
func sessionDest(sessioned bool, session *spanner.NullString) []any {
	if !sessioned {
		return nil
	}
	return []any{session}
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

// keyReader reads a row by key: a read-write transaction of either kind.
type keyReader interface {
	ReadRow(ctx context.Context, table string, key spanner.Key, columns []string) (*spanner.Row, error)
}

// readRowIn reads the lock's row by key in tx. It reads no clock: Now is
// unset. A missing row reads as the zero row (Exists false). It reads the
// name of the row's session (Session), not the session: sessionOf does.
func (s *spannerStore) readRowIn(ctx context.Context, tx keyReader, name string) (row, error) {
	cols, marked, sessioned := rowColumns, s.marked(), s.sessioned()
	if marked {
		cols = append(slices.Clip(cols), "Queued")
	}
	if sessioned {
		cols = append(slices.Clip(cols), "Session")
	}
	r, err := tx.ReadRow(ctx, s.table, spanner.Key{name}, cols)
	switch {
	case errors.Is(err, spanner.ErrRowNotFound):
		return row{}, nil
	case err != nil:
		return row{}, err
	}
	var (
		queued  spanner.NullBool
		session spanner.NullString
		extra   []any
	)
	if marked {
		extra = append(extra, &queued)
	}
	v, err := decodeReadRow(r, false, append(extra, sessionDest(sessioned, &session)...)...)
	if err != nil {
		return row{}, fmt.Errorf("spanmutex: decode lock %q of %s: %w", name, s.table, err)
	}
	v.Queued, v.Session = queueMarkOf(queued), session.StringVal
	return v, nil
}
