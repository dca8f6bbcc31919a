package spanmutex

import (
	"sync"
	"time"
)

// Hand-off hints within one process. An Unlock hands the lock to a waiter
// by writing the waiter's id into the lock's row; the waiter learns of it by
// reading the row, which it does every poll (about LockPollInterval at the
// head of the queue). When the waiter is a Lock call of the same process, the
// Unlock also wakes it at once, after its commit, so that it reads the row
// without waiting for its next poll.
//
// A wake-up is only a hint: the woken waiter still decides on the row it
// reads, with Spanner's clock, exactly as after a timed poll. A missed or
// spurious wake-up costs at most one poll interval or one read. It carries
// the local time just before the Unlock's transaction was sent: the commit
// that handed the lock over, and set RenewedAt, came later, so that time
// anchors the new holder's lease (see keepAlive) as tightly as a read would.
//
// The board is the one piece of package-level mutable state: the Locks of a
// process do not know each other (each contender has its own), and the
// waiter and the Unlock that hands it the lock meet only through the
// waiter's id, a random UUID, unique across processes. Entries live only
// while their Lock call waits.
var wakeups = &wakeBoard{waiting: map[string]chan time.Time{}}

// wakeBoard maps the ids of the waiters of this process to their wake-up
// channels. Its methods are safe for concurrent use.
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

// wake wakes waiter id if it waits in this process, telling it that an
// Unlock whose transaction was sent at local time sent handed it the lock,
// and reports whether it does; it never blocks.
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
