package bench

import (
	"sync"
	"time"
)

// waitRoom tracks the contenders whose Lock call is under way, to count FIFO
// violations: an acquisition is one when another contender that started
// waiting at least tolerance earlier is still waiting at that moment. All
// times are on the local clock. Its methods are safe for concurrent use; the
// zero value is not usable (use newWaitRoom).
type waitRoom struct {
	tolerance time.Duration

	mu      sync.Mutex
	waiting map[int]time.Time // contender → when its Lock call started
}

func newWaitRoom(tolerance time.Duration) *waitRoom {
	return &waitRoom{tolerance: tolerance, waiting: map[int]time.Time{}}
}

// enter records that contender id called Lock at local time at.
func (w *waitRoom) enter(id int, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.waiting[id] = at
}

// leave records that contender id stopped waiting without the lock (its
// Lock call failed or was cancelled).
func (w *waitRoom) leave(id int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.waiting, id)
}

// acquire records that contender id holds the lock now, and reports whether
// that is a FIFO violation: another contender still waiting started at least
// tolerance before id did. If so, overtaken is how much earlier the
// longest-waiting of them started. A contender that never entered is no
// violation.
func (w *waitRoom) acquire(id int) (violation bool, overtaken time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	started, ok := w.waiting[id]
	delete(w.waiting, id)
	if !ok {
		return false, 0
	}
	for _, other := range w.waiting {
		if ahead := started.Sub(other); ahead >= w.tolerance {
			violation, overtaken = true, max(overtaken, ahead)
		}
	}
	return violation, overtaken
}
