package spanmutex

import "time"

// action is what a contender should do with a row.
type action int

const (
	// actAcquire: nobody holds the section and it is still needed: start it.
	actAcquire action = iota + 1
	// actTakeOver: the holder went silent past the lease and attempts
	// remain: start it with the next token.
	actTakeOver
	// actWait: a live holder runs it; read again after decision.wait.
	actWait
	// actDone: it completed; do not run it.
	actDone
	// actExhausted: it failed on its last allowed attempt; give up.
	actExhausted
	// actAbandon: its holder went silent past the lease on the last
	// allowed attempt: record FAILED, then give up.
	actAbandon
)

func (a action) String() string {
	switch a {
	case actAcquire:
		return "acquire"
	case actTakeOver:
		return "take over"
	case actWait:
		return "wait"
	case actDone:
		return "done"
	case actExhausted:
		return "exhausted"
	case actAbandon:
		return "abandon"
	}
	return "unknown"
}

// decision is the outcome of decide.
type decision struct {
	action action
	// wait, for actWait: how long until this contender may take over, by
	// Spanner's clock as read with the row.
	wait time.Duration
	// fresh, for actAcquire: the acquisition starts a new generation (no row,
	// or a stale DONE/FAILED), so Attempts restart at 1.
	fresh bool
	// retry, for actAcquire: the last attempt failed; back off first.
	retry bool
}

// decide is the whole state machine, as a pure function of a row read with
// Spanner's clock. It is used twice per acquisition: on a lock-free snapshot,
// to choose what to try, and again inside the read-write transaction that
// writes the row, on the row and CURRENT_TIMESTAMP() read there; only the
// second decides ownership.
func decide(r row, p policy) decision {
	if !r.Exists {
		return decision{action: actAcquire, fresh: true}
	}
	if p.version != "" && r.Version != p.version {
		return decideOtherVersion(r, p)
	}
	switch r.State {
	case StateNeeded:
		// Written when an acquisition is given back unused: the attempt it
		// counted was returned, and the generation goes on.
		if r.Attempts >= p.maxAttempts {
			return decision{action: actExhausted}
		}
		return decision{action: actAcquire}
	case StateDone, StateFailed:
		if p.staleness > 0 && !r.FinishedAt.IsZero() && r.Now.Sub(r.FinishedAt) >= p.staleness {
			return decision{action: actAcquire, fresh: true}
		}
		if r.State == StateDone {
			return decision{action: actDone}
		}
		if r.Attempts >= p.maxAttempts {
			return decision{action: actExhausted}
		}
		return decision{action: actAcquire, retry: true}
	case StateStarted:
		remaining := p.takeoverAfter(r) - silentFor(r)
		if remaining > 0 {
			return decision{action: actWait, wait: remaining}
		}
		if r.Attempts >= p.maxAttempts {
			return decision{action: actAbandon}
		}
		return decision{action: actTakeOver}
	}
	// An unknown state was written by something other than spanmutex; touch
	// nothing and let the caller report it.
	return decision{action: actExhausted}
}

// decideOtherVersion decides on a row last started at another version than
// ours: it is a new generation, with fresh attempts, once nobody runs it.
func decideOtherVersion(r row, p policy) decision {
	if r.State == StateStarted {
		if remaining := p.takeoverAfter(r) - silentFor(r); remaining > 0 {
			return decision{action: actWait, wait: remaining}
		}
		return decision{action: actTakeOver, fresh: true}
	}
	return decision{action: actAcquire, fresh: true}
}
