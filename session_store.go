package spanmutex

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/spanner"
	"google.golang.org/grpc/codes"

	"github.com/spanmutex/spanmutex/ddl"
)

// sessionStores is implemented by a Lock's or Mutex's store that can
// hold rows through sessions.
type sessionStores interface {
	// sessionStore returns the store of the table's sessions, or nil if
	// the table has none (it lacks the Session column).
	sessionStore(ctx context.Context) sessionStore
}

// sessionStore returns s if its table has sessions (checked as the Queued
// column is: marks), nil otherwise.
func (s *spannerStore) sessionStore(ctx context.Context) sessionStore {
	if s.marks(ctx); !s.sessioned() {
		return nil
	}
	return s
}

// sessionsTable is the name of the table of the sessions that hold rows of
// the store's mutex table.
func (s *spannerStore) sessionsTable() string { return s.table + ddl.SessionsSuffix }

// sessioned reports whether the mutex table is known to have the Session
// column (and its sessions table): rows are then read with their session.
func (s *spannerStore) sessioned() bool { return s.hasSessions.Load() && !s.olderThanSessions }

// sessionInsert is the mutation by which the write that starts session r
// (session.next) inserts its row, in the same commit as the first row or
// entry that names it: an insert-or-update, so that two writes that start
// it together, or a client's replay of one, commit as a start and a
// renewal.
func (s *spannerStore) sessionInsert(r *sessionRow) *spanner.Mutation {
	return spanner.InsertOrUpdate(s.sessionsTable(), []string{"SessionID", "Owner", "CreatedAt", "RenewedAt", "LeaseMicros"},
		[]any{r.id, r.owner, spanner.CommitTimestamp, spanner.CommitTimestamp, r.lease.Microseconds()})
}

// withSessionInsert appends to ms the insert of session r's row, if the
// write starts it (r not nil).
func (s *spannerStore) withSessionInsert(ms []*spanner.Mutation, r *sessionRow) []*spanner.Mutation {
	if r == nil {
		return ms
	}
	return append(ms, s.sessionInsert(r))
}

// renewSession sets the session's RenewedAt in one blind write, a single
// Commit: an update, which fails NotFound if the row is gone.
func (s *spannerStore) renewSession(ctx context.Context, id string) (time.Time, error) {
	s.stats.rwAttempts.Add(1)
	ts, err := s.client.Apply(ctx, []*spanner.Mutation{spanner.Update(s.sessionsTable(),
		[]string{"SessionID", "RenewedAt"}, []any{id, spanner.CommitTimestamp})},
		spanner.ApplyAtLeastOnce(), spanner.TransactionTag(tagSession))
	switch {
	case spanner.ErrCode(err) == codes.NotFound && !errors.Is(err, context.DeadlineExceeded):
		return time.Time{}, errSessionGone
	case err != nil:
		return time.Time{}, s.explain(ctx, err)
	}
	return ts, nil
}

// sessionOf reads, in rd, the session that row r names, and returns r
// judged by it (row.withSession); r as it is if it names none. A session
// found is remembered (sawSession) for the store's later single-use reads
// (sessionRead).
func (s *spannerStore) sessionOf(ctx context.Context, rd keyReader, r row) (row, error) {
	if r.Session == "" {
		return r, nil
	}
	c := scannedSession{id: spanner.NullString{StringVal: r.Session, Valid: true}}
	got, err := rd.ReadRow(ctx, s.sessionsTable(), spanner.Key{r.Session}, []string{"RenewedAt", "LeaseMicros"})
	switch {
	case errors.Is(err, spanner.ErrRowNotFound):
		return c.judge(r), nil // gone: judged by the row alone
	case err != nil:
		return row{}, err
	}
	if err := got.Columns(&c.at, &c.micros); err != nil {
		return row{}, fmt.Errorf("spanmutex: decode session %s of %s: %w", r.Session, s.sessionsTable(), err)
	}
	s.sawSession(&c)
	return c.judge(r), nil
}

// sawSession remembers session c, read beside a row by a statement
// (sessionSelect) or by key (sessionOf), if it was found: a waiter's
// statement reads (its joins', its full reads) and key reads of the
// session spare its polls' next key reads of it (sessionRead).
func (s *spannerStore) sawSession(c *scannedSession) {
	if c.id.Valid && c.at.Valid {
		s.seenSession.Store(&seenSession{id: c.id.StringVal, renewedAt: c.at.Time, lease: time.Duration(c.micros.Int64) * time.Microsecond})
	}
}

// seenSession is a session's row as a read of the store last found it.
type seenSession struct {
	id        string
	renewedAt time.Time
	lease     time.Duration
}

// judge returns r judged by the session as seen, if r names it and it was
// live then and still is at r's read (r.Now); ok false otherwise. A
// session's RenewedAt only grows while it lives, so the seen one is a
// lower bound: the holder looks renewed no later than it was, and a
// holder judged live so is live (one judged silent is read again before
// anyone acts: sessionRead).
func (seen *seenSession) judge(r row) (row, bool) {
	if seen == nil || seen.id != r.Session || !seen.renewedAt.Add(seen.lease).After(r.Now) {
		return row{}, false
	}
	return r.withSession(seen.renewedAt, seen.lease, true), true
}

// entrySessions is the sessions table whose renewals count as those of the
// queue entries that name a session (liveEntry); "" unless the table has
// sessions.
func (s *spannerStore) entrySessions() string {
	if !s.sessioned() {
		return ""
	}
	return s.sessionsTable()
}

// sessionSelect is what a statement that reads row m selects of its
// session se, to end its SELECT list (sessionJoin joins se); "" unless
// the table has sessions.
func (s *spannerStore) sessionSelect() string {
	if !s.sessioned() {
		return ""
	}
	return ", m.`Session`, se.`RenewedAt`, se.`LeaseMicros`"
}

// sessionJoin joins the session se of row m, to end a statement's FROM; ""
// unless the table has sessions.
func (s *spannerStore) sessionJoin() string {
	if !s.sessioned() {
		return ""
	}
	return " LEFT JOIN `" + s.sessionsTable() + "` AS se ON se.`SessionID` = m.`Session`"
}

// scannedSession receives what sessionSelect selects.
type scannedSession struct {
	id     spanner.NullString
	at     spanner.NullTime
	micros spanner.NullInt64
}

// dest returns the destinations of sessionSelect's columns; none unless
// the table has sessions.
func (c *scannedSession) dest(sessioned bool) []any {
	if !sessioned {
		return nil
	}
	return []any{&c.id, &c.at, &c.micros}
}

// judge returns r, read with the scanned session, judged by it.
func (c *scannedSession) judge(r row) row {
	r.Session = c.id.StringVal
	return r.withSession(c.at.Time, time.Duration(c.micros.Int64)*time.Microsecond, c.at.Valid)
}

// judgeEntry returns e, read with the scanned session, judged by it
// (semEntry.withSession).
func (c *scannedSession) judgeEntry(e semEntry) semEntry {
	e.session = c.id.StringVal
	return e.withSession(c.at.Time, time.Duration(c.micros.Int64)*time.Microsecond, c.at.Valid)
}

// renewThrough renews l as renew does, fenced, and in the same write makes
// its row name session id, declaring sessionHeldLease, and inserts the
// session's row if the write starts it (start); with id "", it names none
// and declares the store's lease, the one l was granted with.
func (s *spannerStore) renewThrough(ctx context.Context, l *Lease, id string, start *sessionRow) error {
	session, lease := spanner.NullString{StringVal: id, Valid: id != ""}, s.lease
	if id != "" {
		lease = sessionHeldLease
	}
	ts, err := s.fencedUpdate(ctx, l, nil, func(_ context.Context, tx *spanner.ReadWriteTransaction) error {
		return tx.BufferWrite(s.withSessionInsert([]*spanner.Mutation{spanner.Update(s.table, []string{"Name", "RenewedAt", "Session", "LeaseMicros"},
			[]any{l.name, spanner.CommitTimestamp, session, lease.Microseconds()})}, start))
	})
	if err == nil {
		l.setRenewedAt(ts)
	}
	return err
}
