package spanmutex

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/spanner"
	"google.golang.org/api/iterator"

	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/internal/sqldialect"
)

// lockStore is the narrow interface between a Lock's waiting loop and
// Spanner, as mutexStore is for the run-once Mutex. The decisions stay in
// decideLock, a pure function; the store reads with Spanner's clock and
// writes in read-write transactions that decide again. Times in its answers
// are Spanner's.
type lockStore interface {
	renewer
	// read returns the lock's row and Spanner's clock from one strong,
	// lock-free snapshot.
	read(ctx context.Context, name string) (row, error)
	// glance returns the lock's row and Spanner's clock from one strong,
	// lock-free read by key, with the row's Queued mark (markUnknown where
	// the table has no such column): TryLock's first look.
	glance(ctx context.Context, name string) (row, error)
	// readAt returns the lock's row as it was at Spanner time at.
	readAt(ctx context.Context, name string, at time.Time) (row, error)
	// readLock returns the row, Spanner's clock, how many live entries are
	// queued before key (up to maxAhead) and whether key is queued. key.id
	// is the reader's waiter id even when key.at is endOfQueue's: its own
	// entries never count as before it.
	readLock(ctx context.Context, name string, key queueKey) (lockView, error)
	// acquireLock decides on the row and queue inside a read-write
	// transaction and takes the lock if it is free (or its holder silent
	// past its declared lease) and nobody live waits before key; with join,
	// it queues a contender that must wait and is not queued yet. It makes
	// one attempt: an abort is returned, not retried.
	acquireLock(ctx context.Context, name string, key queueKey, p policy, c claim, join bool) (acquireResult, error)
	// enqueue inserts entries at the back of the queue in one blind write
	// and returns its commit timestamp, which keys them.
	enqueue(ctx context.Context, name string, entries []queueInsert) (time.Time, error)
	// findQueued looks a waiter's entry up by its id.
	findQueued(ctx context.Context, name, waiterID string) (queueKey, bool, error)
	// renewWaiter proves a waiter alive, its entry then naming session
	// ("": none); NotFound if its entry is gone.
	renewWaiter(ctx context.Context, name string, key queueKey, session string) error
	// leave deletes every entry of waiterID and, if the lock was handed to
	// it, hands it on, in one read-write transaction: after it commits, no
	// hand-off can reach the waiter.
	leave(ctx context.Context, name, waiterID string) (handOff, error)
	// dequeue deletes the entry key with a blind write: it reads nothing,
	// so it waits for no lock.
	dequeue(ctx context.Context, name string, key queueKey) error
	// purgeWaiter deletes every entry of waiterID, a waiter that holds the
	// lock: one whose insert had an unknown outcome may remain.
	purgeWaiter(ctx context.Context, name, waiterID string) error
	// unlock releases the lock held under l, fenced, handing it to the
	// oldest live waiter in the same transaction.
	unlock(ctx context.Context, l *Lease) (handOff, error)
}

// maxAhead caps how many queue entries a waiter counts before its own, so
// that a poll reads a bounded number of rows however long the queue.
const maxAhead = 256

// handOffScan is how many queue entries Unlock reads to find a live one.
const handOffScan = 16

// lockSQL reads the lock's row, Spanner's clock, how many live entries are
// queued before key (capped at limit), whether key itself is queued, and,
// with empty, whether the queue has no entry at all (emptyRead; FALSE
// without), in one statement. @id is the reader's own waiter id, also when
// it is not queued (at is then endOfQueue's): its own entries are never
// before it. Entries of a silent holder's Scope do not count either
// (sameScopeAsSilent).
func (s *spannerStore) lockSQL(d ddl.Dialect, limit int, marked, empty bool) string {
	q := s.queueTable()
	emptyRead := "FALSE"
	if empty {
		emptyRead = "NOT EXISTS(SELECT 1 FROM `" + q + "` AS q WHERE q.`Name` = @name)"
	}
	return fmt.Sprintf("SELECT CURRENT_TIMESTAMP(), m.`Name` IS NOT NULL, %s, "+
		"(SELECT COUNT(*) FROM (SELECT 1 FROM `%s` AS q WHERE q.`Name` = @name "+
		"AND (q.`EnqueuedAt` < @at OR (q.`EnqueuedAt` = @at AND q.`WaiterID` < @id)) "+
		"AND q.`WaiterID` != @id AND %s AND NOT COALESCE(%s, FALSE) LIMIT %d) AS ahead), "+
		"EXISTS(SELECT 1 FROM `%s` AS q WHERE q.`Name` = @name AND q.`EnqueuedAt` = @at AND q.`WaiterID` = @id), "+
		"%s %s%s FROM (SELECT 1) AS one LEFT JOIN `%s` AS m ON m.`Name` = @name%s",
		rowSelectList(), q, liveEntry(d, s.entrySessions()), sameScopeAsSilent(d, s.sessioned()), limit, q, emptyRead, queuedSelect(marked),
		s.sessionSelect(), s.table, s.sessionJoin())
}

// queuedSelect is the Queued column of the row m, to end a SELECT list,
// when the table has it (marked); "" otherwise.
func queuedSelect(marked bool) string {
	if !marked {
		return ""
	}
	return ", m.`Queued`"
}

// sameScopeAsSilent is the SQL condition, on queue entry q and the lock's
// row m, that m's holder has gone silent past its declared lease (or
// @lease) by Spanner's clock (holderLive's rule: silentFor, which falls
// back on StartedAt and UpdatedAt, is at least the lease) and that q belongs to the holder's Scope (the
// last 12 characters of a waiter id name its Scope: scopeOf). A silent
// holder's process is taken to be dead or cut off, its other entries with
// it: they do not count as live, and the takeover deletes them
// (takeOverMutations), as etcd deletes a dead session's keys. In dialect d.
// With sessioned, m's session se is joined (sessionJoin), and a row held
// through it is judged as row.withSession does: silent once neither its
// own RenewedAt nor the session's renewal is within the session's lease
// (@lease if the session is gone).
func sameScopeAsSilent(d ddl.Dialect, sessioned bool) string {
	lease := "COALESCE(m.`LeaseMicros`, @lease)"
	session := ""
	if sessioned {
		lease = "CASE WHEN m.`Session` IS NULL THEN " + lease + " ELSE COALESCE(se.`LeaseMicros`, @lease) END"
		session = " AND (se.`RenewedAt` IS NULL OR se.`RenewedAt` <= " + sqldialect.SubMicros(d, "CURRENT_TIMESTAMP()", "COALESCE(se.`LeaseMicros`, 0)") + ")"
	}
	return "m.`State` = '" + string(StateStarted) + "' AND COALESCE(m.`RenewedAt`, m.`StartedAt`, m.`UpdatedAt`) <= " +
		sqldialect.SubMicros(d, "CURRENT_TIMESTAMP()", lease) + session +
		" AND SUBSTR(q.`WaiterID`, 25) = SUBSTR(m.`LeaseID`, 25)"
}

// queryLock runs lockSQL in dialect d; with empty, it reads whether the
// queue has any entry (emptyRead).
func (s *spannerStore) queryLock(ctx context.Context, q querier, d ddl.Dialect, name string, key queueKey, limit int, empty bool) (lockView, error) {
	marked := s.marked()
	it := q.Query(ctx, sqldialect.Statement(d, s.lockSQL(d, limit, marked, empty && marked), map[string]any{
		"name": name, "at": key.at, "id": key.id, "lease": s.lease.Microseconds(),
	}))
	defer it.Stop()
	r, err := it.Next()
	if err != nil {
		return lockView{}, err
	}
	var (
		v      lockView
		ahead  int64
		queued spanner.NullBool
		sess   scannedSession
	)
	extra := []any{&ahead, &v.queued, &v.emptyRead}
	if marked {
		extra = append(extra, &queued)
	}
	if v.row, err = decodeRow(r, append(extra, sess.dest(s.sessioned())...)...); err != nil {
		return lockView{}, fmt.Errorf("spanmutex: decode lock %q of %s: %w", name, s.table, err)
	}
	v.ahead, v.row.Queued = int(ahead), queueMarkOf(queued)
	v.row = sess.judge(v.row)
	s.sawSession(&sess)
	return v, nil
}

func (s *spannerStore) readLock(ctx context.Context, name string, key queueKey) (lockView, error) {
	s.stats.reads.Add(1)
	d, err := s.dialect.Get(ctx)
	if err != nil {
		return lockView{}, s.explain(ctx, err)
	}
	v, err := s.queryLock(ctx, taggedQuerier{s.client.Single(), tagPoll}, d, name, key, maxAhead, false)
	if err != nil {
		return lockView{}, s.explain(ctx, err)
	}
	s.reached.Store(true)
	return v, nil
}

// acquireLock makes one attempt, not retried when Spanner aborts it: a
// contender that loses a race for a free lock joins the queue rather than
// retrying, so that a crowd arriving at a free lock costs one attempt each,
// not a storm. Deciding needs only whether anyone live is before us (count
// to 1); a joiner counts on, to pace its polls by its place.
func (s *spannerStore) acquireLock(ctx context.Context, name string, key queueKey, p policy, c claim, join bool) (acquireResult, error) {
	dialect, err := s.dialect.Get(ctx) // before the transaction: see statement
	if err != nil {
		return acquireResult{}, s.explain(ctx, err)
	}
	s.marks(ctx) // likewise
	tx, err := spanner.NewReadWriteStmtBasedTransactionWithOptions(ctx, s.client,
		spanner.TransactionOptions{BeginTransactionOption: spanner.InlinedBeginTransaction, TransactionTag: tagAcquire})
	if err != nil {
		return acquireResult{}, s.explain(ctx, err)
	}
	s.stats.rwAttempts.Add(1)
	v, err := s.readToAcquire(ctx, tx, dialect, name, key, c.leaseID, join, c.wakeAddr != "")
	if err != nil {
		s.rollback(ctx, tx)
		return acquireResult{}, s.explain(ctx, err)
	}
	s.reached.Store(true)
	d := decideLock(v, c.leaseID, p) // Spanner's clock: CURRENT_TIMESTAMP() of this transaction.
	var (
		ms  []*spanner.Mutation
		res acquireResult
	)
	switch {
	case d.action == lockAcquire || d.action == lockTakeOver:
		if d.action == lockTakeOver {
			if err := s.deleteSilentScope(ctx, tx, dialect, name, v.row, c.leaseID); err != nil {
				s.rollback(ctx, tx)
				return acquireResult{}, s.explain(ctx, err)
			}
		}
		m, token := s.holderMutation(v.row, name, holderRecord{owner: c.owner, leaseID: c.leaseID, lease: p.lease, session: c.session})
		ms, res.token = s.withSessionInsert(append(ms, m), c.startSession), token
		ms = s.markEmpty(ms, v.row, name, v.emptyRead)
		if v.queued {
			ms = append(ms, spanner.Delete(s.queueTable(), spanner.Key{name, key.at, key.id}))
		}
	case d.action == lockPassOn && key != endOfQueue:
		var err error
		if res.handed, ms, err = s.passOn(ctx, tx, dialect, name, v.row, c.leaseID); err != nil {
			s.rollback(ctx, tx)
			return acquireResult{}, s.explain(ctx, err)
		}
	case (d.action == lockWait || d.action == lockPassOn) && join && key == endOfQueue:
		ms = append(ms, s.enqueueMutation(name, queueInsert{id: c.leaseID, owner: c.owner, lease: p.lease, wakeAddr: c.wakeAddr, session: c.session}))
		ms = s.withSessionInsert(ms, c.startSession)
		if m := s.markQueuedMutation(v.row, name); m != nil {
			ms = append(ms, m)
		}
	default:
		s.contended.Store(true)
		s.rollback(ctx, tx)
		return acquireResult{decision: d, key: endOfQueue}, nil
	}
	if err := tx.BufferWrite(ms); err != nil {
		s.rollback(ctx, tx)
		return acquireResult{}, err
	}
	s.contended.Store(d.action != lockAcquire)
	commitTS, err := tx.Commit(ctx)
	if err != nil {
		return acquireResult{sent: true}, s.explain(ctx, err)
	}
	if d.action == lockPassOn && key != endOfQueue {
		res.decision, res.key, res.handed.at = d, endOfQueue, commitTS
		return res, nil
	}
	if d.action == lockWait || d.action == lockPassOn {
		return acquireResult{decision: lockDecision{action: lockWait}, key: queueKey{at: commitTS, id: c.leaseID}, view: v}, nil
	}
	lease := newLease(name, c.owner, c.leaseID, res.token, d.action == lockTakeOver, s.table)
	lease.acquiredAt, lease.session = commitTS, c.session
	return acquireResult{decision: d, lease: lease, key: endOfQueue}, nil
}

// passOn hands the lock, read in tx as r, free or held by a holder silent
// past its lease, to the first live entry of its queue that is not of the
// silent holder's Scope (those are deleted: deleteSilentScope), as the
// holder's Unlock would have; contender me, who found live waiters before
// it, does it for them. It returns whom it handed the lock to (nobody: the
// lock is freed) and the mutations.
func (s *spannerStore) passOn(ctx context.Context, tx *spanner.ReadWriteStmtBasedTransaction, d ddl.Dialect, name string, r row, me string) (handOff, []*spanner.Mutation, error) {
	if err := s.deleteSilentScope(ctx, tx, d, name, r, me); err != nil {
		return handOff{}, nil, err
	}
	skip := silentScope(r, me)
	head, complete, err := s.readHead(ctx, tx, d, name, nil, &r, false, skip)
	if err != nil {
		return handOff{}, nil, err
	}
	to, ms := s.handOffMutations(r, head, complete, name, r.LeaseID, skip)
	return to, ms, nil
}

// silentScope is the Scope whose entries go silent with the holder of r,
// silent past its lease, as contender me sees it: the holder's Scope,
// unless it is me's own (me runs, so its process is not dead); none when
// the lock is free (a pass-on of a free lock: nobody went silent).
func silentScope(r row, me string) string {
	if scope := scopeOf(r.LeaseID); r.State == StateStarted && scope != scopeOf(me) {
		return scope
	}
	return ""
}

// deleteSilentScope deletes, in tx, the queue entries of the Scope of the
// silent holder that contender me takes the lock over from (r): they went
// silent with it (sameScopeAsSilent), and left in the queue they would be
// handed the lock one after another, each costing a lease. A waiter of
// that Scope that is alive after all finds its entry gone and joins again.
// Nothing is deleted when me is of the holder's Scope.
func (s *spannerStore) deleteSilentScope(ctx context.Context, tx *spanner.ReadWriteStmtBasedTransaction, d ddl.Dialect, name string, r row, me string) error {
	scope := silentScope(r, me)
	if scope == "" {
		return nil
	}
	_, err := tx.Update(ctx, sqldialect.Statement(d, fmt.Sprintf("DELETE FROM `%s` WHERE `Name` = @name AND SUBSTR(`WaiterID`, 25) = @scope", s.queueTable()),
		map[string]any{"name": name, "scope": scope}))
	return err
}

// readToAcquire reads, in tx, what decideLock needs: the row, Spanner's
// clock, and the live entries before key (up to one, or maxAhead for a
// joiner, which paces its polls by its place). An arrival (not queued)
// first tries key reads, which cost a fraction of lockSQL's statement,
// while this store last found the lock uncontended or when the joiner is
// woken by wake-ups (wakeable) and so need not know its place (readByKey);
// but not right after TryLock's glance found no row (noRow), when the
// queue is to be read too: lockSQL reads both in one round trip. Anything
// else is decided on lockSQL's answer, read in the same
// transaction; me is the contender's id, whose own entries are never
// before it.
func (s *spannerStore) readToAcquire(ctx context.Context, tx *spanner.ReadWriteStmtBasedTransaction, d ddl.Dialect, name string, key queueKey, me string, join, wakeable bool) (lockView, error) {
	noRow := s.noRow.Swap(false)
	if key == endOfQueue && ((!s.contended.Load() && !noRow) || (join && wakeable)) {
		v, decided, err := s.readByKey(ctx, tx, name, join && wakeable)
		if err != nil || decided {
			return v, err
		}
	}
	limit := 1
	if join {
		limit = maxAhead
	}
	return s.queryLock(ctx, tx, d, name, queueKey{at: key.at, id: me}, limit, noRow)
}

// readByKey reads the lock's row and, if it is free, whether its queue has
// any entry, by key, and reports whether v decides the arrival:
//   - a free row with an empty queue: taken whatever the time (Now unset);
//   - with uncounted, a row held by a holder that looks live by a lower
//     bound of Spanner's clock (the latest commit timestamp in the row): the
//     arrival queues behind it, its place not counted (v.uncounted). A
//     holder that is live by the true clock looks live by the bound, and
//     one that looks silent even so is decided on lockSQL's clock.
func (s *spannerStore) readByKey(ctx context.Context, tx *spanner.ReadWriteStmtBasedTransaction, name string, uncounted bool) (lockView, bool, error) {
	r, err := s.readRowIn(ctx, tx, name)
	if err != nil {
		return lockView{}, false, err
	}
	if uncounted && r.Exists && r.State == StateStarted {
		if r.Session != "" {
			return lockView{}, false, nil // judged with its session by lockSQL
		}
		r.Now = r.lastWritten()
		return lockView{row: r, ahead: 1, uncounted: true}, holderLive(r, s.lease), nil
	}
	if r.Exists && r.State != StateNeeded {
		return lockView{}, false, nil
	}
	if r.Queued == markEmpty {
		return lockView{row: r}, true, nil // the row says the queue is empty
	}
	it := tx.ReadWithOptions(ctx, s.queueTable(), spanner.Key{name}.AsPrefix(), []string{"WaiterID"}, &spanner.ReadOptions{Limit: 1})
	defer it.Stop()
	_, err = it.Next()
	switch {
	case errors.Is(err, iterator.Done):
		return lockView{row: r, emptyRead: true}, true, nil
	case err != nil:
		return lockView{}, false, err
	}
	return lockView{}, false, nil
}

// glance reads the row by key in a strong single-use read, with its Queued
// mark and the read's timestamp as Now. A key read costs a fraction of
// lockSQL's statement on the emulator, where a crowd of TryLock callers
// (queue workers) would otherwise keep the emulator busy with statements.
func (s *spannerStore) glance(ctx context.Context, name string) (row, error) {
	s.marks(ctx) // whether to read the Queued column
	s.stats.reads.Add(1)
	ro := s.client.Single()
	defer ro.Close()
	r, err := s.readRowIn(ctx, taggedReader{ro, tagLook}, name)
	switch {
	case err != nil:
		return row{}, s.explain(ctx, err)
	case r.Exists && !r.State.valid():
		return row{}, s.unknownState(name, r.State)
	}
	if r.Now, err = ro.Timestamp(); err != nil {
		return row{}, fmt.Errorf("spanmutex: read lock %q of %s: no read timestamp: %w", name, s.table, err)
	}
	s.reached.Store(true)
	s.noRow.Store(!r.Exists)
	return s.sessionRead(ctx, r, s.client.Single)
}

// rollback ends a transaction that will not commit. It does so with a ctx of
// its own: the caller's may be what ended it, and a transaction left open
// holds its locks on the emulator until it times out.
func (s *spannerStore) rollback(ctx context.Context, tx *spanner.ReadWriteStmtBasedTransaction) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
	defer cancel()
	tx.Rollback(rctx)
}

// rollbackTimeout bounds a rollback sent after the caller's ctx ended.
const rollbackTimeout = 5 * time.Second

// acquireResult is what acquireLock decided and did: the lease if it took
// the lock; the key of our new entry if it queued us, with what the
// transaction read (the lock's token, and the live entries before the new
// entry, up to maxAhead). With an error, sent reports whether the commit
// was sent: if not, nothing was written.
type acquireResult struct {
	decision lockDecision
	handed   handOff  // whom a pass-on (lockPassOn) handed the lock to
	view     lockView // what the transaction read, when it queued us
	lease    *Lease
	key      queueKey
	sent     bool
	token    int64 // the token the acquisition wrote (holderMutation)
}

// wroteAt is the commit timestamp of an acquisition that wrote the
// claim's holder or entry (and with it the claim's session, and the
// session's row if it started it): the lease's acquisition, or the entry's
// key; zero if it wrote neither.
func (r acquireResult) wroteAt() time.Time {
	switch {
	case r.lease != nil:
		return r.lease.acquiredAt
	case r.key != endOfQueue:
		return r.key.at
	}
	return time.Time{}
}
