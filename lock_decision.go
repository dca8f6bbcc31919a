package spanmutex

import "time"

// lockView is what a reusable lock's contender reads in one statement: the
// lock's row with Spanner's clock, and its place in the waiters' queue.
type lockView struct {
	row
	// ahead is the number of live queue entries before ours (before the end
	// of the queue when we have not joined), capped at maxAhead.
	ahead int
	// queued reports whether our own entry is in the queue.
	queued bool
	// uncounted reports that the entries before ours were not counted (an
	// arrival queued on key reads): ahead is then 1, a guess.
	uncounted bool
	// emptyRead reports that the transaction read the whole queue and
	// found it empty (readByKey), which an acquisition records in the
	// row's Queued column (queue_mark.go).
	emptyRead bool
}

// lockAction is what a reusable lock's contender should do.
type lockAction int

const (
	// lockAcquire: the lock is free and nobody live waits before us.
	lockAcquire lockAction = iota + 1
	// lockTakeOver: the holder went silent past the lease and nobody
	// live waits before us.
	lockTakeOver
	// lockHeld: the lock was handed to us by the previous holder.
	lockHeld
	// lockWait: someone holds it or waits before us; wait is, when the
	// holder is the one to wait for, how long until a takeover is allowed.
	lockWait
	// lockPassOn: live waiters are before us, and the lock is free or its
	// holder went silent past the lease: hand the lock to the first of
	// them, as the holder's Unlock would have, so that each dead process
	// before us costs one lease, not its entries' time to live. (A free
	// lock with waiters is rare: an Unlock hands the lock to the first
	// live entry it reads, so only an entry it did not read, a join
	// committed after it, or one it judged dead, meets a free lock.)
	lockPassOn
	// lockWrongKind: the row belongs to a run-once Mutex (DONE or FAILED).
	lockWrongKind
)

// lockDecision is the outcome of decideLock.
type lockDecision struct {
	action lockAction
	wait   time.Duration
}

// decideLock is a reusable lock's state machine as a pure function, on the
// same row as the run-once mutex uses: NEEDED (or no row) is free, STARTED is
// held. Like decide, it runs on a lock-free snapshot and again inside the
// read-write transaction that writes, on the row and CURRENT_TIMESTAMP() read
// there. FIFO: nobody acquires while a live waiter is queued before it.
func decideLock(v lockView, myID string, p policy) lockDecision {
	r := v.row
	if r.Exists && (r.State == StateDone || r.State == StateFailed || !r.State.valid()) {
		// A run-once Mutex's row, or one written by something else: never ours to take.
		return lockDecision{action: lockWrongKind}
	}
	if r.heldBy(myID) {
		return lockDecision{action: lockHeld}
	}
	if !r.Exists || r.State == StateNeeded {
		if v.ahead > 0 {
			return lockDecision{action: lockPassOn}
		}
		return lockDecision{action: lockAcquire}
	}
	remaining := p.takeoverAfter(r) - silentFor(r)
	if remaining > 0 {
		return lockDecision{action: lockWait, wait: remaining}
	}
	if v.ahead > 0 {
		return lockDecision{action: lockPassOn}
	}
	return lockDecision{action: lockTakeOver}
}
