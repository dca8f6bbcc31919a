package spanmutex

import "errors"

// How a Run is traced: the outcome attribute of its acquisition and of its
// own span (telemetry.go records them).

// runOutcome names how Run's acquisition ended, for the outcome attribute:
// with no error, whether the section was already done or not needed.
func runOutcome(err error, out Outcome) string {
	switch {
	case err == nil && out == AlreadyDone:
		return "already_done"
	case err == nil && out == NotNeeded:
		return "not_needed"
	}
	return errOutcome(err)
}

// ended ends Run's own span with how Run ended.
func (o op) ended(out Outcome, err error) {
	if o.t == nil {
		return
	}
	outcome := runOutcome(err, out)
	if out == Executed {
		outcome = sectionOutcome(err)
	}
	o.span.SetAttributes(attrOutcome.String(outcome))
	o.endSpan(err)
}

// sectionOutcome names how a Run that held the section ended.
func sectionOutcome(err error) string {
	var interrupted *InterruptedError
	var section *SectionError
	switch {
	case err == nil:
		return "done"
	case errors.As(err, &interrupted):
		return "interrupted"
	case errors.Is(err, ErrLeaseLost):
		return "lease_lost"
	case errors.As(err, &section):
		return "failed"
	}
	return "error"
}
