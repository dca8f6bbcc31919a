package spanmutex

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/spanner"
	"google.golang.org/grpc/codes"

	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/internal/sqldialect"
)

// semStore is the narrow interface between a Semaphore's waiting loop and
// Spanner. The decisions are planSem's, a pure function; the store reads
// with Spanner's clock and writes what the plan says in the transaction
// that read.
type semStore interface {
	// look reads the semaphore's row and queue with Spanner's clock in
	// one strong, lock-free read.
	look(ctx context.Context, name string) (semView, error)
	// settle reads the row and queue in a read-write transaction, plans q
	// on them (planSem) and commits the plan if it writes anything. It
	// returns the plan, with mine's key and the commit timestamp filled
	// in, and when the commit's outcome is unknown an error with sent set.
	settle(ctx context.Context, name string, q semRequest) (semResult, error)
	// renewEntry proves a holder or waiter alive by its entry's key: a
	// blind write, which returns its commit timestamp; ErrLeaseLost if the
	// entry is gone.
	renewEntry(ctx context.Context, name string, key queueKey) (time.Time, error)
	// entryAt reports whether the entry of key was in the queue at Spanner
	// time at (an exact-timestamp read of the past), or now if at is zero
	// (a strong read), and the read's timestamp.
	entryAt(ctx context.Context, name string, key queueKey, at time.Time) (present bool, readAt time.Time, err error)
	// renewEntryThrough renews a holder's entry as renewEntry does, and
	// in the same blind write makes it name session id, declaring
	// sessionHeldLease (with id "": none, declaring lease), inserting the
	// session's row if the write starts it (start). Only for a table that
	// has sessions.
	renewEntryThrough(ctx context.Context, name string, key queueKey, id string, lease time.Duration, start *sessionRow) (time.Time, error)
}

// semResult is what settle did: the plan it committed (or would have, when
// it wrote nothing), the view it read, and the commit's timestamp.
type semResult struct {
	plan semPlan
	view semView
	at   time.Time // zero when nothing was written
}

// Semaphore tags.
const (
	tagSemAcquire = "spanmutex.semaphore.acquire" // an acquisition, a grant, a leave
	tagSemRelease = "spanmutex.semaphore.release" // Release: delete, grant the next
	tagSemPoll    = "spanmutex.semaphore.poll"    // a waiter's read
	tagSemRenew   = "spanmutex.semaphore.renew"   // a holder's or waiter's entry renewal
)

// semMaxEntries bounds the queue entries one read reads. A semaphore whose
// queue is longer is refused with an error naming the bound.
const semMaxEntries = 4096

// semSQL reads the row (with Spanner's clock) and every entry of the
// queue, oldest first, in one statement: one result row per entry, the
// row's columns repeated, or one with NULL entry columns when the queue is
// empty. With sessioned (the table has sessions), each entry's Session
// and that session's RenewedAt and LeaseMicros (NULL if it names none, or
// its row is gone), joined in the same statement: the entries are judged
// by their sessions as of the same read, at no round trip more.
func (s *spannerStore) semSQL(sessioned bool) string {
	sel, join := "", ""
	if sessioned {
		sel = ", q.`Session`, qs.`RenewedAt`, qs.`LeaseMicros`"
		join = " LEFT JOIN `" + s.sessionsTable() + "` AS qs ON qs.`SessionID` = q.`Session`"
	}
	return fmt.Sprintf("SELECT CURRENT_TIMESTAMP(), m.`Name` IS NOT NULL, m.`State`, m.`Permits`, m.`Token`, "+
		"q.`EnqueuedAt`, q.`WaiterID`, q.`Owner`, q.`RenewedAt`, q.`LeaseMicros`, q.`Permits`, q.`Token`, q.`WakeAddr`%s "+
		"FROM (SELECT 1) AS one LEFT JOIN `%s` AS m ON m.`Name` = @name "+
		"LEFT JOIN (SELECT * FROM `%s` WHERE `Name` = @name ORDER BY `EnqueuedAt`, `WaiterID` LIMIT %d) AS q ON TRUE%s "+
		"ORDER BY q.`EnqueuedAt`, q.`WaiterID`", sel, s.table, s.queueTable(), semMaxEntries+1, join)
}

// querySem runs semSQL in dialect d on q. Entries that name a session are
// judged by it (semEntry.withSession).
func (s *spannerStore) querySem(ctx context.Context, q querier, d ddl.Dialect, name string) (semView, error) {
	sessioned := s.sessioned()
	it := q.Query(ctx, sqldialect.Statement(d, s.semSQL(sessioned), map[string]any{"name": name}))
	var v semView
	err := it.Do(func(r *spanner.Row) error {
		var (
			now         spanner.NullTime
			state       spanner.NullString
			size, token spanner.NullInt64
			e           semEntryColumns
			sess        scannedSession
		)
		dest := append([]any{&now, &v.exists, &state, &size, &token}, e.semDest()...)
		if err := r.Columns(append(dest, sess.dest(sessioned)...)...); err != nil {
			return fmt.Errorf("spanmutex: decode semaphore %q of %s: %w", name, s.table, err)
		}
		v.now, v.state, v.size, v.token = now.Time, State(state.StringVal), size.Int64, token.Int64
		if e.at.Valid {
			v.entries = append(v.entries, sess.judgeEntry(e.entry()))
			s.sawSessionHeld(v.entries[len(v.entries)-1])
		}
		return nil
	})
	if err != nil {
		return semView{}, err
	}
	if len(v.entries) > semMaxEntries {
		return semView{}, fmt.Errorf("spanmutex: semaphore %q has more than %d queue entries; spanmutex reads at most that many", name, semMaxEntries)
	}
	return v, nil
}

func (s *spannerStore) look(ctx context.Context, name string) (semView, error) {
	s.stats.reads.Add(1)
	s.readsSessions(ctx)
	d, err := s.dialect.Get(ctx)
	if err != nil {
		return semView{}, s.explain(ctx, err)
	}
	v, err := s.querySem(ctx, taggedQuerier{s.client.Single(), tagSemPoll}, d, name)
	if err != nil {
		return semView{}, s.explain(ctx, err)
	}
	s.reached.Store(true)
	return v, nil
}

// errNothingToWrite ends a transaction whose plan writes nothing, without
// a commit.
var errNothingToWrite = errors.New("spanmutex: nothing to write")

func (s *spannerStore) settle(ctx context.Context, name string, q semRequest) (semResult, error) {
	s.readsSessions(ctx)
	d, err := s.dialect.Get(ctx) // before the transaction: see statement
	if err != nil {
		return semResult{}, s.explain(ctx, err)
	}
	tag := tagSemAcquire
	if q.op == semRelease {
		tag = tagSemRelease
	}
	var res semResult
	at, err := s.rw(ctx, tag, func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
		s.stats.rwAttempts.Add(1)
		v, err := s.querySem(ctx, tx, d, name)
		if err != nil {
			return err
		}
		s.reached.Store(true)
		p, err := planSem(name, v, q)
		if err != nil {
			return err
		}
		res = semResult{plan: p, view: v}
		if !p.writes {
			return errNothingToWrite
		}
		return tx.BufferWrite(s.semMutations(name, v, p, q))
	})
	switch {
	case errors.Is(err, errNothingToWrite):
		return res, nil
	case err != nil:
		var sme *SizeMismatchError
		if errors.As(err, &sme) || errors.Is(err, ErrLeaseLost) {
			return semResult{}, err
		}
		return semResult{}, s.explain(ctx, err)
	}
	s.reached.Store(true)
	res.at = at
	res.plan.stamp(at)
	return res, nil
}

// stamp fills in what the commit at timestamp at wrote: the new entry's
// key and renewal, and the grants' renewal (mine's too, if granted).
func (p *semPlan) stamp(at time.Time) {
	if p.insert != nil {
		p.insert.at, p.insert.renewed = at, at
	}
	for i, g := range p.grants {
		p.grants[i].entry.renewed = at
		if p.mine != nil && p.mine != p.insert && g.entry.key() == p.mine.key() {
			p.mine.renewed = at
		}
	}
}

// semMutations are plan p's writes on the semaphore read as v.
func (s *spannerStore) semMutations(name string, v semView, p semPlan, q semRequest) []*spanner.Mutation {
	qt := s.queueTable()
	var ms []*spanner.Mutation
	for _, e := range p.deletes {
		ms = append(ms, spanner.Delete(qt, spanner.Key{name, e.at, e.id}))
	}
	for _, g := range p.grants {
		cols := []string{"Name", "EnqueuedAt", "WaiterID", "Token", "RenewedAt"}
		vals := []any{name, g.entry.at, g.entry.id, g.token, spanner.CommitTimestamp}
		if g.session != "" {
			cols, vals = append(cols, "Session", "LeaseMicros"), append(vals, g.session, sessionHeldLease.Microseconds())
		}
		ms = append(ms, spanner.Update(qt, cols, vals))
	}
	if e := p.insert; e != nil {
		token := spanner.NullInt64{Int64: e.token, Valid: e.token != 0}
		cols := []string{"Name", "EnqueuedAt", "WaiterID", "Owner", "RenewedAt", "LeaseMicros", "WakeAddr", "Permits", "Token"}
		vals := []any{name, spanner.CommitTimestamp, e.id, e.owner, spanner.CommitTimestamp, e.lease.Microseconds(),
			spanner.NullString{StringVal: e.wake, Valid: e.wake != ""}, e.permits, token}
		if e.session != "" {
			cols, vals = append(cols, "Session"), append(vals, e.session)
		}
		ms = append(ms, spanner.Insert(qt, cols, vals))
	}
	if p.names(q.session) {
		ms = s.withSessionInsert(ms, q.start)
	}
	switch {
	case !v.exists:
		ms = append(ms, spanner.Insert(s.table, []string{"Name", "State", "Token", "Attempts", "Permits", "CreatedAt", "UpdatedAt"},
			[]any{name, string(StateShared), p.token, int64(0), q.size, spanner.CommitTimestamp, spanner.CommitTimestamp}))
	case q.resized:
		ms = append(ms, spanner.Update(s.table, []string{"Name", "Token", "Permits", "UpdatedAt"},
			[]any{name, p.token, q.size, spanner.CommitTimestamp}))
	case p.token != v.token:
		ms = append(ms, spanner.Update(s.table, []string{"Name", "Token", "UpdatedAt"},
			[]any{name, p.token, spanner.CommitTimestamp}))
	}
	return ms
}

// renewEntry is one blind write, sent at least once: an Update of the
// entry's RenewedAt, which fails NotFound once the entry is gone (deleted
// as lapsed by a contender that counted its permits free, or released).
func (s *spannerStore) renewEntry(ctx context.Context, name string, key queueKey) (time.Time, error) {
	return s.writeEntryRenewal(ctx, name, spanner.Update(s.queueTable(),
		[]string{"Name", "EnqueuedAt", "WaiterID", "RenewedAt"}, []any{name, key.at, key.id, spanner.CommitTimestamp}))
}

// writeEntryRenewal commits ms, an entry's renewal (and a session's
// insert, if it starts one), in one blind write: ErrLeaseLost if the
// entry is gone.
func (s *spannerStore) writeEntryRenewal(ctx context.Context, name string, ms ...*spanner.Mutation) (time.Time, error) {
	s.stats.blindWrites.Add(1)
	ts, err := s.client.Apply(ctx, ms, spanner.ApplyAtLeastOnce(), spanner.TransactionTag(tagSemRenew))
	if err == nil {
		return ts, nil
	}
	explained := s.explain(ctx, err)
	var se *schemaError
	if spanner.ErrCode(err) == codes.NotFound && !errors.As(explained, &se) {
		return time.Time{}, fmt.Errorf("%w: semaphore %q: the entry is gone", ErrLeaseLost, name)
	}
	return time.Time{}, explained
}

// renewEntryThrough is renewEntry's blind write, which also sets the
// entry's Session and LeaseMicros: an entry still there is ours, holding
// its token (a contender that counts it free deletes it in the same
// commit), so the write needs no read.
func (s *spannerStore) renewEntryThrough(ctx context.Context, name string, key queueKey, id string, lease time.Duration, start *sessionRow) (time.Time, error) {
	if id != "" {
		lease = sessionHeldLease
	}
	return s.writeEntryRenewal(ctx, name, s.withSessionInsert([]*spanner.Mutation{spanner.Update(s.queueTable(), []string{"Name", "EnqueuedAt", "WaiterID", "RenewedAt", "Session", "LeaseMicros"},
		[]any{name, key.at, key.id, spanner.CommitTimestamp, spanner.NullString{StringVal: id, Valid: id != ""}, lease.Microseconds()})}, start)...)
}

// entryAt reads the entry of key by its primary key, strong or as of at.
func (s *spannerStore) entryAt(ctx context.Context, name string, key queueKey, at time.Time) (bool, time.Time, error) {
	s.stats.reads.Add(1)
	ro := s.client.Single()
	if !at.IsZero() {
		ro = ro.WithTimestampBound(spanner.ReadTimestamp(at))
	}
	defer ro.Close()
	_, err := ro.ReadRowWithOptions(ctx, s.queueTable(), spanner.Key{name, key.at, key.id}, []string{"WaiterID"},
		&spanner.ReadOptions{RequestTag: tagSemPoll})
	present := err == nil
	if err != nil && !errors.Is(err, spanner.ErrRowNotFound) {
		return false, time.Time{}, s.explain(ctx, err)
	}
	readAt, err := ro.Timestamp()
	if err != nil {
		return false, time.Time{}, fmt.Errorf("spanmutex: semaphore %q: no read timestamp: %w", name, err)
	}
	return present, readAt, nil
}
