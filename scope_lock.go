package spanmutex

import (
	"context"
	"sync"
	"time"
)

// What a Scope keeps for each lock its Locks are using (Scope.locks): the
// gate, the bookkeeping of which of its contenders acquire, hold and are
// queued, and the joins waiting for a group commit (lock_join.go).

// get returns the localLock of key, to be given back with put.
func (s *Scope) get(key localKey) *localLock {
	s.mu.Lock()
	defer s.mu.Unlock()
	ll := s.locks[key]
	if ll == nil {
		ll = &localLock{key: key, gate: make(chan struct{}, 1), ctxFirst: s.ctxFirst}
		s.locks[key] = ll
	}
	ll.refs++
	return ll
}

// put gives back a localLock from get; the last one out removes it.
func (s *Scope) put(ll *localLock) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ll.refs--; ll.refs == 0 {
		delete(s.locks, ll.key)
	}
}

// localLock is what the contenders of one lock in one Scope share (see
// Scope for what sharing saves). Entries live while a Lock or Unlock call of
// their lock is under way.
type localLock struct {
	key  localKey
	refs int // calls under way, under Scope.mu

	// gate is held by the Scope's read-write transaction on the lock: the
	// unlocks, acquisitions, joins and leaves of one lock conflict with
	// each other anyway (an unlock reads the head of the queue, which a join
	// to a short queue writes), and Spanner would abort all but one.
	gate chan struct{}
	// ctxFirst is the Scope's (nil but in the simulation): see lockGate.
	ctxFirst func() bool

	mu      sync.Mutex
	joins   []*joinRequest // waiters to insert, oldest first
	joining bool           // a leader is committing joins
	// acquiring counts this Scope's contenders that are trying to acquire
	// the lock; heldBy holds the lease ids of those that hold it (or were
	// handed it by an Unlock of this Scope), as far as this Scope knows: a
	// lease leaves when its Unlock settles or when its loss is declared.
	acquiring int
	heldBy    map[string]struct{}
	// gone, once made, is done when heldBy becomes empty.
	gone *departure
	// queued holds the queue keys of this Scope's waiters that joined,
	// so that the first of them knows it (firstQueued).
	queued map[string]queueKey
}

// departure is done (closed) once no contender of a Scope holds a lock
// that one held; away, set before, then says whether the lock left handed,
// by an acknowledged commit, to a waiter of another Scope, rather than
// freed or lost. Its waiters need not read the lock then: they are behind
// that waiter, and an Unlock wakes them when their turn comes.
type departure struct {
	done chan struct{}
	away bool
}

// wentAway reports whether d is done and the lock went away (see
// departure); false for a nil d.
func (d *departure) wentAway() bool {
	select {
	case <-d.ch():
		return d.away
	default:
		return false
	}
}

// ch is d's channel; nil (never ready) for a nil d.
func (d *departure) ch() <-chan struct{} {
	if d == nil {
		return nil
	}
	return d.done
}

// localKey names a lock within a Scope: its database, table and name.
type localKey struct{ database, table, name string }

// joinRequest is one waiter's entry, waiting to be inserted.
type joinRequest struct {
	entry queueInsert
	done  chan joinResult // buffered: whoever commits never blocks
	// written, if not nil, is told the commit's outcome (its timestamp,
	// or its error) by whoever commits, before the lock's gate opens.
	written func(at time.Time, err error)
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
	row    row // when placed: the lock's row as the placing read saw it
}

// lockGate waits for the gate, or until ctx ends; unlock with unlockGate.
func (ll *localLock) lockGate(ctx context.Context) error {
	if ll.ctxFirst != nil && ctx.Err() != nil {
		// Both may be ready, and select would pick at random: the
		// simulation picks from its seed (Scope.ctxFirst).
		if ll.ctxFirst() {
			return ctx.Err()
		}
		select {
		case ll.gate <- struct{}{}:
			return nil
		default:
		}
	}
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

// tryAcquiring marks a contender of this Scope as trying to acquire the
// lock, unless one already is or a contender of this Scope holds it; it
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

// startAcquiring marks a contender of this Scope as trying to acquire the
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
// waiter of this Scope with id to if to is not "". When no contender of the
// Scope holds the lock any more, it wakes the waiters that wait on
// heldLocally, saying whether the lock went away, handed to a waiter of
// another Scope (see departure).
func (ll *localLock) release(id, to string) { ll.leave(id, to, false) }

// handAway records that lease id no longer holds the lock, handed to a
// waiter of another Scope by an acknowledged commit.
func (ll *localLock) handAway(id string) { ll.leave(id, "", true) }

func (ll *localLock) leave(id, to string, away bool) {
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
		ll.gone.away = away
		close(ll.gone.done)
		ll.gone = nil
	}
}

// setQueued records that waiter id of this Scope is queued under key.
func (ll *localLock) setQueued(id string, key queueKey) {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	if ll.queued == nil {
		ll.queued = map[string]queueKey{}
	}
	ll.queued[id] = key
}

// unqueue forgets waiter id (its call ended).
func (ll *localLock) unqueue(id string) {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	delete(ll.queued, id)
}

// firstQueued reports whether no other waiter of this Scope is queued
// before waiter id.
func (ll *localLock) firstQueued(id string) bool {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	mine, ok := ll.queued[id]
	if !ok {
		return true
	}
	for other, k := range ll.queued {
		if other != id && (k.at.Before(mine.at) || (k.at.Equal(mine.at) && k.id < mine.id)) {
			return false
		}
	}
	return true
}

// anyHeld reports whether a contender of this Scope holds the lock; if so,
// the returned departure is done once none does.
func (ll *localLock) anyHeld() (bool, *departure) {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	return ll.goneLocked()
}

// heldLocally reports whether lease id, the holder a read showed, is a
// contender of this Scope that still holds the lock; if so, the returned
// departure is done once no contender of the Scope holds it.
func (ll *localLock) heldLocally(id string) (bool, *departure) {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	if _, ok := ll.heldBy[id]; !ok || id == "" {
		return false, nil
	}
	return ll.goneLocked()
}

// goneLocked returns, if a contender of the Scope holds the lock, a channel
// closed once none does. Call it with ll.mu held.
func (ll *localLock) goneLocked() (bool, *departure) {
	if len(ll.heldBy) == 0 {
		return false, nil
	}
	if ll.gone == nil {
		ll.gone = &departure{done: make(chan struct{})}
	}
	return true, ll.gone
}
