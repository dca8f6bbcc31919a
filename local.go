package spanmutex

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/spanner"
)

// Process-local coordination of the contenders of one lock. Every decision
// on ownership is still taken in a read-write transaction with Spanner's
// clock; what the contenders of one process share only saves transactions
// that would contend with each other:
//
//   - One read-write transaction on the lock at a time per process (the
//     gate): a process's unlock, acquisition, joins and leaves of the same
//     lock conflict with each other anyway (an unlock reads the head of the
//     queue, which a join to a short queue writes), and Spanner would abort
//     all but one of them.
//   - Joins and leaves are group-committed: waiters that join or leave the
//     queue while another such write of the process is being committed are
//     inserted or deleted together by the next commit, one transaction for
//     all of them.
//   - A contender that arrives while another contender of the process is
//     acquiring or holding the lock joins the queue at once, without trying
//     to take the lock: the attempt would be refused or aborted.
//   - A waiter that reads that a contender of this process holds the lock
//     does not poll: that holder's Unlock wakes the waiter it hands the lock
//     to (see wakeups), and when the lock leaves the process every waiter
//     of the process wakes and reads it again. Polling is what waiters do
//     behind holders in other processes.
//
// Like the hand-off wake-ups, this is package-level state shared by the
// Locks of a process, which do not know each other; entries live while a
// Lock or Unlock call of their lock is under way.
var locals = &localBoard{locks: map[localKey]*localLock{}}

// maxJoinBatch bounds how many waiters one commit inserts into the queue.
const maxJoinBatch = 256

// localKey names a lock across the process: its database, table and name.
type localKey struct{ database, table, name string }

// localBoard holds the localLock of every lock that has a call under way.
type localBoard struct {
	mu    sync.Mutex
	locks map[localKey]*localLock
}

// localLock is what the contenders of one lock in this process share.
type localLock struct {
	key  localKey
	refs int // calls under way, under localBoard.mu

	// gate is held by the process's read-write transaction on the lock.
	gate chan struct{}

	mu      sync.Mutex
	joins   []*joinRequest // waiters to insert, oldest first
	joining bool           // a leader is committing joins
	// acquiring counts this process's contenders that are trying to
	// acquire the lock; heldBy holds the lease ids of those that hold it (or
	// were handed it by an Unlock of this process), as far as this process
	// knows: a lease leaves when its Unlock settles or when its loss is
	// declared.
	acquiring int
	heldBy    map[string]struct{}
	// gone, once made, is closed when heldBy becomes empty.
	gone chan struct{}
}

// joinRequest is one waiter's write to the queue, waiting to be committed:
// its entry to insert (join) or to delete.
type joinRequest struct {
	m    *spanner.Mutation
	id   string
	join bool
	done chan joinResult // buffered: whoever commits never blocks
}

// joinResult is the outcome of a join: the entry's key or the commit's
// error, or, with lead, that the waiter is to commit the next batch. With
// placed, ahead is about how many live entries are before the entry, when
// the lock's token was token.
type joinResult struct {
	key    queueKey
	err    error
	lead   bool
	placed bool
	ahead  int
	token  int64
}

// get returns the localLock of key, to be given back with put.
func (b *localBoard) get(key localKey) *localLock {
	b.mu.Lock()
	defer b.mu.Unlock()
	ll := b.locks[key]
	if ll == nil {
		ll = &localLock{key: key, gate: make(chan struct{}, 1)}
		b.locks[key] = ll
	}
	ll.refs++
	return ll
}

// put gives back a localLock from get; the last one out removes it.
func (b *localBoard) put(ll *localLock) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if ll.refs--; ll.refs == 0 {
		delete(b.locks, ll.key)
	}
}

// lockGate waits for the gate, or until ctx ends; unlock with unlockGate.
func (ll *localLock) lockGate(ctx context.Context) error {
	select {
	case ll.gate <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (ll *localLock) unlockGate() { <-ll.gate }

// gated runs fn holding the gate.
func gated[T any](ctx context.Context, ll *localLock, fn func() (T, error)) (T, error) {
	if err := ll.lockGate(ctx); err != nil {
		var zero T
		return zero, err
	}
	defer ll.unlockGate()
	return fn()
}

// tryAcquiring marks a contender of this process as trying to acquire the
// lock, unless one already is or a contender of this process holds it; it
// reports whether it did. Undo with doneAcquiring.
func (ll *localLock) tryAcquiring() bool {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	if ll.acquiring > 0 || len(ll.heldBy) > 0 {
		return false
	}
	ll.acquiring++
	return true
}

// startAcquiring marks a contender of this process as trying to acquire the
// lock, whatever the others do. Undo with doneAcquiring.
func (ll *localLock) startAcquiring() {
	ll.mu.Lock()
	ll.acquiring++
	ll.mu.Unlock()
}

func (ll *localLock) doneAcquiring() {
	ll.mu.Lock()
	ll.acquiring--
	ll.mu.Unlock()
}

// hold records that the contender with lease id id holds the lock.
func (ll *localLock) hold(id string) {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	if ll.heldBy == nil {
		ll.heldBy = map[string]struct{}{}
	}
	ll.heldBy[id] = struct{}{}
}

// release records that lease id no longer holds the lock, handed to the
// waiter of this process with id to if to is not "". When no contender of
// the process holds the lock any more, it wakes the waiters that wait on
// heldLocally.
func (ll *localLock) release(id, to string) {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	if _, ok := ll.heldBy[id]; !ok {
		return
	}
	delete(ll.heldBy, id)
	if to != "" {
		ll.heldBy[to] = struct{}{}
	}
	if len(ll.heldBy) == 0 && ll.gone != nil {
		close(ll.gone)
		ll.gone = nil
	}
}

// anyHeld reports whether a contender of this process holds the lock; if
// so, the returned channel is closed once none does.
func (ll *localLock) anyHeld() (bool, <-chan struct{}) {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	if len(ll.heldBy) == 0 {
		return false, nil
	}
	if ll.gone == nil {
		ll.gone = make(chan struct{})
	}
	return true, ll.gone
}

// heldLocally reports whether lease id, the holder a read showed, is a
// contender of this process that still holds the lock; if so, the returned
// channel is closed once no contender of the process holds it.
func (ll *localLock) heldLocally(id string) (bool, <-chan struct{}) {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	if _, ok := ll.heldBy[id]; !ok || id == "" {
		return false, nil
	}
	if ll.gone == nil {
		ll.gone = make(chan struct{})
	}
	return true, ll.gone
}

// join inserts waiter id's entry into the queue of lock name, together with
// the entries of the other waiters of this process that join meanwhile, and
// returns its key. The commit is bounded by timeout, whatever ctx says, so
// that the waiters that share it learn its outcome: an error may be of
// unknown outcome, for every entry of the batch.
//
// Its result also says, when known, about how many live entries are before
// ours: one read after the commit places the whole batch.
func (ll *localLock) join(ctx context.Context, s *spannerStore, name, owner, id string, ttl, timeout time.Duration) joinResult {
	return ll.write(ctx, s, name, &joinRequest{m: s.enqueueMutation(name, owner, id), id: id, join: true}, ttl, timeout)
}

// leave deletes the entry key from the queue of lock name, in a commit
// shared like join's.
func (ll *localLock) leave(ctx context.Context, s *spannerStore, name string, key queueKey, timeout time.Duration) error {
	req := &joinRequest{m: spanner.Delete(s.queueTable(), spanner.Key{name, key.at, key.id}), id: key.id}
	return ll.write(ctx, s, name, req, 0, timeout).err
}

// write commits req with the other writes of the process's waiters queued
// meanwhile, and returns its result.
func (ll *localLock) write(ctx context.Context, s *spannerStore, name string, req *joinRequest, ttl, timeout time.Duration) joinResult {
	req.done = make(chan joinResult, 1)
	ll.mu.Lock()
	ll.joins = append(ll.joins, req)
	lead := !ll.joining
	ll.joining = true
	ll.mu.Unlock()
	if !lead {
		r := <-req.done
		if !r.lead {
			return r
		}
	}
	ll.commitJoins(ctx, s, name, ttl, timeout)
	return <-req.done
}

// commitJoins commits the oldest pending writes, the leader's own first,
// in one blind write, tells each waiter its outcome, and passes the lead to
// the oldest waiter still pending, if any.
func (ll *localLock) commitJoins(ctx context.Context, s *spannerStore, name string, ttl, timeout time.Duration) {
	ll.mu.Lock()
	batch := ll.joins[:min(len(ll.joins), maxJoinBatch)]
	ll.joins = ll.joins[len(batch):]
	ll.mu.Unlock()

	ms := make([]*spanner.Mutation, len(batch))
	for i, r := range batch {
		ms[i] = r.m
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	ts, err := gated(cctx, ll, func() (time.Time, error) { return s.blindWrite(cctx, ms) })
	if err != nil {
		err = s.explain(ctx, err)
	}
	// The batch's entries share the commit timestamp, and are queued by
	// their ids: the first one's place gives every one's. Waiters behind a
	// holder of this process need no place (they do not poll).
	var joins []*joinRequest
	for _, r := range batch {
		if r.join {
			joins = append(joins, r)
		} else {
			r.done <- joinResult{err: err}
		}
	}
	slices.SortFunc(joins, func(a, b *joinRequest) int { return strings.Compare(a.id, b.id) })
	var (
		first  lockView
		placed bool
	)
	if held, _ := ll.anyHeld(); err == nil && !held && len(joins) > 0 {
		v, rerr := s.readLock(cctx, name, queueKey{at: ts, id: joins[0].id}, ttl)
		first, placed = v, rerr == nil
	}
	for i, r := range joins {
		r.done <- joinResult{key: queueKey{at: ts, id: r.id}, err: err, placed: placed, ahead: first.ahead + i, token: first.Token}
	}

	ll.mu.Lock()
	defer ll.mu.Unlock()
	if len(ll.joins) == 0 {
		ll.joining = false
		return
	}
	ll.joins[0].done <- joinResult{lead: true}
}
