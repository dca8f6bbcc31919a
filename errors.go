package spanmutex

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spanmutex/spanmutex/ddl"
)

// Sentinel errors: each names a kind of failure. Test for them with
// errors.Is; the error's message carries the details (which section, which
// tokens, which owner, what to do). Three kinds come as a type whose fields
// a caller acts on: *HeldError (who holds the lock and for how long),
// *SectionError (the section's own error and its attempt) and
// *InterruptedError (made by Interrupt); and a *SizeMismatchError names a
// semaphore's stored size.
var (
	// ErrInvalidConfig is wrapped by every error New returns for bad input:
	// a nil client, a bad name, or an invalid option or combination.
	ErrInvalidConfig = errors.New("spanmutex: invalid configuration")

	// ErrAttemptsExhausted: the section was started MaxAttempts times in this
	// generation of the row and never completed, or the backoff policy of
	// WithBackOff stopped a wait. An outage (ErrOutage) matches it too:
	// test ErrOutage first to tell an outage from used-up attempts.
	ErrAttemptsExhausted = errors.New("spanmutex: attempt limit reached")

	// ErrOutage: Spanner kept failing: MaxFailures calls of one kind in a
	// row failed (WithMaxFailures), so Run, Lock or TryLock gave up
	// waiting (nothing about the section's attempts is implied: the row
	// was not changed by the calls that failed); or every try of an Unlock
	// or Release failed for its finish window (WithFinishTimeout), and it
	// gave up with its outcome unknown. errors.Is and errors.As
	// see the last failed call's error too.
	ErrOutage = errors.New("spanmutex: Spanner kept failing")

	// ErrLeaseLost: the row stopped being ours while we held it: taken over
	// after our renewals failed for a lease, recorded abandoned, or
	// deleted. Work done after that may be done twice; writes fenced with
	// our token are rejected. The message names the row's state, owner and
	// token now, or the reason.
	ErrLeaseLost = errors.New("spanmutex: lease lost")

	// ErrReleased is matched by a Lease's Err, and by its Guard's error,
	// once its holder released it: Lock.Unlock returned, or Run's section
	// returned and Run recorded its end. It does not match ErrLeaseLost:
	// nobody took the lease over; the holder let go of it.
	ErrReleased = errors.New("spanmutex: lease released")

	// ErrSchema: the mutex table is missing or does not have the columns
	// spanmutex needs. The message names what is missing and the
	// 'spanmutex ddl' command that creates or upgrades the schema.
	ErrSchema = errors.New("spanmutex: schema problem")

	// ErrNotObtained is joined with ctx.Err() when Run's context ends before
	// the section could be acquired. The section did not run in this call.
	ErrNotObtained = errors.New("spanmutex: not obtained")

	// ErrNoLeader: Election.Leader found nobody leading.
	ErrNoLeader = errors.New("spanmutex: no leader")

	// ErrResigned is the cause of a Leadership's context after Resign.
	ErrResigned = errors.New("spanmutex: leadership resigned")

	// ErrHeld is matched by the *HeldError a TryLock (or a Semaphore's
	// TryAcquire, an RWLock's TryRLock) returns when the lock is held or
	// others are queued for it.
	ErrHeld = errors.New("spanmutex: lock is held")

	// ErrInterrupted is matched by the *InterruptedError a section returns
	// (through Interrupt) when it was stopped from outside before it could
	// finish, and by the error Run then returns.
	ErrInterrupted = errors.New("spanmutex: section interrupted")

	// ErrUnreachable is matched by the error returned when Spanner could not be
	// reached at all (no call to it had succeeded yet); its message names the
	// host and the cause (connection refused, DNS, TLS, credentials).
	ErrUnreachable = errors.New("spanmutex: Spanner unreachable")

	// ErrNotFound is matched by the error returned when the database, or its
	// instance, does not exist; its message names which.
	ErrNotFound = errors.New("spanmutex: database or instance not found")

	// ErrResetRefused is matched by the error Reset returns when it leaves the
	// row as it was; its message says why.
	ErrResetRefused = errors.New("spanmutex: reset refused")

	// ErrStaleToken is matched by the error a Fence returns for an operation
	// that carries a token lower than one the resource already accepted: its
	// holder lost the lock to a newer one. The message names the resource, the
	// token and the highest token accepted.
	ErrStaleToken = errors.New("spanmutex: stale fencing token")
)

// errNotMade is the error of a method called on a typ that ctor did not
// make: its zero value, or a nil pointer. It wraps ErrInvalidConfig.
func errNotMade(typ, ctor string) error {
	return fmt.Errorf("%w: %s used without %s", ErrInvalidConfig, typ, ctor)
}

// errNilClient is the error of call, a constructor or function, given a nil
// *spanner.Client. It wraps ErrInvalidConfig.
func errNilClient(call string) error {
	return fmt.Errorf("%w: %s: nil *spanner.Client: open one with spanner.NewClient", ErrInvalidConfig, call)
}

// joinedError is errors.Join on one line: its message is its errors'
// messages joined by ": ", so that a log line stays one line; errors.Is and
// errors.As see every one of them.
type joinedError struct{ errs []error }

// joinErrors joins the non-nil errs into one error, or returns nil if there
// are none.
func joinErrors(errs ...error) error {
	var kept []error
	for _, err := range errs {
		if err != nil {
			kept = append(kept, err)
		}
	}
	if len(kept) == 0 {
		return nil
	}
	return &joinedError{errs: kept}
}

func (e *joinedError) Error() string {
	msgs := make([]string, len(e.errs))
	for i, err := range e.errs {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, ": ")
}

// Unwrap returns the joined errors.
func (e *joinedError) Unwrap() []error { return e.errs }

// exhaustedError is returned by Run when it gives up on the section's
// attempts: the section was started MaxAttempts times and never completed,
// or (LastError says so) the backoff policy of WithBackOff stopped a wait.
// It matches ErrAttemptsExhausted. Failed Spanner calls end in an
// outageError instead.
type exhaustedError struct {
	Name        string // the section
	Attempts    int64  // starts recorded in the row
	MaxAttempts int    // the limit: WithMaxAttempts
	LastError   string // the last attempt's error text, if any
	Err         error  // the error that made Run give up, if any
}

func (e *exhaustedError) Error() string {
	msg := fmt.Sprintf("spanmutex: section %q: gave up after %d of %d attempts", e.Name, e.Attempts, e.MaxAttempts)
	if e.LastError != "" {
		msg += ": last error: " + e.LastError
	}
	return msg
}

// Is reports whether target is ErrAttemptsExhausted.
func (e *exhaustedError) Is(target error) bool { return target == ErrAttemptsExhausted }

// Unwrap returns the Spanner error that made Run give up, if any.
func (e *exhaustedError) Unwrap() error { return e.Err }

// outageError is returned by Run, Lock or TryLock when Spanner kept
// failing: MaxFailures calls of one kind (reads, or writes) in a row failed
// with errors worth another try (unavailable, deadline exceeded), or the
// backoff policy stopped their retries. The section did not run in that
// call, and its attempts were not touched. It matches ErrOutage and, for
// callers written before it existed, ErrAttemptsExhausted; errors.As does
// not find an *exhaustedError in it. Unwrap returns the last call's error.
type outageError struct {
	Name        string // the section or lock
	Failures    int    // calls that failed in a row
	MaxFailures int    // the limit: WithMaxFailures
	// BackOffStopped is set when the backoff policy (WithBackOff) stopped
	// the retries before MaxFailures was reached.
	BackOffStopped bool
	// Window, if set, is the finish window an Unlock or Release kept
	// trying for (finishWindow) before it gave up, its outcome unknown.
	Window time.Duration
	Err    error // the last failed call's error
}

func (e *outageError) Error() string {
	msg := fmt.Sprintf("spanmutex: %q: Spanner kept failing: %d calls in a row failed (at most %d allowed)", e.Name, e.Failures, e.MaxFailures)
	switch {
	case e.Window > 0:
		msg = fmt.Sprintf("spanmutex: %q: Spanner kept failing for the %v a release may take (WithFinishTimeout): %d calls failed; "+
			"whether it landed is unknown, and if it did not, the lease, no longer renewed, lapses after its length", e.Name, e.Window.Round(time.Millisecond), e.Failures)
	case e.BackOffStopped:
		msg = fmt.Sprintf("spanmutex: %q: Spanner kept failing: the backoff policy stopped the retries after %d failed calls in a row", e.Name, e.Failures)
	}
	if e.Err != nil {
		msg += ": last error: " + e.Err.Error()
	}
	return msg
}

// Is reports whether target is ErrOutage or ErrAttemptsExhausted.
func (e *outageError) Is(target error) bool {
	return target == ErrOutage || target == ErrAttemptsExhausted
}

// Unwrap returns the last failed call's error.
func (e *outageError) Unwrap() error { return e.Err }

// leaseLostError is returned when a holder finds that the row is no longer
// its own. It matches ErrLeaseLost.
type leaseLostError struct {
	Name         string // the section
	Token        int64  // the token this holder had
	CurrentState State  // the row's state now ("" if the row is gone)
	CurrentOwner string // who holds or last held it now
	CurrentToken int64  // the row's token now
	// Reason, when set, says how the lease was lost in words: renewals kept
	// failing until another holder could take over, or the section was
	// recorded as abandoned.
	Reason string

	currentLeaseID string // the acquisition id now in the row
}

func (e *leaseLostError) Error() string {
	if e.Reason != "" {
		return fmt.Sprintf("spanmutex: %q: lease with token %d lost: %s", e.Name, e.Token, e.Reason)
	}
	return fmt.Sprintf("spanmutex: %q: lease lost: we held token %d but the row is now %s, owner %q, token %d; "+
		"writes fenced with our token are rejected, and work done after the takeover may be done twice",
		e.Name, e.Token, e.CurrentState, e.CurrentOwner, e.CurrentToken)
}

// Is reports whether target is ErrLeaseLost.
func (e *leaseLostError) Is(target error) bool { return target == ErrLeaseLost }

// schemaError says what is wrong with the mutex table. It matches ErrSchema.
type schemaError struct {
	Table   string   // the configured table name
	Problem string   // what is wrong, in words
	Missing []string // columns that are absent or of the wrong type
	Err     error    // the Spanner error that revealed it, if any
	// Dialect is the database's SQL dialect: the schema to create is
	// 'spanmutex ddl --dialect postgresql' on a PostgreSQL database.
	Dialect ddl.Dialect

	fix string // what to do, when creating the schema is not it
}

func (e *schemaError) Error() string {
	msg := fmt.Sprintf("spanmutex: table %s: %s", e.Table, e.Problem)
	if len(e.Missing) > 0 {
		msg += " (" + strings.Join(e.Missing, ", ") + ")"
	}
	if e.fix != "" {
		return msg + "; " + e.fix
	}
	if e.onlyUpgrade() {
		return msg + fmt.Sprintf("; the table was made by an earlier spanmutex: add the columns with: spanmutex ddl --upgrade%s --table %s | gcloud spanner databases ddl update DATABASE --instance=INSTANCE --ddl-file=/dev/stdin", e.dialectFlag(), e.Table)
	}
	return msg + fmt.Sprintf("; create the schema with: spanmutex ddl%s --table %s | gcloud spanner databases ddl update DATABASE --instance=INSTANCE --ddl-file=/dev/stdin", e.dialectFlag(), e.Table)
}

// dialectFlag is the --dialect flag of the ddl command for e's database.
func (e *schemaError) dialectFlag() string { return dialectFlag(e.Dialect) }

// dialectFlag is the --dialect flag of the ddl command for a database of
// dialect d.
func dialectFlag(d ddl.Dialect) string {
	if d == ddl.PostgreSQL {
		return " --dialect postgresql"
	}
	return ""
}

// onlyUpgrade reports whether every missing column is one that ddl.Upgrade
// adds to a table of an earlier spanmutex.
func (e *schemaError) onlyUpgrade() bool {
	mutex, queue := e.Dialect.MutexColumns(), e.Dialect.QueueColumns()
	added := []string{ // as missingColumns describes them, in either table
		"LeaseMicros " + mutex["LeaseMicros"] + " missing",
		"Version " + mutex["Version"] + " missing",
		"Queued " + mutex["Queued"] + " missing",
		"WakeAddr " + queue["WakeAddr"] + " missing",
		"Permits " + mutex["Permits"] + " missing",
		"Token " + queue["Token"] + " missing",
	}
	for _, m := range e.Missing {
		if !slices.ContainsFunc(added, func(a string) bool { return strings.HasSuffix(m, a) }) {
			return false
		}
	}
	return len(e.Missing) > 0
}

// Is reports whether target is ErrSchema.
func (e *schemaError) Is(target error) bool { return target == ErrSchema }

// Unwrap returns the Spanner error behind the problem.
func (e *schemaError) Unwrap() error { return e.Err }

// HeldError says who holds the lock TryLock could not take. It matches ErrHeld.
type HeldError struct {
	Name    string
	Holder  string // the holder's owner identity, "" if the lock is free but waiters are queued
	Token   int64  // the holder's token
	Waiters int    // live waiters queued (counted up to 256)
	// LeaseLeft is how long, by Spanner's clock at the read, the holder's
	// declared lease had still to run since its last renewal: nobody may
	// take the lock over sooner, so a caller that wants it only if its
	// holder dies may wait that long before it tries again. 0 when no
	// holder was read (waiters queued; a concurrent contender).
	LeaseLeft time.Duration
}

func (e *HeldError) Error() string {
	if e.Holder == "" {
		return fmt.Sprintf("spanmutex: lock %q is free but %d waiter(s) are queued before you; use Lock to wait your turn", e.Name, e.Waiters)
	}
	return fmt.Sprintf("spanmutex: lock %q is held by %q (token %d), %d waiter(s) queued", e.Name, e.Holder, e.Token, e.Waiters)
}

// Is reports whether target is ErrHeld.
func (e *HeldError) Is(target error) bool { return target == ErrHeld }

// SectionError wraps the error returned by the section itself; the row was
// marked FAILED with its text. errors.Is and errors.As see through it to the
// section's error.
type SectionError struct {
	Name  string // the section
	Token int64  // the fencing token it ran with
	// Attempt is which attempt of the row's generation this was (1 is the
	// first), as the acquisition that ran it committed it in the row:
	// two runs never both see the same attempt fail (a run whose attempt
	// was given back, interrupted, does not count). With MaxAttempts, it
	// says whether a later Run retries.
	Attempt int64
	Err     error // what the section returned
}

func (e *SectionError) Error() string {
	return fmt.Sprintf("spanmutex: section %q (token %d) failed: %v", e.Name, e.Token, e.Err)
}

// Unwrap returns the section's own error.
func (e *SectionError) Unwrap() error { return e.Err }

// errNotObtained is the error of a call whose ctx ended before it obtained
// the section or lock: it matches ErrNotObtained and ctx.Err().
func errNotObtained(ctx context.Context) error {
	return joinErrors(ErrNotObtained, ctx.Err())
}

// notObtained makes an error that ended a wait because ctx ended (a Spanner
// call cut short by the deadline, say) match ErrNotObtained and ctx.Err(),
// as documented, keeping the error itself in the chain.
func notObtained(ctx context.Context, err error) error {
	if err == nil || ctx.Err() == nil || errors.Is(err, ErrNotObtained) {
		return err
	}
	return joinErrors(ErrNotObtained, ctx.Err(), err)
}
