package spanmutex

// Outcome says how a call to Run ended when it returned no error, and whether
// the section ran in this call when it returned one.
type Outcome int

// The outcomes of Run. The zero value, NoOutcome, comes only with an error
// and means the section did not run in this call.
const (
	// NoOutcome: Run returned an error before running the section here.
	NoOutcome Outcome = iota
	// Executed: the section ran in this call. With a nil error it completed
	// and the row is DONE; with an error, the section's own error (row
	// FAILED) or a lost lease is in the error.
	Executed
	// AlreadyDone: another holder completed the section; it did not run here.
	AlreadyDone
	// NotNeeded: the Needed callback said the section is not needed; the row
	// was neither read nor written.
	NotNeeded
)

// String returns the outcome's name.
func (o Outcome) String() string {
	switch o {
	case Executed:
		return "Executed"
	case AlreadyDone:
		return "AlreadyDone"
	case NotNeeded:
		return "NotNeeded"
	}
	return "NoOutcome"
}
