package spanmutex

import (
	"sync"
	"time"
)

// wakeBoard maps the ids of the waiters of a Scope to their wake-up
// channels. An Unlock hands the lock to a waiter by writing the waiter's id
// into the lock's row; the waiter learns of it by reading the row. When the
// waiter belongs to the Unlock's Scope, the Unlock also wakes it after its
// commit, so that it reads the row without waiting for its next poll.
//
// A wake-up is only a hint: the woken waiter still decides on the row it
// reads, with Spanner's clock, exactly as after a timed poll. A missed or
// spurious wake-up costs at most one poll interval or one read. It carries
// the local time just before the Unlock's transaction was sent: the commit
// that handed the lock over, and set RenewedAt, came later, so that time
// anchors the new holder's lease (see keepAlive) as tightly as a read would.
// Its methods are safe for concurrent use.
type wakeBoard struct {
	mu      sync.Mutex
	waiting map[string]chan time.Time
}

// register returns the channel on which waiter id is woken, and a function
// that removes it from the board.
func (b *wakeBoard) register(id string) (<-chan time.Time, func()) {
	ch := make(chan time.Time, 1)
	b.mu.Lock()
	b.waiting[id] = ch
	b.mu.Unlock()
	return ch, func() {
		b.mu.Lock()
		delete(b.waiting, id)
		b.mu.Unlock()
	}
}

// wake wakes waiter id if it waits in this Scope, telling it that an Unlock
// whose transaction was sent at local time sent handed it the lock, and
// reports whether it does; it never blocks.
func (b *wakeBoard) wake(id string, sent time.Time) bool {
	b.mu.Lock()
	ch := b.waiting[id]
	b.mu.Unlock()
	if ch == nil {
		return false
	}
	select {
	case ch <- sent:
	default: // already woken: the lock is handed to a waiter once
	}
	return true
}
