package spanmutex

// State is the state of a critical section's row in the mutex table.
//
//	(no row) ──acquire──▶ STARTED ──fn ok──▶ DONE
//	NEEDED   ──acquire──▶ STARTED ──fn err─▶ FAILED ──retry──▶ STARTED
//	STARTED ──given back unused, or interrupted (see Interrupt)──▶ NEEDED
//	STARTED (holder silent past the lease) ──takeover──▶ STARTED (token+1)
//	DONE/FAILED older than the staleness threshold ──acquire──▶ STARTED
type State string

// The states a row can be in.
const (
	// StateNeeded: the section must run and nobody holds it. Rows are created
	// directly in STARTED, and a row that is absent counts as NEEDED; NEEDED
	// is written when an acquisition is given back unused (its caller's ctx
	// ended before the section could start) or its section was interrupted
	// (Interrupt), returning the attempt it counted, and by Mutex.Reset.
	StateNeeded State = "NEEDED"
	// StateStarted: a holder acquired the section and is running it.
	StateStarted State = "STARTED"
	// StateDone: the section ran to completion. Final, unless a staleness
	// threshold is set and passes.
	StateDone State = "DONE"
	// StateFailed: the last attempt returned an error, or its holder
	// vanished after the last allowed attempt. Retried while attempts remain.
	StateFailed State = "FAILED"
)

// StateShared is the State of a Semaphore's (or an RWLock's) row: its
// holders are the granted entries of its queue, not the row; the row keeps
// the size (Permits) and the last token issued.
const StateShared State = "SHARED"

// valid reports whether s is one of the four states a Mutex or Lock writes.
func (s State) valid() bool {
	switch s {
	case StateNeeded, StateStarted, StateDone, StateFailed:
		return true
	}
	return false
}
