package spanmutex

// The Lock store's hand-off: Unlock's transaction, which releases the row
// and hands it to the oldest live waiter, and the reads of the queue's head
// that it and a leaving waiter decide on.

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

func (s *spannerStore) unlock(ctx context.Context, l *Lease) (handOff, error) {
	var to handOff
	s.marks(ctx) // before the transaction
	d, err := s.dialect.Get(ctx)
	if err != nil {
		return handOff{}, s.explain(ctx, err)
	}
	at, err := s.rw(ctx, tagUnlock, func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
		s.stats.rwAttempts.Add(1)
		to = handOff{}
		read := s.readForHandOff
		if !l.handedOff {
			read = s.readRowThenHead
		}
		v, head, complete, err := read(ctx, tx, d, l.name)
		if err != nil {
			return err
		}
		if !v.heldBy(l.id) || v.Token != l.token {
			return l.lostTo(v)
		}
		var ms []*spanner.Mutation
		to, ms = s.handOffMutations(v, head, complete, l.name, l.id, "")
		if !l.queuedAt.IsZero() {
			// The entry we waited through, if a stray of ours took the
			// lock instead (joinWrite); a no-op otherwise.
			ms = append(ms, spanner.Delete(s.queueTable(), spanner.Key{l.name, l.queuedAt, l.id}))
		}
		return tx.BufferWrite(ms)
	})
	var lost *leaseLostError
	if errors.As(err, &lost) {
		return handOff{}, lost
	}
	if err != nil {
		return handOff{}, s.explain(ctx, err)
	}
	to.at = at
	return to, nil
}

// handOffMutations hands the lock, read as v and held by lease id from, to
// the oldest live entry of head, with the next token and the lease that
// waiter declared; dead entries it passes are deleted. With no live waiter
// the lock becomes NEEDED (free). An entry with the releasing lease's own id
// is a duplicate left by a join of unknown outcome: never hand the lock
// back to ourselves. With complete (head is the whole queue), a hand-off
// that leaves the queue empty says so in the row's Queued column
// (queue_mark.go).
func (s *spannerStore) handOffMutations(v row, head []*queueEntry, complete bool, name, from, skip string) (handOff, []*spanner.Mutation) {
	var ms []*spanner.Mutation
	for i, e := range head {
		ms = append(ms, spanner.Delete(s.queueTable(), spanner.Key{name, e.EnqueuedAt, e.WaiterID}))
		if s.takes(v, e, from, skip) {
			declared := time.Duration(e.LeaseMicros.Int64) * time.Microsecond
			m, token := s.holderMutation(v, name, holderRecord{owner: e.Owner.StringVal, leaseID: e.WaiterID, lease: declared})
			ms = s.markEmpty(append(ms, m), v, name, complete && i == len(head)-1)
			return handOff{owner: e.Owner.StringVal, waiterID: e.WaiterID, wakeAddr: e.WakeAddr.StringVal, token: token}, ms
		}
	}
	if !v.Exists {
		return handOff{}, ms // a pass-on of a lock with no row, to nobody live
	}
	ms = append(ms, spanner.Update(s.table, []string{"Name", "State", "UpdatedAt"},
		[]any{name, string(StateNeeded), spanner.CommitTimestamp}))
	return handOff{}, s.markEmpty(ms, v, name, complete)
}

// takes reports whether entry e may be handed the lock read as v, released
// by lease id from: it is live (renewed, itself or through its session,
// within waiterTTLFactor of its declared lease by Spanner's clock, v.Now),
// not from's own, and not of Scope skip (a silent holder's: passOn).
func (s *spannerStore) takes(v row, e *queueEntry, from, skip string) bool {
	declared := time.Duration(e.LeaseMicros.Int64) * time.Microsecond
	ttl := waiterTTLFactor * holderLease(row{Lease: declared}, s.lease)
	return v.Now.Sub(e.renewed()) < ttl && e.WaiterID != from && (skip == "" || scopeOf(e.WaiterID) != skip)
}

// handOffSQL reads, in one statement, the lock's row and the first
// handOffScan entries of its queue, oldest first: one result row per entry
// (the lock's columns repeated), or one with NULL entry columns when the
// queue is empty. On production a statement costs a round trip as a key
// read does, and the hand-off needs both.
func (s *spannerStore) handOffSQL(marked bool) string {
	q := s.entrySelectList()
	return fmt.Sprintf("SELECT CURRENT_TIMESTAMP(), m.`Name` IS NOT NULL, %s%s, %s "+
		"FROM (SELECT 1) AS one LEFT JOIN `%s` AS m ON m.`Name` = @name "+
		"LEFT JOIN (SELECT * FROM `%s` WHERE `Name` = @name ORDER BY `EnqueuedAt`, `WaiterID` LIMIT %d) AS q ON TRUE "+
		"ORDER BY q.`EnqueuedAt`, q.`WaiterID`",
		rowSelectList(), queuedSelect(marked), q, s.table, s.queueTable(), handOffScan)
}

// entrySelectList is what a statement selects of queue entry q: its
// queueEntryColumns and, if the table has sessions, its Session and that
// session's RenewedAt (NULL if it names none, or its row is gone).
func (s *spannerStore) entrySelectList() string {
	q := make([]string, len(queueEntryColumns))
	for i, c := range queueEntryColumns {
		q[i] = "q.`" + c + "`"
	}
	if s.sessioned() {
		q = append(q, "q.`Session`", "(SELECT qs.`RenewedAt` FROM `"+s.sessionsTable()+"` AS qs WHERE qs.`SessionID` = q.`Session`)")
	}
	return strings.Join(q, ", ")
}

// readForHandOff reads, in tx, the lock's row and the head of its queue up
// to the first entry that may take the lock: handOffSQL, then, while its
// pages hold only dead entries, further pages by key (readHead). It reads
// no clock: v.Now is the latest commit timestamp among what it read (the
// holder's acquisition or renewal, the entries' joins and renewals), a
// lower bound of Spanner's clock at this transaction. Judged by it, an
// entry looks younger than it is: a dead entry may be handed the lock
// (costing its lease, as a waiter that died just after its renewal would),
// but a live entry is never skipped as dead. The statement is in dialect d.
func (s *spannerStore) readForHandOff(ctx context.Context, tx *spanner.ReadWriteTransaction, d ddl.Dialect, name string) (row, []*queueEntry, bool, error) {
	marked := s.marked()
	it := tx.Query(ctx, sqldialect.Statement(d, s.handOffSQL(marked), map[string]any{"name": name}))
	var (
		v    row
		head []*queueEntry
	)
	err := it.Do(func(r *spanner.Row) error {
		var (
			queued spanner.NullBool
			e      joinedEntry
		)
		extra := e.dest(s.sessioned())
		if marked {
			extra = append([]any{&queued}, extra...)
		}
		got, err := decodeRow(r, extra...)
		if err != nil {
			return fmt.Errorf("spanmutex: decode lock %q of %s: %w", name, s.table, err)
		}
		v, v.Queued = got, queueMarkOf(queued)
		if e.at.Valid {
			head = append(head, e.entry())
		}
		return nil
	})
	if err != nil {
		return row{}, nil, false, err
	}
	if v.Exists && !v.State.valid() {
		return row{}, nil, false, s.unknownState(name, v.State)
	}
	v.Now = v.lastWritten()
	if s.headEnds(&v, head, true, "") {
		return v, head, len(head) < handOffScan, nil
	}
	more, complete, err := s.readHead(ctx, tx, d, name, head[len(head)-1], &v, true, "")
	return v, append(head, more...), complete, err
}

// readRowThenHead reads what readForHandOff does, by key: the row, then,
// unless its Queued column says the queue is empty, the queue's head
// (readHead). A lease not handed over (taken free, or taken over) most
// likely leaves the queue empty: then the key read and the Commit are the
// whole Unlock, as with the statement, and a key read costs the emulator a
// fraction of a statement. A queue found non-empty costs a round trip
// more; a lease handed over reads with the statement.
func (s *spannerStore) readRowThenHead(ctx context.Context, tx *spanner.ReadWriteTransaction, d ddl.Dialect, name string) (row, []*queueEntry, bool, error) {
	v, err := s.readRowIn(ctx, tx, name)
	if err != nil {
		return row{}, nil, false, err
	}
	if v.Exists && !v.State.valid() {
		return row{}, nil, false, s.unknownState(name, v.State)
	}
	v.Now = v.lastWritten()
	if v.Queued == markEmpty {
		return v, nil, true, nil
	}
	head, complete, err := s.readHead(ctx, tx, d, name, nil, &v, true, "")
	return v, head, complete, err
}

// joinedEntry receives a queue entry's columns from handOffSQL, NULL when
// the queue is empty.
type joinedEntry struct {
	at, renewed spanner.NullTime
	id, owner   spanner.NullString
	lease       spanner.NullInt64
	wake        spanner.NullString
	session     spanner.NullString
	sessionAt   spanner.NullTime
}

// dest returns the destinations of entrySelectList's columns, in their
// order: with sessioned, the session's two.
func (e *joinedEntry) dest(sessioned bool) []any {
	d := []any{&e.at, &e.id, &e.owner, &e.renewed, &e.lease, &e.wake}
	if sessioned {
		d = append(d, &e.session, &e.sessionAt)
	}
	return d
}

func (e *joinedEntry) entry() *queueEntry {
	return &queueEntry{EnqueuedAt: e.at.Time, WaiterID: e.id.StringVal, Owner: e.owner,
		RenewedAt: e.renewed.Time, LeaseMicros: e.lease, WakeAddr: e.wake, Session: e.session, SessionRenewedAt: e.sessionAt.Time}
}

// readHead reads, by key in tx, the lock's queue oldest first (after the
// entry after, if set), a page of
// handOffScan entries at a time, until a page holds an entry that may take
// the lock read as *v (takes) or the queue ends, so that however many dead
// entries lead the queue the hand-off reaches the first live one (they are
// deleted as it passes them). With bound, each entry read moves v.Now up
// to its latest commit timestamp (see readForHandOff). It reports whether
// it read the whole queue (complete: its last page was not full).
func (s *spannerStore) readHead(ctx context.Context, tx headReader, d ddl.Dialect, name string, after *queueEntry, v *row, bound bool, skip string) (head []*queueEntry, complete bool, err error) {
	for range maxHandOffPages {
		page, err := s.headPage(ctx, tx, d, name, after)
		if err != nil {
			return nil, false, err
		}
		head = append(head, page...)
		if s.headEnds(v, page, bound, skip) {
			return head, len(page) < handOffScan, nil
		}
		after = page[len(page)-1]
	}
	return head, false, nil
}

// headPage reads, in tx, up to handOffScan entries of the queue of lock
// name, oldest first, after entry after if set: by key, or, once the
// store has seen an entry that names a session (sawEntrySessions), in a
// statement (in dialect d) that reads with each entry its session's last
// renewal. On production a statement costs the round trip a key read
// does, and a read of the sessions after the page would cost another; on
// the emulator a statement costs several key reads, so a table whose
// waiters use no sessions keeps the key read. The first page found to
// hold an entry that names a session is read again by statement: one
// round trip more, once per store.
func (s *spannerStore) headPage(ctx context.Context, tx headReader, d ddl.Dialect, name string, after *queueEntry) ([]*queueEntry, error) {
	if s.sessioned() && s.sawEntrySessions.Load() {
		return s.headPageSQL(ctx, tx, d, name, after)
	}
	page, err := s.headPageByKey(ctx, tx, name, after)
	if err != nil || !s.sessioned() {
		return page, err
	}
	if slices.ContainsFunc(page, func(e *queueEntry) bool { return e.Session.Valid }) {
		s.sawEntrySessions.Store(true)
		return s.headPageSQL(ctx, tx, d, name, after)
	}
	return page, nil
}

// headPageSQL is headPage's statement: each entry with its session's last
// renewal.
func (s *spannerStore) headPageSQL(ctx context.Context, tx headReader, d ddl.Dialect, name string, after *queueEntry) ([]*queueEntry, error) {
	var page []*queueEntry
	where, params := "q.`Name` = @name", map[string]any{"name": name}
	if after != nil {
		where += " AND (q.`EnqueuedAt` > @at OR (q.`EnqueuedAt` = @at AND q.`WaiterID` > @id))"
		params["at"], params["id"] = after.EnqueuedAt, after.WaiterID
	}
	sql := fmt.Sprintf("SELECT %s FROM `%s` AS q WHERE %s ORDER BY q.`EnqueuedAt`, q.`WaiterID` LIMIT %d", s.entrySelectList(), s.queueTable(), where, handOffScan)
	err := tx.Query(ctx, sqldialect.Statement(d, sql, params)).Do(func(r *spanner.Row) error {
		var e joinedEntry
		if err := r.Columns(e.dest(true)...); err != nil {
			return err
		}
		page = append(page, e.entry())
		return nil
	})
	return page, err
}

// headPageByKey is headPage's key read; with sessions, it reads each
// entry's Session too.
func (s *spannerStore) headPageByKey(ctx context.Context, tx headReader, name string, after *queueEntry) ([]*queueEntry, error) {
	var page []*queueEntry
	var keys spanner.KeySet = spanner.Key{name}.AsPrefix()
	if after != nil {
		keys = spanner.KeyRange{Start: spanner.Key{name, after.EnqueuedAt, after.WaiterID}, End: spanner.Key{name}, Kind: spanner.OpenClosed}
	}
	cols := queueEntryColumns
	if s.sessioned() {
		cols = append(slices.Clip(cols), "Session")
	}
	it := tx.ReadWithOptions(ctx, s.queueTable(), keys, cols, &spanner.ReadOptions{Limit: handOffScan})
	err := it.Do(func(r *spanner.Row) error {
		e := &queueEntry{}
		if err := r.ToStruct(e); err != nil {
			return err
		}
		page = append(page, e)
		return nil
	})
	return page, err
}

// headEnds takes in page, a page of the queue read in order: with bound,
// each entry moves v.Now up to its latest commit timestamp (see
// readForHandOff). It reports whether the head is read to its end: the
// page holds an entry that may take the lock read as *v (takes), or it is
// the queue's last (not full).
func (s *spannerStore) headEnds(v *row, page []*queueEntry, bound bool, skip string) bool {
	if bound {
		for _, e := range page {
			v.Now = latest(v.Now, e.EnqueuedAt, e.renewed())
		}
	}
	for _, e := range page {
		if s.takes(*v, e, v.LeaseID, skip) {
			return true
		}
	}
	return len(page) < handOffScan
}

// headReader reads a range of rows in a read-write transaction of either
// kind.
type headReader interface {
	ReadWithOptions(ctx context.Context, table string, keys spanner.KeySet, columns []string, opts *spanner.ReadOptions) *spanner.RowIterator
	Query(ctx context.Context, statement spanner.Statement) *spanner.RowIterator
}

// readForLeave reads, in tx, the lock's row with Spanner's clock (readSQL:
// the hand-off of a leaving waiter judges the entries by the clock itself,
// not a lower bound of it) and the head of its queue (readHead).
func (s *spannerStore) readForLeave(ctx context.Context, tx *spanner.ReadWriteTransaction, d ddl.Dialect, name string) (row, []*queueEntry, bool, error) {
	v, err := s.queryRow(ctx, tx, d, name)
	if err != nil {
		return row{}, nil, false, err
	}
	head, complete, err := s.readHead(ctx, tx, d, name, nil, &v, false, "")
	return v, head, complete, err
}

// queueEntryColumns are queueEntry's columns, in its order.
var queueEntryColumns = []string{"EnqueuedAt", "WaiterID", "Owner", "RenewedAt", "LeaseMicros", "WakeAddr"}

// maxHandOffPages bounds the pages of dead entries one hand-off reads and
// deletes; past them it frees the lock, and the waiters poll.
const maxHandOffPages = 64

// queueEntry is an entry of the waiters' queue, as readHead reads it.
type queueEntry struct {
	EnqueuedAt  time.Time
	WaiterID    string
	Owner       spanner.NullString
	RenewedAt   time.Time
	LeaseMicros spanner.NullInt64
	WakeAddr    spanner.NullString
	// Session is the session of the waiter's Scope, if the entry names
	// one; SessionRenewedAt its last renewal, zero if not read or gone.
	Session          spanner.NullString
	SessionRenewedAt time.Time `spanner:"-"`
}

// renewed is when the entry was last proved alive: its own renewal or its
// session's, whichever is later (a commit timestamp).
func (e *queueEntry) renewed() time.Time { return latest(e.RenewedAt, e.SessionRenewedAt) }
