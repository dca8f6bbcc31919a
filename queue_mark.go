package spanmutex

import (
	"context"
	"time"

	"cloud.google.com/go/spanner"
)

// queueMark is what the lock row's Queued column says of its waiters'
// queue. The column lets an uncontended Lock and Unlock decide on the row
// alone, without reading the queue: two key reads fewer per cycle.
//
// The rule that keeps it true: every transaction that inserts a queue entry
// sets Queued to TRUE (unless it read it TRUE), and only a transaction
// that read the lock's whole queue and leaves it empty sets it to FALSE.
// Both write the row and read or write the queue, so they serialize
// (CORRECTNESS_DISCLAIMER.md, F1, F2): FALSE means the queue is empty.
// A TRUE with an empty queue (the waiters left) costs one queue read.
type queueMark int8

const (
	// markUnknown: NULL (a row written before the column was added, or by
	// a Mutex), or not read: the queue must be read.
	markUnknown queueMark = iota
	// markEmpty: FALSE, the queue is empty.
	markEmpty
	// markQueued: TRUE, the queue may hold entries.
	markQueued
)

// queueMarkOf decodes the Queued column.
func queueMarkOf(b spanner.NullBool) queueMark {
	switch {
	case !b.Valid:
		return markUnknown
	case b.Bool:
		return markQueued
	}
	return markEmpty
}

// Column states of the table's Queued column, an optional one
// (ddl.AddedMutexColumns): a table made by an earlier spanmutex works
// without it, reading the queue as before.
const (
	queuedUnchecked int32 = iota
	queuedPresent
	queuedAbsent
)

// marks reports whether the table has the Queued column (and records
// whether it has sessions: the Session column and the sessions table), reading
// INFORMATION_SCHEMA on the first call that gets an answer (checkSchema
// records it too), once per Scope (shared). A failed check answers no,
// and the next call checks again. An answer of no is checked again once
// it is queuedRecheck old: a table upgraded while we run (ddl --upgrade
// adds the column) must not leave our joins unmarked while processes that
// started after the upgrade trust the column's FALSE and overtake our
// entries (claim 12). Call it outside a transaction.
func (s *spannerStore) marks(ctx context.Context) bool {
	now := time.Now() // local: only ages a cached answer
	if st := s.queuedCol.Load(); st == queuedPresent || (st == queuedAbsent && !s.recheckDue(s.queuedAt.Load(), now)) {
		return st == queuedPresent
	}
	key := tableKey{database: s.client.DatabaseName(), table: s.table}
	if s.shared != nil {
		if v, ok := s.shared.queuedCols.Load(key); ok {
			if c := v.(queuedCheck); c.present || !s.recheckDue(c.at, now) {
				s.recordQueued(c.present, c.at)
				s.hasSessions.Store(c.sessions)
				return c.present
			}
		}
	}
	d, err := s.dialect.Get(ctx)
	if err != nil {
		return false
	}
	mutex, queue, sessions, err := s.describe(ctx, d)
	if err != nil {
		return false
	}
	have := columnTypes(mutex)
	if len(have) == 0 {
		return false
	}
	c := queuedCheck{present: have["Queued"] != "", at: now.UnixNano(), sessions: sessionsReady(have, columnTypes(queue), sessions)}
	s.recordQueued(c.present, c.at)
	s.hasSessions.Store(c.sessions)
	if s.shared != nil {
		s.shared.queuedCols.Store(key, c)
	}
	return c.present
}

// queuedCheck is what a check of the table's columns found of its Queued
// column, and the local time (UnixNano) it was made.
type queuedCheck struct {
	present bool
	at      int64
	// sessions: the table has the Session column, so rows are read with
	// their sessions (session_store.go); checkSchema checks the sessions
	// table once an error calls for it.
	sessions bool
}

// queuedRecheck is how long an answer that the table has no Queued column
// stands before it is checked again: how long after an upgrade adds it
// our joins may still leave it unset.
const queuedRecheck = time.Minute

// recheckDue reports whether an answer of no found at local time at
// (UnixNano) is to be checked again at now.
func (s *spannerStore) recheckDue(at int64, now time.Time) bool {
	return now.Sub(time.Unix(0, at)) >= s.queuedRecheck
}

// recordQueued records whether the mutex table holds the Queued column,
// as a check made at local time at (UnixNano) found.
func (s *spannerStore) recordQueued(present bool, at int64) {
	s.queuedAt.Store(at)
	if present {
		s.queuedCol.Store(queuedPresent)
	} else {
		s.queuedCol.Store(queuedAbsent)
	}
}

// marked reports whether the table's Queued column is known present: the
// rows read in a Lock's transactions then carry it.
func (s *spannerStore) marked() bool { return s.queuedCol.Load() == queuedPresent }

// markQueuedMutation sets the Queued column of lock row r, read in the
// transaction that inserts a queue entry, to TRUE: nil if the table has no
// such column, the row does not exist (no row: the queue is read), or r
// shows it TRUE already, so that joiners behind a waiting queue do not
// write the row.
func (s *spannerStore) markQueuedMutation(r row, name string) *spanner.Mutation {
	if !s.marked() || !r.Exists || r.Queued == markQueued {
		return nil
	}
	return s.queuedMutation(name, true)
}

// queuedMutation sets the Queued column of lock row name to queued.
func (s *spannerStore) queuedMutation(name string, queued bool) *spanner.Mutation {
	return spanner.Update(s.table, []string{"Name", "Queued"}, []any{name, queued})
}

// markEmpty appends to ms, the mutations of a change of holder of lock row
// r that leaves the queue empty (empty: its transaction read the whole
// queue and deletes or hands the lock to every entry it read; ms writes
// the row, inserting it if need be), the mutation that sets Queued to
// FALSE; ms as it is otherwise, or if the table has no such column or r
// says so already.
func (s *spannerStore) markEmpty(ms []*spanner.Mutation, r row, name string, empty bool) []*spanner.Mutation {
	if !empty || !s.marked() || r.Queued == markEmpty {
		return ms
	}
	return append(ms, s.queuedMutation(name, false))
}
