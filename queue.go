package spanmutex

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/spanner"
	"google.golang.org/api/iterator"

	"github.com/spanmutex/spanmutex/ddl"
)

// maxAhead caps how many queue entries a waiter counts before its own, so
// that a poll reads a bounded number of rows however long the queue.
const maxAhead = 256

// handOffScan is how many queue entries Unlock reads to find a live one.
const handOffScan = 16

// queueKey is a waiter's entry in the queue.
type queueKey struct {
	at time.Time // EnqueuedAt, the insert's commit timestamp
	id string    // WaiterID
}

// endOfQueue stands for "not queued": every entry is before it.
var endOfQueue = queueKey{at: time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)}

func (s *spannerStore) queueTable() string { return s.table + ddl.QueueSuffix }

// lockSQL reads the lock's row, Spanner's clock, how many live entries are
// queued before key (capped at limit), and whether key itself is queued, in
// one statement.
func (s *spannerStore) lockSQL(limit int) string {
	q := s.queueTable()
	return fmt.Sprintf("SELECT CURRENT_TIMESTAMP(), m.Name IS NOT NULL, %s, "+
		"(SELECT COUNT(*) FROM (SELECT 1 FROM `%s` AS q WHERE q.Name = @name "+
		"AND (q.EnqueuedAt < @at OR (q.EnqueuedAt = @at AND q.WaiterID < @id)) "+
		"AND q.RenewedAt >= TIMESTAMP_SUB(CURRENT_TIMESTAMP(), INTERVAL @ttl MICROSECOND) LIMIT %d)), "+
		"EXISTS(SELECT 1 FROM `%s` AS q WHERE q.Name = @name AND q.EnqueuedAt = @at AND q.WaiterID = @id) "+
		"FROM UNNEST([1]) AS one LEFT JOIN `%s` AS m ON m.Name = @name",
		rowSelectList(), q, limit, q, s.table)
}

func (s *spannerStore) queryLock(ctx context.Context, q querier, name string, key queueKey, ttl time.Duration, limit int) (lockView, error) {
	it := q.Query(ctx, spanner.Statement{SQL: s.lockSQL(limit), Params: map[string]any{
		"name": name, "at": key.at, "id": key.id, "ttl": ttl.Microseconds(),
	}})
	defer it.Stop()
	r, err := it.Next()
	if err != nil {
		return lockView{}, err
	}
	var (
		v     lockView
		ahead int64
	)
	if v.row, err = decodeRow(r, &ahead, &v.queued); err != nil {
		return lockView{}, fmt.Errorf("spanmutex: decode lock %q of %s: %w", name, s.table, err)
	}
	v.ahead = int(ahead)
	return v, nil
}

// readLock is queryLock on a strong, lock-free snapshot.
func (s *spannerStore) readLock(ctx context.Context, name string, key queueKey, ttl time.Duration) (lockView, error) {
	s.stats.reads.Add(1)
	v, err := s.queryLock(ctx, s.client.Single(), name, key, ttl, maxAhead)
	if err != nil {
		return lockView{}, s.explain(ctx, err)
	}
	s.reached.Store(true)
	return v, nil
}

// blindWrite commits ms in a write-only read-write transaction, retried by
// the client when Spanner aborts it, and returns its commit timestamp. Such
// a transaction reads nothing, so it waits for no lock before its commit;
// every attempt, aborted ones included, counts as a blind write.
func (s *spannerStore) blindWrite(ctx context.Context, ms []*spanner.Mutation) (time.Time, error) {
	return s.client.ReadWriteTransaction(ctx, func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
		s.stats.blindWrites.Add(1)
		return tx.BufferWrite(ms)
	})
}

// enqueueMutation inserts a waiter's entry, keyed by the commit timestamp.
func (s *spannerStore) enqueueMutation(name, owner, waiterID string) *spanner.Mutation {
	return spanner.Insert(s.queueTable(),
		[]string{"Name", "EnqueuedAt", "WaiterID", "Owner", "RenewedAt"},
		[]any{name, spanner.CommitTimestamp, waiterID, owner, spanner.CommitTimestamp})
}

// findQueued looks a waiter's entry up by its id, to settle an enqueue whose
// commit outcome is unknown. It returns false if there is none.
func (s *spannerStore) findQueued(ctx context.Context, name, waiterID string) (queueKey, bool, error) {
	s.stats.reads.Add(1)
	stmt := spanner.Statement{
		SQL:    fmt.Sprintf("SELECT EnqueuedAt FROM `%s` WHERE Name = @name AND WaiterID = @id", s.queueTable()),
		Params: map[string]any{"name": name, "id": waiterID},
	}
	it := s.client.Single().Query(ctx, stmt)
	defer it.Stop()
	r, err := it.Next()
	if errors.Is(err, iterator.Done) {
		return queueKey{}, false, nil
	}
	if err != nil {
		return queueKey{}, false, s.explain(ctx, err)
	}
	var at time.Time
	if err := r.Columns(&at); err != nil {
		return queueKey{}, false, err
	}
	return queueKey{at: at, id: waiterID}, true, nil
}

// renewWaiter proves the waiter alive with a blind update of its entry. It
// fails with NotFound if the entry is gone (skipped as dead).
func (s *spannerStore) renewWaiter(ctx context.Context, name string, key queueKey) error {
	_, err := s.blindWrite(ctx, []*spanner.Mutation{spanner.Update(s.queueTable(),
		[]string{"Name", "EnqueuedAt", "WaiterID", "RenewedAt"},
		[]any{name, key.at, key.id, spanner.CommitTimestamp})})
	return err
}

// purgeWaiter deletes every queue entry with waiterID, including entries
// whose insert had an unknown outcome and whose key we never learnt.
func (s *spannerStore) purgeWaiter(ctx context.Context, name, waiterID string) error {
	_, err := s.client.ReadWriteTransaction(ctx, func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
		s.stats.rwAttempts.Add(1)
		_, err := tx.Update(ctx, spanner.Statement{
			SQL:    fmt.Sprintf("DELETE FROM `%s` WHERE Name = @name AND WaiterID = @id", s.queueTable()),
			Params: map[string]any{"name": name, "id": waiterID},
		})
		return err
	})
	return err
}

// acquireLock re-reads the lock and the queue in a read-write transaction,
// decides with decideLock, and if the lock is free (or abandoned) and nobody
// live waits before key, takes it: STARTED, the next token, our claim id,
// and our queue entry removed. If it must wait, and join is set and we are
// not queued (key is endOfQueue), the same transaction inserts our entry at
// the back of the queue, and the entry's key is returned: arriving costs
// one read-write transaction whether the lock is free or not.
//
// It makes exactly one attempt: unlike other transactions here it is not
// retried when Spanner aborts it, and returns the Aborted error instead. A
// contender that loses such a race joins the queue rather than retrying, so
// that a crowd arriving at a free lock costs one attempt each, not a storm.
func (s *spannerStore) acquireLock(ctx context.Context, name string, key queueKey, p policy, c claim, ttl time.Duration, join bool) (acquireResult, error) {
	tx, err := spanner.NewReadWriteStmtBasedTransactionWithOptions(ctx, s.client,
		spanner.TransactionOptions{BeginTransactionOption: spanner.InlinedBeginTransaction})
	if err != nil {
		return acquireResult{}, s.explain(ctx, err)
	}
	s.stats.rwAttempts.Add(1)
	// Deciding needs only whether anyone live is before us: count to 1;
	// a joiner counts on, to pace its polls by its place.
	limit := 1
	if join {
		limit = maxAhead
	}
	v, err := s.queryLock(ctx, tx, name, key, ttl, limit)
	if err != nil {
		tx.Rollback(ctx)
		return acquireResult{}, s.explain(ctx, err)
	}
	s.reached.Store(true)
	d := decideLock(v, c.leaseID, p) // Spanner's clock: CURRENT_TIMESTAMP() of this transaction.
	var ms []*spanner.Mutation
	switch {
	case d.action == lockAcquire || d.action == lockTakeOver:
		ms = append(ms, s.holderMutation(v.row, name, c.owner, c.leaseID))
		if v.queued {
			ms = append(ms, spanner.Delete(s.queueTable(), spanner.Key{name, key.at, key.id}))
		}
	case d.action == lockWait && join && key == endOfQueue:
		ms = append(ms, s.enqueueMutation(name, c.owner, c.leaseID))
	default:
		tx.Rollback(ctx)
		return acquireResult{decision: d, key: endOfQueue}, nil
	}
	if err := tx.BufferWrite(ms); err != nil {
		tx.Rollback(ctx)
		return acquireResult{}, err
	}
	commitTS, err := tx.Commit(ctx)
	if err != nil {
		return acquireResult{sent: true}, s.explain(ctx, err)
	}
	if d.action == lockWait {
		return acquireResult{decision: d, key: queueKey{at: commitTS, id: c.leaseID}, ahead: v.ahead, token: v.Token}, nil
	}
	lease := newLease(name, c.owner, c.leaseID, v.Token+1, d.action == lockTakeOver, s.table)
	lease.acquiredAt = commitTS
	return acquireResult{decision: d, lease: lease, key: endOfQueue}, nil
}

// acquireResult is what acquireLock decided and did: the lease if it took
// the lock; the key of our new entry if it queued us, with the live entries
// before it (up to maxAhead) and the lock's token. With an error, sent
// reports whether the commit was sent: if not, nothing was written.
type acquireResult struct {
	decision lockDecision
	lease    *Lease
	key      queueKey
	ahead    int
	token    int64
	sent     bool
}

// holderMutation makes owner (with lease id leaseID) the holder of the lock
// whose row was read as r, with the next token.
func (s *spannerStore) holderMutation(r row, name, owner, leaseID string) *spanner.Mutation {
	cols := []string{"Name", "State", "Owner", "LeaseID", "Token", "Attempts", "StartedAt", "RenewedAt", "FinishedAt", "UpdatedAt"}
	vals := []any{name, string(StateStarted), owner, leaseID, r.Token + 1, int64(0),
		spanner.CommitTimestamp, spanner.CommitTimestamp, nil, spanner.CommitTimestamp}
	if !r.Exists {
		return spanner.Insert(s.table, append(cols, "CreatedAt"), append(vals, spanner.CommitTimestamp))
	}
	return spanner.Update(s.table, cols, vals)
}

// unlock releases the lock held under l, fenced, and in the same
// transaction hands it to the oldest live waiter, with the next token; dead
// entries it passes are deleted. With no live waiter the lock becomes NEEDED
// (free). It returns the waiter it handed the lock to, or a zero handOff.
func (s *spannerStore) unlock(ctx context.Context, l *Lease, ttl time.Duration) (handOff, error) {
	var to handOff
	_, err := s.client.ReadWriteTransaction(ctx, func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
		s.stats.rwAttempts.Add(1)
		to = handOff{}
		v, head, err := s.queryUnlock(ctx, tx, l.name)
		if err != nil {
			return err
		}
		if !v.Exists || v.State != StateStarted || v.LeaseID != l.id || v.Token != l.token {
			return &LeaseLostError{Name: l.name, Token: l.token, CurrentState: v.State, CurrentOwner: v.Owner,
				CurrentToken: v.Token, currentLeaseID: v.LeaseID}
		}
		var ms []*spanner.Mutation
		for _, e := range head {
			ms = append(ms, spanner.Delete(s.queueTable(), spanner.Key{l.name, e.EnqueuedAt, e.WaiterID}))
			// Spanner's clock: the waiter is live if it renewed its entry
			// within ttl of this transaction's CURRENT_TIMESTAMP(). An entry
			// with the unlocking lease's own id is a duplicate left by a join
			// of unknown outcome: never hand the lock back to ourselves.
			if v.Now.Sub(e.RenewedAt) < ttl && e.WaiterID != l.id {
				to = handOff{owner: e.Owner.StringVal, waiterID: e.WaiterID}
				ms = append(ms, s.holderMutation(v, l.name, e.Owner.StringVal, e.WaiterID))
				break
			}
		}
		if to.waiterID == "" {
			ms = append(ms, spanner.Update(s.table, []string{"Name", "State", "UpdatedAt"},
				[]any{l.name, string(StateNeeded), spanner.CommitTimestamp}))
		}
		return tx.BufferWrite(ms)
	})
	var lost *LeaseLostError
	if errors.As(err, &lost) {
		return handOff{}, lost
	}
	if err != nil {
		return handOff{}, s.explain(ctx, err)
	}
	return to, nil
}

// queueEntry is an entry of the waiters' queue, as unlockSQL reads it.
type queueEntry struct {
	EnqueuedAt time.Time
	WaiterID   string
	Owner      spanner.NullString
	RenewedAt  time.Time
}

// unlockSQL reads the lock's row, Spanner's clock and the first
// handOffScan entries of the queue, oldest first, in one statement.
func (s *spannerStore) unlockSQL() string {
	return fmt.Sprintf("SELECT CURRENT_TIMESTAMP(), m.Name IS NOT NULL, %s, "+
		"ARRAY(SELECT AS STRUCT q.EnqueuedAt, q.WaiterID, q.Owner, q.RenewedAt FROM `%s` AS q "+
		"WHERE q.Name = @name ORDER BY q.EnqueuedAt, q.WaiterID LIMIT %d) "+
		"FROM UNNEST([1]) AS one LEFT JOIN `%s` AS m ON m.Name = @name",
		rowSelectList(), s.queueTable(), handOffScan, s.table)
}

// queryUnlock runs unlockSQL.
func (s *spannerStore) queryUnlock(ctx context.Context, q querier, name string) (row, []*queueEntry, error) {
	it := q.Query(ctx, spanner.Statement{SQL: s.unlockSQL(), Params: map[string]any{"name": name}})
	defer it.Stop()
	r, err := it.Next()
	if err != nil {
		return row{}, nil, err
	}
	var head []*queueEntry
	v, err := decodeRow(r, &head)
	if err != nil {
		return row{}, nil, fmt.Errorf("spanmutex: decode lock %q of %s: %w", name, s.table, err)
	}
	if v.Exists && !v.State.Valid() {
		return row{}, nil, fmt.Errorf("spanmutex: row %q of %s has unknown state %q, written by something other than spanmutex; fix or delete the row", name, s.table, v.State)
	}
	return v, head, nil
}

// handOff is the waiter an unlock handed the lock to: its owner identity
// and its waiter id, which is also its lease id.
type handOff struct {
	owner, waiterID string
}
