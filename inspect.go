package spanmutex

import (
	"context"
	"fmt"
	"time"

	"cloud.google.com/go/spanner"
)

// Record is one row of the mutex table, as Inspect reports it.
type Record struct {
	Name       string
	State      State
	Owner      string
	Token      int64
	Attempts   int64
	LastError  string
	StartedAt  time.Time // zero if never started
	RenewedAt  time.Time // zero if never started; held through a session, its session's last renewal if later
	FinishedAt time.Time // zero unless DONE or FAILED
	UpdatedAt  time.Time
	// Version is the version that last started the row (see WithVersion);
	// "" if none, or if the table has no Version column.
	Version string
	// Age is how long ago, by Spanner's clock at the read, the row last
	// changed (UpdatedAt).
	Age time.Duration
	// For a Semaphore or RWLock (State SHARED; the table upgraded with
	// ddl --upgrade): its size, its holders oldest first (lapsed ones too,
	// until a grant deletes them), how many live waiters are queued, and
	// those waiters in queue order, each with the permits it asks for (an
	// RWLock's writer asks for all of them) and Token 0.
	Permits int64
	Holders []Holder
	Waiters int
	Waiting []Holder
}

// Holder is a holder of a Semaphore or RWLock, as Inspect reports it.
type Holder struct {
	Owner   string
	Permits int64
	Token   int64
	// LeaseLeft is the holder's declared lease left unrenewed, by
	// Spanner's clock at the read; at or below 0 the lease lapsed, and its
	// permits count free; for a holder through a session (WithSessions),
	// the session's lease left. For a waiter, how long its queue entry has
	// left unrenewed (it or its session) before it counts as dead.
	LeaseLeft time.Duration
	// Waited is, for a waiter, how long ago by Spanner's clock at the read
	// its entry joined the queue; 0 for a holder.
	Waited time.Duration
}

// Inspect reads the rows of the mutex table (WithTable; default
// "Mutexes") from one strong snapshot, ordered by name: all of them if
// name is empty, else that one (none if it does not exist). It is read-only
// and takes no locks. It takes WithTable and WithDialect.
func Inspect(ctx context.Context, client *spanner.Client, name string, opts ...Option) ([]Record, error) {
	if ctx == nil {
		return nil, errNilContext
	}
	if client == nil {
		return nil, errNilClient("Inspect")
	}
	began := time.Now()
	cfg, err := newConfig(opts) // options.go
	if err != nil {
		return nil, err
	}
	st := cfg.newStore(client) // the lease, which Inspect does not take, is defaultLease
	st.readOnly = true
	if err := st.checkSchema(ctx); err != nil {
		return nil, st.unreached(ctx, err, began)
	}
	stmt, err := st.dialect.Statement(ctx, st.inspectSQL(name != ""), map[string]any{"name": name, "shared": string(StateShared)})
	if err != nil {
		return nil, st.unreached(ctx, err, began)
	}
	var out []Record
	err = client.Single().Query(ctx, stmt).Do(func(r *spanner.Row) error {
		return st.inspected(r, &out)
	})
	if err != nil {
		return nil, st.unreached(ctx, st.explainOther(err), began)
	}
	return out, nil
}

// inspectSQL reads the rows of the mutex table, all or (one) @name's, with
// Spanner's clock, their Version when the table has it and, when the
// tables have the Semaphore's columns, a SHARED row's size and entries:
// one result row per entry, the row's columns repeated, or one with NULL
// entry columns. One statement: one snapshot.
func (s *spannerStore) inspectSQL(one bool) string {
	sel, join, where, order := "", "", "", ""
	if s.hasVersion.Load() {
		sel += ", m.`Version`"
	}
	sel += s.sessionSelect() // a row held through a session: its session's renewal (session_store.go)
	join += s.sessionJoin()
	if s.hasPermits.Load() {
		sel += ", m.`Permits`, q.`EnqueuedAt`, q.`Owner`, q.`RenewedAt`, q.`LeaseMicros`, q.`Permits`, q.`Token`"
		join += fmt.Sprintf(" LEFT JOIN `%s` AS q ON q.`Name` = m.`Name` AND m.`State` = @shared AND q.`Permits` IS NOT NULL", s.queueTable())
		order = ", q.`EnqueuedAt`, q.`WaiterID`"
		if s.sessioned() { // each entry's session, to judge it by (semEntry.withSession)
			sel += ", q.`Session`, qs.`RenewedAt`, qs.`LeaseMicros`"
			join += fmt.Sprintf(" LEFT JOIN `%s` AS qs ON qs.`SessionID` = q.`Session`", s.sessionsTable())
		}
	}
	if one {
		where = " WHERE m.`Name` = @name"
	}
	return fmt.Sprintf("SELECT CURRENT_TIMESTAMP(), m.`Name`, m.`State`, m.`Owner`, m.`Token`, m.`Attempts`, m.`LastError`, "+
		"m.`StartedAt`, m.`RenewedAt`, m.`FinishedAt`, m.`UpdatedAt`%s FROM `%s` AS m%s%s ORDER BY m.`Name`%s", sel, s.table, join, where, order)
}

// inspected decodes a result row of inspectSQL into out: a new Record, or
// an entry of the last one.
func (s *spannerStore) inspected(r *spanner.Row, out *[]Record) error {
	var (
		now                                 time.Time
		rec                                 Record
		state, owner, lastErr, ver          spanner.NullString
		started, renewed, finished, updated spanner.NullTime
		permits                             spanner.NullInt64
		e                                   semEntryColumns
		sess, qsess                         scannedSession // the row's session, the entry's
	)
	dest := []any{&now, &rec.Name, &state, &owner, &rec.Token, &rec.Attempts, &lastErr, &started, &renewed, &finished, &updated}
	if s.hasVersion.Load() {
		dest = append(dest, &ver)
	}
	dest = append(dest, sess.dest(s.sessioned())...)
	if s.hasPermits.Load() {
		dest = append(append(append(dest, &permits), e.dest()...), qsess.dest(s.sessioned())...)
	}
	if err := r.Columns(dest...); err != nil {
		return err
	}
	if n := len(*out); n == 0 || (*out)[n-1].Name != rec.Name {
		rec.State, rec.Owner, rec.LastError, rec.Version = State(state.StringVal), owner.StringVal, lastErr.StringVal, ver.StringVal
		rec.StartedAt, rec.RenewedAt, rec.FinishedAt, rec.UpdatedAt = nullTime(started), nullTime(renewed), nullTime(finished), nullTime(updated)
		if rec.State == StateStarted && sess.at.Valid {
			// Held through a session: its renewals renew the row.
			rec.RenewedAt = latest(rec.RenewedAt, sess.at.Time)
		}
		rec.Age, rec.Permits = now.Sub(rec.UpdatedAt), permits.Int64
		*out = append(*out, rec)
	}
	if e.at.Valid {
		(*out)[len(*out)-1].add(qsess.judgeEntry(e.entry()), now, s.lease)
	}
	return nil
}

// add records entry e of a SHARED row read at Spanner time now: a holder,
// or a live waiter (semEntryLive, by the entry's declared lease, own if
// none).
func (rec *Record) add(e semEntry, now time.Time, own time.Duration) {
	h := Holder{Owner: e.owner, Permits: e.permits, Token: e.token, LeaseLeft: e.left(now, own)}
	switch {
	case e.token != 0:
		rec.Holders = append(rec.Holders, h)
	case semEntryLive(e, now, own):
		h.Waited = now.Sub(e.at)
		rec.Waiters++
		rec.Waiting = append(rec.Waiting, h)
	}
}

// semEntryColumns receive a semaphore entry's columns, NULL when there is
// none.
type semEntryColumns struct {
	at, renewed           spanner.NullTime
	id, owner, wake       spanner.NullString
	lease, permits, token spanner.NullInt64
}

// dest returns the destinations of the columns inspectSQL selects.
func (c *semEntryColumns) dest() []any {
	return []any{&c.at, &c.owner, &c.renewed, &c.lease, &c.permits, &c.token}
}

// semDest returns the destinations of the entry's columns semSQL selects.
func (c *semEntryColumns) semDest() []any {
	return []any{&c.at, &c.id, &c.owner, &c.renewed, &c.lease, &c.permits, &c.token, &c.wake}
}

func (c *semEntryColumns) entry() semEntry {
	return semEntry{at: c.at.Time, id: c.id.StringVal, owner: c.owner.StringVal, renewed: c.renewed.Time,
		lease: time.Duration(c.lease.Int64) * time.Microsecond, permits: c.permits.Int64, token: c.token.Int64, wake: c.wake.StringVal}
}
