package spanmutex

import (
	"context"
	"time"

	"cloud.google.com/go/spanner"
)

// Every Spanner call the library makes carries a tag naming its operation:
// a transaction tag on read-write transactions and single-use commits, a
// request tag on single-use reads. Spanner's introspection tables
// (SPANNER_SYS.TXN_STATS_*, QUERY_STATS_*, READ_STATS_*) then show what each
// operation costs in production, and a client interceptor can count RPCs by
// operation (lockbench does).
const (
	tagAcquire     = "spanmutex.lock.acquire"     // a Lock's attempt: take the lock, or queue
	tagJoin        = "spanmutex.lock.join"        // a blind join of the queue
	tagPoll        = "spanmutex.lock.poll"        // a waiter's read of the row and its place
	tagLook        = "spanmutex.lock.look"        // TryLock's look; a wake-up's confirming read
	tagFind        = "spanmutex.lock.find"        // looking up an entry of unknown outcome
	tagEntryRenew  = "spanmutex.lock.entry-renew" // a waiter's entry renewal
	tagDequeue     = "spanmutex.lock.dequeue"     // a waiter's blind leave
	tagLeave       = "spanmutex.lock.leave"       // deleting our entries, handing the lock on
	tagUnlock      = "spanmutex.lock.unlock"      // Unlock: release and hand-off
	tagRenew       = "spanmutex.renew"            // a lease's renewal, or a fenced write of a Mutex
	tagRead        = "spanmutex.read"             // a strong or timestamped read of the row
	tagMutex       = "spanmutex.mutex.acquire"    // a Mutex's attempt
	tagRelease     = "spanmutex.mutex.release"    // a Mutex giving back a lease whose section never ran
	tagReset       = "spanmutex.mutex.reset"      // Reset and ForceReset
	tagSession     = "spanmutex.session"          // a Scope's session: its renewals
	tagSessionRead = "spanmutex.session.read"     // a read of the session that holds a row read outside a transaction
)

// rw runs f in a read-write transaction tagged tag, retried by the client
// when Spanner aborts it, and returns its commit timestamp.
func (s *spannerStore) rw(ctx context.Context, tag string, f func(context.Context, *spanner.ReadWriteTransaction) error) (time.Time, error) {
	resp, err := s.client.ReadWriteTransactionWithOptions(ctx, f, spanner.TransactionOptions{TransactionTag: tag})
	return resp.CommitTs, err
}

// taggedQuerier runs statements with a request tag, in a single-use
// read-only transaction.
type taggedQuerier struct {
	ro  *spanner.ReadOnlyTransaction
	tag string
}

func (q taggedQuerier) Query(ctx context.Context, stmt spanner.Statement) *spanner.RowIterator {
	return q.ro.QueryWithOptions(ctx, stmt, spanner.QueryOptions{RequestTag: q.tag})
}

// taggedReader reads rows by key with a request tag, in a single-use
// read-only transaction.
type taggedReader struct {
	ro  *spanner.ReadOnlyTransaction
	tag string
}

// Close closes the read-only transaction.
func (r taggedReader) Close() { r.ro.Close() }

func (r taggedReader) ReadRow(ctx context.Context, table string, key spanner.Key, columns []string) (*spanner.Row, error) {
	return r.ro.ReadRowWithOptions(ctx, table, key, columns, &spanner.ReadOptions{RequestTag: r.tag})
}
