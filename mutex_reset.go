package spanmutex

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/google/uuid"
)

// resetRefusedError says why Reset left a row unchanged. It matches
// ErrResetRefused.
type resetRefusedError struct {
	Name   string // the section
	State  State  // the row's state ("" if there is no row)
	Owner  string // who holds or last held it
	Token  int64  // the row's token
	Reason string // why, in words
}

func (e *resetRefusedError) Error() string {
	return fmt.Sprintf("spanmutex: reset %q refused: %s", e.Name, e.Reason)
}

// Is reports whether target is ErrResetRefused.
func (e *resetRefusedError) Is(target error) bool { return target == ErrResetRefused }

// ResetResult is what Reset found and did.
type ResetResult struct {
	// Before is the state the row was in: FAILED, NEEDED, or STARTED under a
	// holder silent past the lease.
	Before State
	// Attempts is how many attempts the row had counted; it now counts 0.
	Attempts int64
	// Token is the row's token before the reset (the evicted holder's, if
	// any), kept unless Forced: the next acquisition gets a higher one, so
	// a holder from before the reset stays fenced out.
	Token int64
	// LastError is the error text the row held before the reset.
	LastError string
	// Evicted is the owner of the STARTED row that was reset (its holder
	// was silent past its lease, or ForceReset cut it off); "" if the row
	// was not STARTED.
	Evicted string
	// Forced: ForceReset cut off a holder that still renewed within its
	// lease; the row's token is then Token+1, so the next acquisition gets
	// Token+2.
	Forced bool
}

// Reset re-arms the section so that the next Run starts it again, with
// MaxAttempts fresh attempts: the row becomes NEEDED with no attempt counted
// and a LastError that says it was reset. It is for a section that failed
// or gave up (Run returned an error matching ErrAttemptsExhausted; "spanmutex run" exited 75)
// once its cause has been fixed.
//
// Reset decides in one read-write transaction on Spanner's clock, as an
// acquisition does. It refuses, with an error matching ErrResetRefused and the row
// unchanged, when there is no row, when the row is DONE (the section
// completed: run it again under a new name or version), and when the row is
// STARTED by a holder that renewed its lease within the lease it declared
// (a live holder is never cut off). A STARTED row whose holder has been
// silent past its lease is reset: that holder, if it comes back, finds
// its lease gone (ErrLeaseLost), and the token is kept, so its fenced writes
// are rejected. Reset does not run the section.
func (m *Mutex) Reset(ctx context.Context) (ResetResult, error) {
	return m.reset(ctx, false)
}

// ForceReset is Reset for an operator who knows that the STARTED row's
// holder is dead although its lease has not run out (a holder killed with
// a long lease): it resets a STARTED row whatever its lease, and refuses
// only where Reset refuses for other reasons (no row, DONE). It bumps the
// row's token past the evicted holder's, so that holder, should it be
// alive after all, loses its lease at its next renewal (Lease.Done closes,
// its section's ctx is cancelled), its Guard fails at once, and a Fence
// rejects its token once a newer holder's has been admitted (a holder
// that runs through its Scope's session, WithSessions, renews no row of
// its own: it notices at its finish, ErrLeaseLost, or by Guard, and its
// Done stays open till then). It logs, at
// Warn, the owner and token it evicted, which ResetResult.Evicted and
// Token also say. A holder that is in fact alive may still be running its
// section when the next holder starts it: use it only on dead holders.
func (m *Mutex) ForceReset(ctx context.Context) (ResetResult, error) {
	return m.reset(ctx, true)
}

// reset is Reset, or ForceReset if force.
func (m *Mutex) reset(ctx context.Context, force bool) (ResetResult, error) {
	if ctx == nil {
		return ResetResult{}, errNilContext
	}
	if m == nil || m.store == nil {
		return ResetResult{}, errNotMade("Mutex", "New")
	}
	began := time.Now()
	if err := m.checkSchema(ctx); err != nil {
		return ResetResult{}, m.unreached(ctx, err, began)
	}
	res, err := m.store.reset(ctx, m.name, m.cfg.lease, uuid.NewString(), force)
	if err != nil {
		return res, m.unreached(ctx, err, began)
	}
	if res.Evicted != "" {
		m.cfg.logger.Warn("reset: evicted the holder of a STARTED row", "evicted_owner", res.Evicted, "evicted_token", res.Token, "forced", res.Forced)
	}
	m.cfg.logger.Info("reset: the row is NEEDED with no attempt counted", "was", res.Before, "attempts", res.Attempts, "token", res.Token)
	return res, nil
}

// decideReset says whether a row read on Spanner's clock may be reset, and
// if not, why.
func decideReset(r row, lease time.Duration, force bool) (ok bool, refusal string) {
	switch {
	case force && r.State == StateStarted:
		return true, ""
	case !r.Exists:
		return false, "there is no row by that name: nothing to reset"
	case r.State == StateDone:
		return false, "it is DONE: it completed, so there is nothing to re-arm; run it again under a new name or version"
	case r.State == StateStarted:
		if silent, lease := silentFor(r), holderLease(r, lease); silent < lease {
			return false, fmt.Sprintf("it is STARTED by %s (token %d), a live holder that renewed its lease %v ago, within the lease of %v it declared; "+
				"wait for it to finish, or for it to go silent past its lease; if it is dead, force the reset (ForceReset, reset --force)",
				r.Owner, r.Token, silent.Round(time.Millisecond), lease)
		}
		return true, ""
	case r.State == StateFailed || r.State == StateNeeded:
		return true, ""
	}
	return false, fmt.Sprintf("it has unknown state %q", r.State)
}

// reset re-arms name's row if decideReset allows it; leaseID replaces the
// row's acquisition id so that a silent holder finds its lease gone.
func (s *spannerStore) reset(ctx context.Context, name string, lease time.Duration, leaseID string, force bool) (ResetResult, error) {
	var res ResetResult
	d, err := s.dialect.Get(ctx) // before the transaction: see statement
	if err != nil {
		return res, s.explain(ctx, err)
	}
	var watchers []handOff
	_, err = s.rw(ctx, tagReset, func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
		s.stats.rwAttempts.Add(1)
		res = ResetResult{}
		r, err := s.queryRow(ctx, tx, d, name)
		if err != nil {
			return err
		}
		// Spanner's clock: r.Now is CURRENT_TIMESTAMP() of this transaction.
		var w row
		if w, res, err = planReset(name, r, lease, leaseID, force); err != nil {
			return err
		}
		var ms []*spanner.Mutation
		if watchers, ms, err = s.takeWatchersIn(ctx, tx, name, nil); err != nil {
			return err
		}
		return tx.BufferWrite(append(ms, spanner.Update(s.table,
			[]string{"Name", "State", "LeaseID", "Token", "Attempts", "LastError", "UpdatedAt"},
			[]any{name, string(w.State), w.LeaseID, w.Token, w.Attempts, w.LastError, spanner.CommitTimestamp})))
	})
	var refused *resetRefusedError
	if errors.As(err, &refused) {
		return ResetResult{}, refused
	}
	if err != nil {
		return ResetResult{}, s.explain(ctx, err)
	}
	s.reached.Store(true)
	s.wakeWatchers(ctx, watchers) // the section is needed again: its waiters may take it
	return res, nil
}

// planReset decides, on the row r read with Spanner's clock inside the
// deciding transaction, whether a reset may re-arm it (decideReset), and
// returns the row to write and what it found: r made NEEDED, with leaseID
// as its acquisition id (a silent holder finds its lease gone), no attempt
// counted, the token kept (bumped past a holder it forced out), and a note
// in LastError. Refused, a *resetRefusedError. Every store's reset writes
// what it returns.
func planReset(name string, r row, lease time.Duration, leaseID string, force bool) (row, ResetResult, error) {
	if ok, why := decideReset(r, lease, force); !ok {
		return row{}, ResetResult{}, &resetRefusedError{Name: name, State: r.State, Owner: r.Owner, Token: r.Token, Reason: why}
	}
	res := resetResult(r, lease, force)
	w := r
	w.State, w.LeaseID, w.Token, w.Attempts, w.LastError = StateNeeded, leaseID, resetToken(res), 0, truncate(resetNote(r, res), maxErrorText)
	return w, res, nil
}

// resetResult is what a reset of r, allowed by decideReset, does.
func resetResult(r row, lease time.Duration, force bool) ResetResult {
	res := ResetResult{Before: r.State, Attempts: r.Attempts, Token: r.Token, LastError: r.LastError}
	if r.State == StateStarted {
		res.Evicted = r.Owner
		ok, _ := decideReset(r, lease, false)
		res.Forced = force && !ok
	}
	return res
}

// resetToken is the token a reset writes: bumped past a holder it forced
// out, kept otherwise.
func resetToken(res ResetResult) int64 {
	if res.Forced {
		return res.Token + 1
	}
	return res.Token
}

// resetNote is the LastError a reset of r writes.
func resetNote(r row, res ResetResult) string {
	note := fmt.Sprintf("reset from %s after %d attempt(s)", r.State, r.Attempts)
	switch {
	case res.Forced:
		note += fmt.Sprintf(" (holder %s, token %d, evicted by a forced reset within its lease)", r.Owner, r.Token)
	case r.State == StateStarted:
		note += fmt.Sprintf(" (holder %s, token %d, silent past the lease)", r.Owner, r.Token)
	}
	if r.LastError != "" {
		note += "; last error: " + r.LastError
	}
	return note
}
