package spanmutex

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// memLockStore is an in-memory lockStore for unit tests of the Lock's loop:
// how it reacts to failed calls, commits of unknown outcome and callers that
// give up. It is not a model of Spanner (the integration tests run against
// the real emulator); it decides with decideLock, as the real store does,
// on its own clock.
type memLockStore struct {
	mu    sync.Mutex
	own   time.Duration // the readers' own lease, for entries that declare none
	r     row
	queue []memEntry
	seq   int64 // makes enqueue times strictly increase
	// fault, if set, is called as op begins; it returns whether op takes
	// effect and the error to report (an effect with an error is a commit
	// whose answer was lost).
	fault func(op string) (apply bool, err error)
	calls map[string]int
}

type memEntry struct {
	key     queueKey
	owner   string
	renewed time.Time
	lease   time.Duration
}

func newMemLockStore(own time.Duration) *memLockStore {
	return &memLockStore{own: own, calls: map[string]int{}}
}

// begin counts op and applies the fault hook; call it with s.mu held.
func (s *memLockStore) begin(op string) (bool, error) {
	s.calls[op]++
	if s.fault == nil {
		return true, nil
	}
	return s.fault(op)
}

// setFault sets the fault hook under s.mu: the renewals of a Lock already
// held read it from their own goroutine.
func (s *memLockStore) setFault(fault func(op string) (apply bool, err error)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fault = fault
}

func (s *memLockStore) now() time.Time { return time.Now() }

func (s *memLockStore) live(e memEntry, now time.Time) bool {
	return now.Sub(e.renewed) < waiterTTLFactor*holderLease(row{Lease: e.lease}, s.own)
}

// view is the lock as a reader queued under key sees it; call it with s.mu held.
func (s *memLockStore) view(key queueKey) lockView {
	now := s.now()
	v := lockView{row: s.r}
	v.Now = now
	for _, e := range s.queue {
		if e.key == key {
			v.queued = true
		} else if s.live(e, now) && (e.key.at.Before(key.at) || (e.key.at.Equal(key.at) && e.key.id < key.id)) {
			v.ahead++
		}
	}
	return v
}

func (s *memLockStore) read(_ context.Context, _ string) (row, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.begin("read"); err != nil {
		return row{}, err
	}
	return s.view(endOfQueue).row, nil
}

func (s *memLockStore) glance(ctx context.Context, name string) (row, error) {
	r, err := s.read(ctx, name)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil && len(s.queue) == 0 {
		r.Queued = markEmpty
	}
	return r, err
}

// readAt fails: the memory store keeps no history, so a waiter woken with
// a commit timestamp reads the lock as after any wake-up.
func (s *memLockStore) readAt(context.Context, string, time.Time) (row, error) {
	return row{}, errors.New("memLockStore keeps no history")
}

func (s *memLockStore) readLock(_ context.Context, _ string, key queueKey) (lockView, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.begin("readLock"); err != nil {
		return lockView{}, err
	}
	return s.view(key), nil
}

func (s *memLockStore) acquireLock(_ context.Context, name string, key queueKey, p policy, c claim, join bool) (acquireResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	apply, err := s.begin("acquireLock")
	if !apply {
		return acquireResult{}, err
	}
	v := s.view(key)
	d := decideLock(v, c.leaseID, p)
	res := acquireResult{decision: d, key: endOfQueue, sent: true}
	switch {
	case d.action == lockAcquire || d.action == lockTakeOver:
		s.hold(c.owner, c.leaseID, p.lease)
		s.remove(func(e memEntry) bool { return e.key == key })
		res.lease = newLease(name, c.owner, c.leaseID, s.r.Token, d.action == lockTakeOver, "T")
	case d.action == lockWait && join && key == endOfQueue:
		res.key = s.insert(queueInsert{id: c.leaseID, owner: c.owner, lease: p.lease})
	}
	return res, err
}

// hold makes owner the holder with the next token; call it with s.mu held.
func (s *memLockStore) hold(owner, id string, lease time.Duration) {
	now := s.now()
	s.r = row{Exists: true, State: StateStarted, Owner: owner, LeaseID: id, Token: s.r.Token + 1,
		StartedAt: now, RenewedAt: now, UpdatedAt: now, Lease: lease}
}

func (s *memLockStore) insert(e queueInsert) queueKey {
	s.seq++
	k := queueKey{at: time.Unix(0, s.seq), id: e.id}
	s.queue = append(s.queue, memEntry{key: k, owner: e.owner, renewed: s.now(), lease: e.lease})
	return k
}

func (s *memLockStore) remove(match func(memEntry) bool) { s.queue = slices.DeleteFunc(s.queue, match) }

func (s *memLockStore) enqueue(_ context.Context, _ string, entries []queueInsert) (time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	apply, err := s.begin("enqueue")
	if !apply {
		return time.Time{}, err
	}
	s.seq++
	at := time.Unix(0, s.seq)
	for _, e := range entries {
		s.queue = append(s.queue, memEntry{key: queueKey{at: at, id: e.id}, owner: e.owner, renewed: s.now(), lease: e.lease})
	}
	return at, err
}

func (s *memLockStore) findQueued(_ context.Context, _, id string) (queueKey, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.begin("findQueued"); err != nil {
		return queueKey{}, false, err
	}
	for _, e := range s.queue {
		if e.key.id == id {
			return e.key, true, nil
		}
	}
	return queueKey{}, false, nil
}

func (s *memLockStore) renewWaiter(_ context.Context, _ string, key queueKey, _ string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.begin("renewWaiter"); err != nil {
		return err
	}
	for i := range s.queue {
		if s.queue[i].key == key {
			s.queue[i].renewed = s.now()
			return nil
		}
	}
	return status.Error(codes.NotFound, "row not found")
}

func (s *memLockStore) leave(_ context.Context, _, id string) (handOff, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	apply, err := s.begin("leave")
	if !apply {
		return handOff{}, err
	}
	s.remove(func(e memEntry) bool { return e.key.id == id })
	var to handOff
	if s.r.State == StateStarted && s.r.LeaseID == id {
		to = s.handOn(id)
	}
	return to, err
}

func (s *memLockStore) dequeue(_ context.Context, _ string, key queueKey) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	apply, err := s.begin("dequeue")
	if apply {
		s.remove(func(e memEntry) bool { return e.key == key })
	}
	return err
}

func (s *memLockStore) purgeWaiter(_ context.Context, _, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	apply, err := s.begin("purgeWaiter")
	if apply {
		s.remove(func(e memEntry) bool { return e.key.id == id })
	}
	return err
}

func (s *memLockStore) unlock(_ context.Context, l *Lease) (handOff, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	apply, err := s.begin("unlock")
	if !apply {
		return handOff{}, err
	}
	if s.r.State != StateStarted || s.r.LeaseID != l.id {
		return handOff{}, &leaseLostError{Name: l.name, Token: l.token, CurrentState: s.r.State, CurrentToken: s.r.Token, currentLeaseID: s.r.LeaseID}
	}
	return s.handOn(l.id), err
}

// handOn hands the lock held by from to the oldest live entry, dropping the
// dead ones it passes, or frees it; call it with s.mu held.
func (s *memLockStore) handOn(from string) handOff {
	now := s.now()
	slices.SortFunc(s.queue, func(a, b memEntry) int {
		if c := a.key.at.Compare(b.key.at); c != 0 {
			return c
		}
		return strings.Compare(a.key.id, b.key.id)
	})
	for len(s.queue) > 0 {
		e := s.queue[0]
		s.queue = s.queue[1:]
		if s.live(e, now) && e.key.id != from {
			s.hold(e.owner, e.key.id, e.lease)
			return handOff{owner: e.owner, waiterID: e.key.id}
		}
	}
	s.r.State = StateNeeded
	return handOff{}
}

func (s *memLockStore) renew(_ context.Context, l *Lease) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.begin("renew"); err != nil {
		return err
	}
	if s.r.State != StateStarted || s.r.LeaseID != l.id {
		return &leaseLostError{Name: l.name, Token: l.token, CurrentState: s.r.State, CurrentToken: s.r.Token}
	}
	s.r.RenewedAt = s.now()
	return nil
}

func (s *memLockStore) snapshot() (row, []memEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.r, slices.Clone(s.queue)
}

// newMemLock returns a Lock on st, in a Scope of its own (another process).
func newMemLock(t *testing.T, st *memLockStore, opts ...LockOption) *Lock {
	t.Helper()
	opts = append([]LockOption{WithBackOff(func() backoff.BackOff { return &backoff.ZeroBackOff{} }), WithLease(time.Second)}, opts...)
	cfg, err := configure("lock", opts)
	require.NoError(t, err)
	return &Lock{name: "lock", cfg: cfg, store: st, key: localKey{database: "mem", table: "T", name: "lock"}, scope: NewScope(WithoutWakeUps())}
}

// heldMemLock is newMemLock, holding the lock.
func heldMemLock(t *testing.T, st *memLockStore, opts ...LockOption) *Lock {
	t.Helper()
	l := newMemLock(t, st, opts...)
	_, err := l.Lock(context.Background())
	require.NoError(t, err)
	return l
}

var errTransactionLost = status.Error(codes.NotFound, "Transaction not found: 42")

// Spanner's "transaction gone" answers (which the emulator gives when it
// ends one transaction for another) are retried within ctx, never returned
// raw, and the Lock is taken once they stop.
func TestLockRetriesLostTransactions(t *testing.T) {
	st := newMemLockStore(time.Second)
	failures := 0
	st.setFault(func(op string) (bool, error) {
		if op == "acquireLock" && failures < 2 {
			failures++
			return false, errTransactionLost
		}
		if op == "readLock" && failures < 3 {
			failures++
			return false, status.Error(codes.FailedPrecondition, "Cannot read or query using a transaction after it has been committed or rolledback.")
		}
		return true, nil
	})
	l := newMemLock(t, st, WithMaxFailures(5))
	lease, err := l.Lock(context.Background())
	require.NoError(t, err)
	assert.Equal(t, int64(1), lease.Token())
	require.NoError(t, l.Unlock(context.Background()))
}

// A Lock call whose Spanner calls keep failing gives up with an
// *outageError after MaxFailures, not an *exhaustedError.
func TestLockGivesUpWithOutageError(t *testing.T) {
	st := newMemLockStore(time.Second)
	st.setFault(func(op string) (bool, error) {
		if op == "leave" {
			return true, nil
		}
		return false, unavailable
	})
	l := newMemLock(t, st, WithMaxFailures(2),
		WithBackOff(func() backoff.BackOff { return backoff.NewConstantBackOff(time.Millisecond) }))
	_, err := l.Lock(context.Background())
	assertOutage(t, err, 2)
}

// A Lock call whose ctx ends returns an error matching ErrNotObtained and
// the ctx's error, whatever Spanner answered meanwhile.
func TestLockGivesUpWithErrNotObtained(t *testing.T) {
	st := newMemLockStore(time.Second)
	st.setFault(func(op string) (bool, error) {
		if op == "leave" {
			return true, nil
		}
		return false, errTransactionLost
	})
	l := newMemLock(t, st, WithMaxFailures(1000),
		WithBackOff(func() backoff.BackOff { return backoff.NewConstantBackOff(time.Millisecond) }))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := l.Lock(ctx)
	require.ErrorIs(t, err, ErrNotObtained)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.NotContains(t, err.Error(), "\n", "one line, for logs")
}

// A waiter that gives up leaves the queue, and a lock handed to it just
// before is handed on to the next waiter at once, by the same transaction:
// nobody waits for a caller that has gone.
func TestLockGivingUpHandsOnALockHandedToUs(t *testing.T) {
	st := newMemLockStore(time.Second)
	ctx := context.Background()
	holder := heldMemLock(t, st, WithOwner("holder"))

	quitter := newMemLock(t, st, WithOwner("quitter"))
	next := newMemLock(t, st, WithOwner("next"))
	qctx, quit := context.WithCancel(ctx)
	quitDone := make(chan error, 1)
	go func() { _, err := quitter.Lock(qctx); quitDone <- err }()
	waitFor(t, 5*time.Second, "the quitter to queue", func() bool { _, q := st.snapshot(); return len(q) == 1 })
	nextDone := make(chan *Lease, 1)
	go func() { lease, err := next.Lock(ctx); assert.NoError(t, err); nextDone <- lease }()
	waitFor(t, 5*time.Second, "next to queue", func() bool { _, q := st.snapshot(); return len(q) == 2 })

	// The holder hands the lock to the quitter, which gives up before it
	// reads that: its leave must pass the lock on to next.
	st.setFault(func(op string) (bool, error) {
		if op == "leave" { // called with st.mu held; only when the lock was handed to us
			assert.Equal(t, "quitter", st.r.Owner, "the quitter was handed the lock before it left")
		}
		return true, nil
	})
	require.NoError(t, holder.Unlock(ctx))
	quit()
	if err := <-quitDone; err == nil {
		// It read the hand-off before it saw its ctx end: then it holds
		// the lock and must unlock like anyone.
		require.NoError(t, quitter.Unlock(ctx))
	} else {
		require.ErrorIs(t, err, ErrNotObtained)
	}
	lease := <-nextDone
	assert.Equal(t, "next", lease.Owner())
	require.NoError(t, next.Unlock(ctx))
	r, q := st.snapshot()
	assert.Equal(t, StateNeeded, r.State)
	assert.Empty(t, q, "no entry of a call that returned")
}

// A leave that fails transiently is retried until it lands: the entry of a
// caller that gave up does not stay to block the free lock.
func TestLockLeaveIsRetried(t *testing.T) {
	st := newMemLockStore(time.Second)
	ctx := context.Background()
	holder := heldMemLock(t, st)
	leaves := 0
	st.setFault(func(op string) (bool, error) {
		if op == "leave" || op == "dequeue" {
			if leaves++; leaves <= 3 {
				return false, errTransactionLost
			}
		}
		return true, nil
	})
	waiter := newMemLock(t, st)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { _, err := waiter.Lock(wctx); done <- err }()
	waitFor(t, 5*time.Second, "the waiter to queue", func() bool { _, q := st.snapshot(); return len(q) == 1 })
	cancel()
	require.ErrorIs(t, <-done, ErrNotObtained)
	_, q := st.snapshot()
	assert.Empty(t, q)
	assert.Equal(t, 4, leaves, "three failed leaves, then one that landed")
	require.NoError(t, holder.Unlock(ctx))
}

// A join whose answer was lost but which landed leaves an entry of ours
// under a key we never learnt; once we hold the lock it is purged, so that
// it is never handed the lock after we are gone.
func TestLockPurgesAStrayEntryOnceHeld(t *testing.T) {
	st := newMemLockStore(time.Second)
	ctx := context.Background()
	holder := heldMemLock(t, st)
	lost := 0
	st.setFault(func(op string) (bool, error) {
		switch {
		case op == "acquireLock" && lost == 0:
			lost++
			return true, status.Error(codes.Unavailable, "answer lost") // it queued us
		case op == "findQueued" && lost == 1:
			lost++
			return false, status.Error(codes.Unavailable, "look-up failed")
		}
		return true, nil
	})
	waiter := newMemLock(t, st)
	done := make(chan *Lease, 1)
	go func() { lease, err := waiter.Lock(ctx); assert.NoError(t, err); done <- lease }()
	waitFor(t, 5*time.Second, "the waiter to join twice", func() bool { _, q := st.snapshot(); return len(q) == 2 })
	require.NoError(t, holder.Unlock(ctx))
	lease := <-done
	require.NotNil(t, lease)
	_, q := st.snapshot()
	assert.Empty(t, q, "the stray entry was purged")
	require.NoError(t, waiter.Unlock(ctx))
	r, _ := st.snapshot()
	assert.Equal(t, StateNeeded, r.State, "not handed back to our own stray entry")
}

// A contender with a short lease does not take over a holder that
// declared a longer lease and renews within it.
func TestLockJudgesTheHolderByItsDeclaredLease(t *testing.T) {
	st := newMemLockStore(time.Second)
	ctx := context.Background()
	holder := heldMemLock(t, st, WithLease(time.Hour), WithOwner("patient"))
	st.mu.Lock()
	st.r.RenewedAt = st.now().Add(-5 * time.Second) // silent for 5 s: past the contender's 100 ms
	st.mu.Unlock()
	hasty := newMemLock(t, st, WithLease(minLease), WithJitter(0))
	_, err := hasty.TryLock(ctx)
	var held *HeldError
	require.ErrorAs(t, err, &held, "the holder declared an hour")
	assert.Equal(t, "patient", held.Holder)

	st.mu.Lock()
	st.r.RenewedAt = st.now().Add(-2 * time.Hour) // now silent past its own lease
	st.mu.Unlock()
	lease, err := hasty.TryLock(ctx)
	require.NoError(t, err)
	assert.True(t, lease.TookOver())
	r, _ := st.snapshot()
	assert.Equal(t, minLease, r.Lease, "the new holder declares its own lease")
	require.NoError(t, hasty.Unlock(ctx))
	assert.True(t, errors.Is(holder.Unlock(ctx), ErrLeaseLost))
}
