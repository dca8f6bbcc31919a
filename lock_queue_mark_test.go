package spanmutex

import (
	"cmp"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"cloud.google.com/go/spanner/apiv1/spannerpb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/spanmutex/spanmutex/internal/sqldialect"
	"google.golang.org/api/option"
	"google.golang.org/grpc"

	"github.com/spanmutex/spanmutex/ddl"
)

// rpcLog records the short names of the gRPC calls a client starts, and
// the Spanner tag of each ("" if none).
type rpcLog struct {
	mu    sync.Mutex
	calls []string
	tags  []string
}

// add records a call of method and returns its index.
func (l *rpcLog) add(method string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, method[strings.LastIndex(method, "/")+1:])
	l.tags = append(l.tags, "")
	return len(l.calls) - 1
}

// tag records the tag of call i, from its request.
func (l *rpcLog) tag(i int, req any) {
	t, ok := req.(interface {
		GetRequestOptions() *spannerpb.RequestOptions
	})
	if !ok {
		return
	}
	o := t.GetRequestOptions()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.tags[i] = cmp.Or(o.GetTransactionTag(), o.GetRequestTag())
}

// tagsSince returns the tags of the calls recorded after the first n.
func (l *rpcLog) tagsSince(n int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.tags[n:]...)
}

// since returns the calls recorded after the first n.
func (l *rpcLog) since(n int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.calls[n:]...)
}

func (l *rpcLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.calls)
}

// loggedStream records the tag of its first request.
type loggedStream struct {
	grpc.ClientStream
	tag  func(any)
	sent bool
}

func (s *loggedStream) SendMsg(m any) error {
	if !s.sent {
		s.sent = true
		s.tag(m)
	}
	return s.ClientStream.SendMsg(m)
}

// countingClient opens a client of db that records its RPCs in log.
func countingClient(t *testing.T, db string, log *rpcLog) *spanner.Client {
	t.Helper()
	unary := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		log.tag(log.add(method), req)
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	stream := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		i := log.add(method)
		cs, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil {
			return nil, err
		}
		return &loggedStream{ClientStream: cs, tag: func(m any) { log.tag(i, m) }}, nil
	}
	c, err := emu.NewClient(context.Background(), db,
		option.WithGRPCDialOption(grpc.WithChainUnaryInterceptor(unary)),
		option.WithGRPCDialOption(grpc.WithChainStreamInterceptor(stream)))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// cycleRPCs runs one Lock and Unlock of l and returns the RPCs they made.
func cycleRPCs(t *testing.T, l *Lock, log *rpcLog) []string {
	t.Helper()
	ctx := context.Background()
	n := log.len()
	_, err := l.Lock(ctx)
	require.NoError(t, err)
	require.NoError(t, l.Unlock(ctx))
	return log.since(n)
}

// An uncontended Lock and Unlock cost 4 RPCs once the row's Queued column
// says the queue is empty (a key read and a commit each, as a naive lock),
// in both dialects; on a table made before the column, 6, reading the queue
// as before.
func TestLockUncontendedCycleIsFourRPCs(t *testing.T) {
	needEmulator(t)
	eachDialect(t, func(t *testing.T, db string) {
		var log rpcLog
		l, err := NewLock(countingClient(t, db, &log), "uncontended", WithScope(NewScope(WithoutWakeUps())))
		require.NoError(t, err)
		cycleRPCs(t, l, &log) // the first: dialect, columns, the row inserted
		for range 3 {
			n := log.len()
			assert.Equal(t, []string{"StreamingRead", "Commit", "StreamingRead", "Commit"}, cycleRPCs(t, l, &log))
			assert.Equal(t, []string{tagAcquire, tagAcquire, tagUnlock, tagUnlock}, log.tagsSince(n), "every call names its operation")
		}
	})
	t.Run("without the column", func(t *testing.T) {
		ctx := context.Background()
		db, err := emu.CreateDatabase(ctx, olderSchema(t)...)
		require.NoError(t, err)
		applyDDL(t, db, withoutQueued(t)...)
		var log rpcLog
		l, err := NewLock(countingClient(t, db, &log), "uncontended", WithScope(NewScope(WithoutWakeUps())))
		require.NoError(t, err)
		cycleRPCs(t, l, &log)
		got := cycleRPCs(t, l, &log)
		assert.Len(t, got, 6, "Lock reads the row and the queue, and so does Unlock: %v", got)
	})
}

// The Locks of one Scope read the database's dialect and the table's
// columns once between them: a Lock whose Scope already knows them makes
// its first cycle with no statement, where a Lock in a Scope of its own
// first makes the two reads of INFORMATION_SCHEMA.
func TestScopeReadsTheDialectOnce(t *testing.T) {
	needEmulator(t)
	eachDialect(t, func(t *testing.T, db string) {
		var log rpcLog
		client := countingClient(t, db, &log)
		shared := NewScope(WithoutWakeUps())
		first, err := NewLock(client, "dialect-a", WithScope(shared))
		require.NoError(t, err)
		cycleRPCs(t, first, &log) // reads the dialect and the columns
		second, err := NewLock(client, "dialect-b", WithScope(shared))
		require.NoError(t, err)
		inShared := cycleRPCs(t, second, &log)
		alone, err := NewLock(client, "dialect-c", WithScope(NewScope(WithoutWakeUps())))
		require.NoError(t, err)
		inOwn := cycleRPCs(t, alone, &log)
		require.Len(t, inOwn, len(inShared)+2, "alone %v, shared %v", inOwn, inShared)
		assert.Equal(t, []string{"ExecuteStreamingSql", "ExecuteStreamingSql"}, inOwn[:2], "alone, the dialect and the columns are read")
		assert.Equal(t, inOwn[2:], inShared, "in the shared Scope, neither is read again")
	})
}

// A TryLock that finds the lock held by a live holder, with the row's
// Queued column saying nobody waits, is refused on one key read (no
// statement), and says so exactly: the holder, its token, no waiters. On a
// free lock it takes the lock with that read and one acquisition, as Lock
// does.
func TestTryLockRefusedOnOneKeyRead(t *testing.T) {
	needEmulator(t)
	eachDialect(t, func(t *testing.T, db string) {
		ctx := context.Background()
		holder, err := NewLock(newClient(t, db), "tried", WithOwner("holder"), WithScope(NewScope(WithoutWakeUps())))
		require.NoError(t, err)
		var log rpcLog
		l, err := NewLock(countingClient(t, db, &log), "tried", WithScope(NewScope(WithoutWakeUps())))
		require.NoError(t, err)
		_, err = l.TryLock(ctx) // the first: dialect, columns, the row inserted
		require.NoError(t, err)
		require.NoError(t, l.Unlock(ctx))

		n := log.len()
		_, err = l.TryLock(ctx)
		require.NoError(t, err)
		require.NoError(t, l.Unlock(ctx))
		assert.Equal(t, []string{"StreamingRead", "StreamingRead", "Commit", "StreamingRead", "Commit"}, log.since(n),
			"a glance, the acquisition, the Unlock")

		held, err := holder.Lock(ctx)
		require.NoError(t, err)
		defer func() { require.NoError(t, holder.Unlock(ctx)) }()
		n = log.len()
		_, err = l.TryLock(ctx)
		var he *HeldError
		require.ErrorAs(t, err, &he)
		assert.Positive(t, he.LeaseLeft, "the holder just took it")
		assert.LessOrEqual(t, he.LeaseLeft, defaultLease, "at most the lease it declared")
		he.LeaseLeft = 0
		assert.Equal(t, HeldError{Name: "tried", Holder: "holder", Token: held.Token(), Waiters: 0}, *he)
		assert.Equal(t, []string{"StreamingRead"}, log.since(n))

		// A lock with no row yet: the glance finds none, and the
		// acquisition reads row and queue in one statement.
		d, err := sqldialect.Detect(ctx, newClient(t, db))
		require.NoError(t, err)
		fresh, err := NewLock(countingClient(t, db, &log), "fresh", WithScope(l.scope), WithDialect(d))
		require.NoError(t, err)
		n = log.len()
		_, err = fresh.TryLock(ctx)
		require.NoError(t, err)
		calls, tags := log.since(n), log.tagsSince(n)
		require.GreaterOrEqual(t, len(calls), 3)
		assert.Equal(t, []string{"StreamingRead", "ExecuteStreamingSql", "Commit"}, calls[len(calls)-3:],
			"a glance finding no row, then lockSQL and the Commit (after the new store's schema check)")
		assert.Equal(t, []string{tagLook, tagAcquire, tagAcquire}, tags[len(tags)-3:])
		n = log.len()
		require.NoError(t, fresh.Unlock(ctx))
		assert.Equal(t, []string{"StreamingRead", "Commit"}, log.since(n), "the acquisition marked the queue empty")
	})
}

// A TryLock of a lock whose row does not exist yet, although a blind join
// queued a waiter for it, is refused: the glance sends it to acquire, the
// acquisition finds the waiter, and the next look reads in full.
func TestTryLockWithoutRowButQueued(t *testing.T) {
	needEmulator(t)
	db := freshDatabase(t)
	c := newClient(t, db)
	s := newSpannerStore(c, defaultTable, time.Minute)
	id := NewScope().newWaiterID()
	_, err := s.enqueue(context.Background(), "queued-no-row", []queueInsert{{id: id, owner: "w", lease: time.Minute}})
	require.NoError(t, err)
	l, err := NewLock(c, "queued-no-row", WithScope(NewScope(WithoutWakeUps())))
	require.NoError(t, err)
	_, err = l.TryLock(context.Background())
	var he *HeldError
	require.ErrorAs(t, err, &he)
	assert.Equal(t, 1, he.Waiters)
}

// withoutQueued is ddl.Upgrade less the Queued column: a table upgraded
// before the column existed.
func withoutQueued(t *testing.T) []string {
	t.Helper()
	var out []string
	up, err := ddl.Upgrade(defaultTable)
	require.NoError(t, err)
	for _, s := range up {
		if !strings.Contains(s, "Queued") {
			out = append(out, s)
		}
	}
	return out
}

// A blind join to a lock whose row does not exist yet (its first
// acquisition is under way) is inserted all the same, without the mark:
// with no row, every reader reads the queue.
func TestLockBlindJoinWithoutRow(t *testing.T) {
	needEmulator(t)
	db := freshDatabase(t)
	c := newClient(t, db)
	s := newSpannerStore(c, defaultTable, time.Minute)
	id := NewScope().newWaiterID()
	_, err := s.enqueue(context.Background(), "no-row-yet", []queueInsert{{id: id, owner: "w", lease: time.Minute}})
	require.NoError(t, err)
	assert.True(t, s.marked(), "the table has the Queued column")
	assert.Equal(t, []string{id}, queuedIDs(t, c, "no-row-yet"))
	r, err := s.read(context.Background(), "no-row-yet")
	require.NoError(t, err)
	assert.False(t, r.Exists, "the join inserted no row")
}

// The queue's paths at production's floor, counted from the wire in both
// dialects: a waiter's entry renewal and a dequeue are one single-use
// Commit each; the read that confirms a wake-up from another process is one
// strong key read; an Unlock of a lease handed over that hands the lock on
// is one statement (the row and the queue's head) and its Commit.
func TestLockQueuePathsRPCs(t *testing.T) {
	needEmulator(t)
	eachDialect(t, func(t *testing.T, db string) {
		ctx := context.Background()
		var log rpcLog
		client := countingClient(t, db, &log)
		holder, err := NewLock(client, "paths", WithScope(NewScope(WithoutWakeUps())))
		require.NoError(t, err)
		lease, err := holder.Lock(ctx)
		require.NoError(t, err)
		st := holder.sp
		n := log.len()
		_, err = st.enqueue(ctx, "paths", []queueInsert{{id: "waiter-a", owner: "a", lease: defaultLease}})
		require.NoError(t, err)
		assert.Equal(t, []string{"Commit"}, log.since(n), "a blind join: one single-use commit")
		assert.Equal(t, []string{tagJoin}, log.tagsSince(n))
		key, ok, err := st.findQueued(ctx, "paths", "waiter-a")
		require.NoError(t, err)
		require.True(t, ok, "the entry was inserted")

		n = log.len()
		require.NoError(t, st.renewWaiter(ctx, "paths", key, ""))
		assert.Equal(t, []string{"Commit"}, log.since(n), "an entry renewal")
		assert.Equal(t, []string{tagEntryRenew}, log.tagsSince(n))

		// A lease taken free guesses the queue empty: reading it by key
		// costs a round trip more when it is not (by statement, with each
		// entry's session, once the store has seen an entry name one).
		n = log.len()
		to, err := st.unlock(ctx, lease)
		require.NoError(t, err)
		assert.Equal(t, "waiter-a", to.waiterID, "the Unlock handed the lock to the queued waiter")
		assert.Equal(t, lease.Token()+1, to.token)
		assert.Equal(t, []string{"StreamingRead", "StreamingRead", "Commit"}, log.since(n), "an Unlock of a lease taken free, with a waiter")

		n = log.len()
		r, err := st.glance(ctx, "paths")
		require.NoError(t, err)
		assert.True(t, r.heldBy("waiter-a"), "the confirming read shows the hand-off")
		assert.Equal(t, []string{"StreamingRead"}, log.since(n), "a confirming read")
		assert.Equal(t, []string{tagLook}, log.tagsSince(n))

		// A lease handed over reads the row and the queue's head in one
		// statement.
		handed := newLease("paths", "a", "waiter-a", to.token, false, st.table)
		handed.handedOff = true
		_, err = st.enqueue(ctx, "paths", []queueInsert{{id: "waiter-c", owner: "c", lease: defaultLease}})
		require.NoError(t, err)
		n = log.len()
		to, err = st.unlock(ctx, handed)
		require.NoError(t, err)
		assert.Equal(t, "waiter-c", to.waiterID)
		assert.Equal(t, []string{"ExecuteStreamingSql", "Commit"}, log.since(n), "a hand-off's Unlock")
		assert.Equal(t, []string{tagUnlock, tagUnlock}, log.tagsSince(n))

		_, err = st.enqueue(ctx, "paths", []queueInsert{{id: "waiter-b", owner: "b", lease: defaultLease}})
		require.NoError(t, err)
		key, ok, err = st.findQueued(ctx, "paths", "waiter-b")
		require.NoError(t, err)
		require.True(t, ok)
		n = log.len()
		require.NoError(t, st.dequeue(ctx, "paths", key))
		assert.Equal(t, []string{"Commit"}, log.since(n), "a dequeue")
		assert.Equal(t, []string{tagDequeue}, log.tagsSince(n))
		_, ok, err = st.findQueued(ctx, "paths", "waiter-b")
		require.NoError(t, err)
		assert.False(t, ok, "the dequeue deleted the entry")
	})
}
