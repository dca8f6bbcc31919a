package spanmutex

import (
	"context"
	"slices"
	"time"

	"cloud.google.com/go/spanner"
	"google.golang.org/grpc/codes"

	"github.com/spanmutex/spanmutex/ddl"
)

// queueKey is a waiter's entry in the queue.
type queueKey struct {
	at time.Time // EnqueuedAt, the insert's commit timestamp
	id string    // WaiterID
}

// semEntry is one entry of a semaphore's queue: a waiter (token 0) or a
// holder (token set when it was granted).
type semEntry struct {
	at      time.Time
	id      string
	owner   string
	renewed time.Time
	lease   time.Duration // declared; 0: the reader's own
	permits int64         // 0: a Lock's entry, not the semaphore's: ignored
	token   int64         // 0 while waiting
	wake    string
	// session is the session of its Scope the entry names ("": none, or
	// not read: the table has no sessions); throughSession, that it is a
	// holder held through that session (it declares sessionHeldLease),
	// judged by it (withSession).
	session        string
	throughSession bool
}

// key is the entry's primary key within its name, in UTC so that keys
// compare with ==.
func (e semEntry) key() queueKey { return queueKey{at: e.at.UTC(), id: e.id} }

// endOfQueue stands for "not queued": every entry is before it.
var endOfQueue = queueKey{at: time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)}

// queueInsert is a waiter's entry to insert: its id, owner identity and the
// lease it declares, and the session of its Scope, if it names one (see
// ddl/queue.sql).
type queueInsert struct {
	id, owner, wakeAddr, session string
	lease                        time.Duration
	// start is the session's row if the insert starts the session
	// (session.next): the commit inserts it too.
	start *sessionRow
}

// startsSessions returns the distinct session rows that entries start.
func startsSessions(entries []queueInsert) []*sessionRow {
	var rows []*sessionRow
	for _, e := range entries {
		if e.start != nil && !slices.ContainsFunc(rows, func(r *sessionRow) bool { return r.id == e.start.id }) {
			rows = append(rows, e.start)
		}
	}
	return rows
}

// handOff is the waiter an unlock handed the lock to: its owner identity,
// its waiter id, which is also its lease id, and where its process listens
// for wake-ups, if it does; with the token it was given and the commit's
// timestamp.
type handOff struct {
	owner, waiterID, wakeAddr string
	token                     int64
	at                        time.Time
}

func (s *spannerStore) queueTable() string { return s.table + ddl.QueueSuffix }

// insertEntries inserts entries in one single-use commit (joinWrite) and
// returns its commit timestamp. With mark (a Lock's waiters: not a
// run-once section's watchers, whose row never reads its Queued column),
// it sets the lock row's Queued column in the same commit.
func (s *spannerStore) insertEntries(ctx context.Context, name string, entries []queueInsert, mark bool) (time.Time, error) {
	ms := make([]*spanner.Mutation, len(entries))
	for i, e := range entries {
		ms[i] = s.enqueueMutation(name, e)
	}
	for _, r := range startsSessions(entries) {
		ms = append(ms, s.sessionInsert(r))
	}
	inserts := len(ms)
	marked := mark && s.marks(ctx)
	if marked {
		// Blind: the row's Queued is not read, so it is set whatever it
		// says (queue_mark.go).
		ms = append(ms, s.queuedMutation(name, true))
	}
	ts, err := s.joinWrite(ctx, ms)
	if marked && spanner.ErrCode(err) == codes.NotFound {
		// No lock row yet (its first acquisition is under way): insert
		// the entries reading the row, which marks it if it now exists.
		ts, err = s.enqueueReading(ctx, name, ms[:inserts])
	}
	if err != nil {
		return ts, s.explain(ctx, err)
	}
	return ts, nil
}

// enqueueReading commits the entry inserts ms after reading the lock's row
// in the same transaction, and sets its Queued column if the row exists
// (markQueuedMutation). Reading the row, absent or not, serializes the
// insert with the row's insertion (F2): an acquisition that read the queue
// empty and inserts the row with Queued FALSE either commits first, and is
// read here, or reads our entries.
func (s *spannerStore) enqueueReading(ctx context.Context, name string, ms []*spanner.Mutation) (time.Time, error) {
	return s.rw(ctx, tagJoin, func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
		s.stats.rwAttempts.Add(1)
		r, err := s.readRowIn(ctx, tx, name)
		if err != nil {
			return err
		}
		all := ms
		if m := s.markQueuedMutation(r, name); m != nil {
			all = append(slices.Clip(ms), m)
		}
		return tx.BufferWrite(all)
	})
}

// joinWrite commits a join's mutations ms in one single-use commit (one
// RPC, where a read-write transaction sends BeginTransaction and Commit)
// and returns its commit timestamp. It reads nothing, so it waits for no
// lock. The client sends the commit again when Spanner aborts it or its
// answer is lost (UNAVAILABLE), and a lost answer's send may have been
// applied: an entry of ours then stays in the queue under that send's
// key, which we never learn, ahead of the entry we know. Such a stray
// carries our id and our declared lease, so it costs nobody but us:
//   - a hand-off to it is a hand-off to us, and we find it by our id in
//     the row, as for the entry we know;
//   - it is never renewed, so it lapses after its time to live;
//   - no Unlock hands the lock to its own releaser's id (takes), every
//     entry an Unlock passes is deleted, and our Unlock deletes the entry
//     we know (a stray handed the lock leaves it behind);
//   - leaving deletes every entry of our id, and an Unlock of our Scope
//     that hands the lock to a stray after our call hands it on (the
//     call is an orphan until its entries expire: Lock.acquire).
//
// At worst a stray reached by another process's Unlock after we are gone
// is handed the lock and costs the waiters its lease, as a waiter that
// dies just after renewing its entry does.
func (s *spannerStore) joinWrite(ctx context.Context, ms []*spanner.Mutation) (time.Time, error) {
	s.stats.blindWrites.Add(1)
	return s.client.Apply(ctx, ms, spanner.ApplyAtLeastOnce(), spanner.TransactionTag(tagJoin))
}

// idempotentWrite commits ms in one single-use commit (one RPC), for
// mutations that may be applied more than once with the effect of once:
// the client re-sends the commit when Spanner aborts it or does not
// answer, and an earlier send may have been applied. An entry's renewal
// (an Update of RenewedAt to the commit timestamp) and a dequeue (a Delete
// by key) are such; a join is not (a replay inserts a second entry:
// joinWrite).
func (s *spannerStore) idempotentWrite(ctx context.Context, tag string, ms []*spanner.Mutation) error {
	s.stats.blindWrites.Add(1)
	_, err := s.client.Apply(ctx, ms, spanner.ApplyAtLeastOnce(), spanner.TransactionTag(tag))
	return err
}

// enqueueMutation inserts a waiter's entry, keyed by the commit timestamp.
func (s *spannerStore) enqueueMutation(name string, e queueInsert) *spanner.Mutation {
	cols := []string{"Name", "EnqueuedAt", "WaiterID", "Owner", "RenewedAt", "LeaseMicros"}
	vals := []any{name, spanner.CommitTimestamp, e.id, e.owner, spanner.CommitTimestamp, e.lease.Microseconds()}
	if e.wakeAddr != "" {
		cols, vals = append(cols, "WakeAddr"), append(vals, e.wakeAddr)
	}
	if e.session != "" {
		cols, vals = append(cols, "Session"), append(vals, e.session)
	}
	return spanner.Insert(s.queueTable(), cols, vals)
}

func (s *spannerStore) dequeue(ctx context.Context, name string, key queueKey) error {
	err := s.idempotentWrite(ctx, tagDequeue, []*spanner.Mutation{spanner.Delete(s.queueTable(), spanner.Key{name, key.at, key.id})})
	if err != nil {
		return s.explain(ctx, err)
	}
	return nil
}
