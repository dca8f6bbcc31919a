package spanmutex

import (
	"context"
	"errors"
	"fmt"

	"cloud.google.com/go/spanner"
)

// InterruptedError says that a section was stopped from outside (a SIGTERM
// of a pod eviction, a shutdown) rather than failing by itself. When the
// section returns one, Run gives the row back instead of recording FAILED:
// the row becomes NEEDED, the attempt is not counted, and Reason is stored
// in LastError; the next contender runs the section again. It matches
// ErrInterrupted; Unwrap returns Err.
type InterruptedError struct {
	Name   string // the section; set by Run
	Token  int64  // the token it ran with; set by Run
	Reason string // why it was stopped, in words: recorded in LastError
	Err    error  // how the section ended, if there is an error to keep
}

// Interrupt returns the error a section returns to say that it was stopped
// from outside before it could finish, and why: Run then gives the row back
// (NEEDED, attempt not counted, reason recorded) instead of recording
// FAILED. Use it only for stops that say nothing about the section itself:
// a section interrupted for ever is retried for ever. err is how the section
// ended (it may be nil).
func Interrupt(reason string, err error) error {
	return &InterruptedError{Reason: reason, Err: err}
}

func (e *InterruptedError) Error() string {
	msg := "spanmutex: "
	if e.Name != "" {
		msg += fmt.Sprintf("section %q (token %d) ", e.Name, e.Token)
	}
	msg += "interrupted: " + e.Reason
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns ErrInterrupted and, if set, Err (how the section ended),
// so that errors.Is and errors.As see both.
func (e *InterruptedError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrInterrupted}
	}
	return []error{ErrInterrupted, e.Err}
}

// interrupted gives back the row of a section that returned an
// *InterruptedError, within the finish timeout even if ctx is done, and
// returns the error Run ends with.
func (m *Mutex) interrupted(ctx context.Context, lease *Lease, ie *InterruptedError) error {
	out := &InterruptedError{Name: m.name, Token: lease.token, Reason: ie.Reason, Err: ie.Err}
	reason := out.Reason
	if ie.Err != nil {
		reason += ": " + ie.Err.Error()
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.finishTimeout)
	defer cancel()
	bo := m.cfg.newBackOff()
	w := newLostWrite(lease, StateNeeded)
	var unknown error // the answer of an earlier try that may have landed
	for {
		var err error
		if !w.movedOn() { // once it has, no try can land: only settle can tell
			err = m.store.interrupt(fctx, lease, "interrupted: "+reason)
			if err != nil && !errors.Is(err, ErrLeaseLost) {
				unknown = err
			}
		}
		if w.movedOn() || (errors.Is(err, ErrLeaseLost) && unknown != nil) {
			// An earlier try's answer was lost: did it land?
			landed, r, werr := w.settle(fctx, m.store)
			switch {
			case werr != nil:
				err = werr // still unknown: try again
			case landed:
				err = nil
			case !r.heldBy(lease.id):
				err = lease.lostTo(r)
			}
		}
		switch {
		case err == nil:
			m.cfg.logger.Info("section interrupted; gave the row back (NEEDED, attempt not counted)", "token", lease.token, "reason", reason)
			return out
		case errors.Is(err, ErrLeaseLost):
			return errors.Join(out, err)
		}
		m.cfg.logger.Warn("giving back the interrupted section failed; retrying", "err", err)
		if perr := pauseWith(fctx, m.cfg.clock, bo, 0, nil); perr != nil {
			return errors.Join(out, fmt.Errorf("spanmutex: section %q (token %d): could not give the row back: %w", m.name, lease.token, unknown))
		}
	}
}

// interrupt moves our STARTED row to NEEDED with one attempt fewer and the
// reason in LastError, fenced on the lease. A try whose answer was lost is
// recognised: the row NEEDED under our lease id and token.
func (s *spannerStore) interrupt(ctx context.Context, l *Lease, reason string) error {
	var watchers []handOff
	_, err := s.fencedUpdate(ctx, l, func(lost *leaseLostError) bool {
		return lost.CurrentState == StateNeeded && lost.currentLeaseID == l.id && lost.CurrentToken == l.token // an earlier try committed
	}, func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
		r, err := tx.ReadRow(ctx, s.table, spanner.Key{l.name}, []string{"Attempts"})
		if err != nil {
			return err
		}
		var attempts int64
		if err := r.Columns(&attempts); err != nil {
			return err
		}
		var ms []*spanner.Mutation
		if watchers, ms, err = s.takeWatchersIn(ctx, tx, l.name, nil); err != nil {
			return err
		}
		return tx.BufferWrite(append(ms, spanner.Update(s.table,
			[]string{"Name", "State", "Attempts", "LastError", "FinishedAt", "UpdatedAt"},
			[]any{l.name, string(StateNeeded), max(attempts-1, 0), truncate(reason, maxErrorText), spanner.CommitTimestamp, spanner.CommitTimestamp})))
	})
	if err == nil {
		s.wakeWatchers(ctx, watchers) // the section is needed again: its waiters may take it
	}
	return err
}
