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
// A wake-up from an Unlock of the same Scope carries what that Unlock's
// acknowledged commit wrote: the new holder's token and the commit's
// timestamp. That commit is Spanner's own answer, so the woken waiter holds
// the lock without reading it. It also carries the local time just before
// the Unlock's transaction was sent: the commit that handed the lock over,
// and set RenewedAt, came later, so that time anchors the new holder's lease
// (see keepAlive). A wake-up from another process (ListenScope) only says
// when to read: the waiter reads the row's present in a read-write
// transaction (waiter.confirmRemote) and decides on what it reads, never
// on the datagram. Its methods are safe for concurrent use.
type wakeBoard struct {
	mu      sync.Mutex
	waiting map[string]chan wakeUp
	// orphans are the waiters whose calls returned and could not delete
	// their queue entries: a lock handed to one of them has nobody to take
	// it. Those whose entries expired are forgotten once the map has
	// doubled since the last such sweep (kept: its size after it).
	orphans map[string]orphan
	kept    int
}

// orphan is a waiter whose call returned, with the token it returned (0:
// none) and the local time its entries expire.
type orphan struct {
	token int64
	until time.Time
}

// wakeUp is what a wake-up tells a waiter. Its zero value says only "read
// the lock".
type wakeUp struct {
	// sent is the local time just before the handing transaction was sent.
	sent time.Time
	// token and at are the token the hand-off gave the waiter and its
	// commit timestamp; 0 and zero when not known.
	token int64
	at    time.Time
	owner string
	// remoteAt is, in a wake-up from another process, the commit timestamp
	// of the hand-off as its datagram says: a hint of when to read the row,
	// never a grant.
	remoteAt time.Time
}

// register returns the channel on which waiter id is woken, and a function
// that removes it from the board.
func (b *wakeBoard) register(id string) (<-chan wakeUp, func()) {
	ch := make(chan wakeUp, 1)
	b.mu.Lock()
	b.waiting[id] = ch
	b.mu.Unlock()
	return ch, func() {
		b.mu.Lock()
		delete(b.waiting, id)
		b.mu.Unlock()
	}
}

// orphan records that waiter id's call returned, with token (0: without
// the lock), and may have left queue entries, which expire at local time
// o.until; it removes id from the board. Orphans whose entries expired by
// local time now are forgotten, in sweeps whose cost the insertions since
// the last one pay for.
func (b *wakeBoard) orphan(id string, o orphan, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.waiting, id)
	if b.orphans == nil {
		b.orphans = map[string]orphan{}
	}
	if len(b.orphans) >= max(2*b.kept, 16) {
		for k, v := range b.orphans {
			if !now.Before(v.until) {
				delete(b.orphans, k)
			}
		}
		b.kept = len(b.orphans)
	}
	b.orphans[id] = o
}

// orphaned reports whether a hand-off of token to waiter id finds nobody
// to take it: id is an orphan whose entries have not expired by local time
// now, and token is not the one its call returned (the hand-off that
// granted it, which the call may have read before this Unlock's answer).
func (b *wakeBoard) orphaned(id string, token int64, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	o, ok := b.orphans[id]
	return ok && now.Before(o.until) && token > o.token
}

// adopted forgets orphan id: the lock handed to it was handed on.
func (b *wakeBoard) adopted(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.orphans, id)
}

// registered returns how many waiters are registered.
func (b *wakeBoard) registered() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.waiting)
}

// wake wakes waiter id if it waits in this Scope, telling it w, and reports
// whether it does; it never blocks.
func (b *wakeBoard) wake(id string, w wakeUp) bool {
	b.mu.Lock()
	ch := b.waiting[id]
	b.mu.Unlock()
	if ch == nil {
		return false
	}
	select {
	case ch <- w:
		return true
	default:
	}
	// A wake-up is pending. Keep the one that hands the lock over (it
	// carries a token), the newer if both do: a waiter whose entry was
	// dropped and who joined again may be handed the lock again.
	select {
	case old := <-ch:
		if w.token == 0 && old.token > 0 {
			w = old
		}
	default:
	}
	select {
	case ch <- w:
	default:
	}
	return true
}
