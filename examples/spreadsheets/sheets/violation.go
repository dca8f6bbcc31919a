package sheets

import "fmt"

// ViolationKind is one thing that must never happen to a sheet.
type ViolationKind int

// The violations Store detects.
const (
	// DoubleCreate: a create of a sheet that already exists or is being
	// created. The queue allows one create request per sheet and runs it
	// once; a second create means a request ran twice.
	DoubleCreate ViolationKind = iota + 1
	// UpdateBeforeCreate: an update of a sheet whose create has not
	// finished. The queue hands out a sheet's updates only after its create
	// is complete.
	UpdateBeforeCreate
	// ConcurrentWriters: a write began while another write of the same
	// sheet was in flight. The sheet's lock admits one worker at a time.
	ConcurrentWriters
	// StaleToken: a write came with a fencing token lower than the highest
	// token the sheet has seen, that is, from a worker that had already been
	// taken over.
	StaleToken
)

// violationKinds lists every kind, in the order reports show them.
var violationKinds = []ViolationKind{DoubleCreate, UpdateBeforeCreate, ConcurrentWriters, StaleToken}

// ViolationKinds returns every kind of violation, in report order.
func ViolationKinds() []ViolationKind { return append([]ViolationKind(nil), violationKinds...) }

// String names the kind.
func (k ViolationKind) String() string {
	switch k {
	case DoubleCreate:
		return "double create"
	case UpdateBeforeCreate:
		return "update before create"
	case ConcurrentWriters:
		return "concurrent writers"
	case StaleToken:
		return "stale token"
	}
	return fmt.Sprintf("ViolationKind(%d)", int(k))
}

// Violation is one detected violation, with the write that caused it.
type Violation struct {
	Kind   ViolationKind
	Sheet  string
	Op     int64  // the Seq of the offending write in the store's log
	Token  int64  // the offending write's token
	Detail string // what the store saw, e.g. the higher token it had seen
}

// String describes the violation in one line.
func (v Violation) String() string {
	return fmt.Sprintf("%s on sheet %q (write #%d, token %d): %s", v.Kind, v.Sheet, v.Op, v.Token, v.Detail)
}
