package spanmutex

import (
	"context"

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

// marks reports whether the table has the Queued column, reading
// INFORMATION_SCHEMA on the first call that gets an answer (checkSchema
// records it too), once per Scope (shared). A failed check answers no,
// and the next call checks again. Call it outside a transaction.
func (s *spannerStore) marks(ctx context.Context) bool {
	if st := s.queuedCol.Load(); st != queuedUnchecked {
		return st == queuedPresent
	}
	key := tableKey{database: s.client.DatabaseName(), table: s.table}
	if s.shared != nil {
		if st, ok := s.shared.queuedCols.Load(key); ok {
			s.queuedCol.Store(st.(int32))
			return st == queuedPresent
		}
	}
	d, err := s.dialect.Get(ctx)
	if err != nil {
		return false
	}
	have, _, err := s.columns(ctx, d)
	if err != nil || len(have) == 0 {
		return false
	}
	s.recordQueued(have)
	if s.shared != nil {
		s.shared.queuedCols.Store(key, s.queuedCol.Load())
	}
	return s.queuedCol.Load() == queuedPresent
}

// recordQueued records whether the mutex table's columns have holds Queued.
func (s *spannerStore) recordQueued(have map[string]string) {
	if have["Queued"] != "" {
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
