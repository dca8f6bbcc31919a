package sheets

import "time"

// OpKind is the kind of a write to the store.
type OpKind string

// The kinds of write.
const (
	OpCreate OpKind = "create"
	OpUpdate OpKind = "update"
)

// OpOutcome is how a write ended.
type OpOutcome string

// The outcomes of a write.
const (
	// OpInFlight: the write has begun and not ended.
	OpInFlight OpOutcome = "in-flight"
	// OpApplied: the write was applied to the sheet.
	OpApplied OpOutcome = "applied"
	// OpRefused: the store refused it (ErrSheetExists, ErrNoSheet).
	OpRefused OpOutcome = "refused"
	// OpAborted: its context ended while it was in flight; nothing was
	// applied.
	OpAborted OpOutcome = "aborted"
	// OpReplayed: everything it would have applied was applied before, by a
	// write with the same keys (a request done again after a lost lease).
	OpReplayed OpOutcome = "replayed"
)

// Op is one write in the store's log.
type Op struct {
	Seq    int64 // 1, 2, ... in the order writes began
	Kind   OpKind
	Sheet  string
	Token  int64 // the fencing token it came with
	Clicks int   // clicks in an update
	// Replayed counts what the write found already applied: the create, or
	// clicks of an update, which were skipped.
	Replayed int
	Outcome  OpOutcome
	Err      string // why it was refused or aborted
	// Began and Ended are by the local clock, for display and for the
	// order of writes in this process; they decide nothing.
	Began, Ended time.Time
	// Violations it committed, detected when it began.
	Violations []ViolationKind

	clicks []Click // kept while in flight, to be applied at its end
}
