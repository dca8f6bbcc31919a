package spanmutex

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/spanner"
)

// Lease is a holder's claim on a section or lock, handed to the section while
// it runs (or returned by Lock). While it is held it is renewed in the
// background; when it is lost, Done closes, Err says why, and the context
// given to the section is cancelled with that cause.
//
// Its token fences the holder's writes elsewhere: pass it with every write
// the section makes, and have the receiver reject tokens lower than the
// highest it has seen (see Fence), or call Guard inside your own Spanner
// transaction. Its methods are safe for concurrent use.
type Lease struct {
	name       string
	owner      string
	id         string
	token      int64
	acquiredAt time.Time
	takeover   bool
	handedOff  bool
	table      string
	// anchor is the local time just before the request that set RenewedAt
	// at acquisition was sent (see keepAlive); renewals move it, under mu.
	anchor time.Time
	// renewedAt is the commit timestamp (Spanner's clock) of the last
	// acknowledged renewal; zero before the first, when acquiredAt is.
	renewedAt time.Time
	// unlocking is set by Lock.Unlock: renewal failures from then on are
	// reported by Unlock, not as a lost lease.
	unlocking atomic.Bool
	// hold is the telemetry of the hold (telemetry.go), set by the Lock
	// or Run that acquired the lease.
	hold op

	done     chan struct{}
	lostOnce sync.Once
	mu       sync.Mutex
	err      error
}

func newLease(name, owner, id string, token int64, takeover bool, table string) *Lease {
	return &Lease{name: name, owner: owner, id: id, token: token, takeover: takeover, table: table, done: make(chan struct{})}
}

// Name returns the section's name.
func (l *Lease) Name() string { return l.name }

// Owner returns the owner identity recorded in the row.
func (l *Lease) Owner() string { return l.owner }

// Token returns the fencing token of this acquisition: strictly greater than
// the token of every earlier acquisition or takeover of the same name, and
// never handed out again (as long as the row is not deleted).
func (l *Lease) Token() int64 { return l.token }

// AcquiredAt returns the Spanner commit timestamp of the acquisition.
func (l *Lease) AcquiredAt() time.Time { return l.acquiredAt }

// TookOver reports whether this acquisition took the section over from a
// holder that went silent past the watermark.
func (l *Lease) TookOver() bool { return l.takeover }

// HandedOff reports whether a Lock acquired this lease by hand-off: the
// previous holder's Unlock wrote this contender in as holder, in the same
// read-write transaction that released the lock, and AcquiredAt is that
// transaction's commit timestamp. It is false for a lock taken while free
// (or taken over), for every lease of a run-once Mutex, and when an
// acquisition attempt of this Lock call had an unknown outcome (its own
// commit, not a hand-off, may then have made it the holder).
func (l *Lease) HandedOff() bool { return l.handedOff }

// Done returns a channel that is closed when the lease is lost: a renewal
// found the row taken over, or renewals kept failing until the watermark
// could have passed. It is not closed by a normal end of the section.
func (l *Lease) Done() <-chan struct{} { return l.done }

// Err returns nil while the lease is held, and a *LeaseLostError (matching
// ErrLeaseLost) once Done is closed.
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// setAnchor records the send time of an acknowledged renewal.
func (l *Lease) setAnchor(t time.Time) {
	l.mu.Lock()
	l.anchor = t
	l.mu.Unlock()
}

// setRenewedAt records the commit timestamp of an acknowledged renewal.
func (l *Lease) setRenewedAt(ts time.Time) {
	l.mu.Lock()
	l.renewedAt = latest(l.renewedAt, ts)
	l.mu.Unlock()
}

// lastRenewedAt returns the commit timestamp of the last acknowledged
// renewal, or of the acquisition: by Spanner's clock, nobody can take the
// lease over before it plus the lease declared.
func (l *Lease) lastRenewedAt() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return latest(l.acquiredAt, l.renewedAt)
}

// lastAnchor returns the send time of the last acknowledged renewal (or of
// the acquisition).
func (l *Lease) lastAnchor() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.anchor
}

// lose records why the lease was lost and closes Done, once.
func (l *Lease) lose(err error) {
	l.lostOnce.Do(func() {
		l.mu.Lock()
		l.err = err
		l.mu.Unlock()
		close(l.done)
	})
}

// lostTo is the error of lease l, which finds the row read as r no longer
// its own.
func (l *Lease) lostTo(r row) *LeaseLostError {
	return &LeaseLostError{Name: l.name, Token: l.token, CurrentState: r.State, CurrentOwner: r.Owner,
		CurrentToken: r.Token, currentLeaseID: r.LeaseID}
}

// Guard checks, inside the caller's own read-write transaction, that the
// lease is still held: the row is STARTED under this acquisition's id and
// token. It returns a *LeaseLostError if not, and the caller should then
// return it to make the transaction roll back.
//
// This is the strongest fence there is: Guard's read and the caller's writes
// commit in one serializable transaction, so they commit only if no takeover
// committed before them; a takeover that comes later is ordered after them.
//
//	_, err := client.ReadWriteTransaction(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
//		if err := lease.Guard(ctx, txn); err != nil {
//			return err
//		}
//		return txn.BufferWrite(myWrites)
//	})
func (l *Lease) Guard(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
	if txn == nil {
		return fmt.Errorf("spanmutex: Guard: nil transaction")
	}
	r, err := txn.ReadRow(ctx, l.table, spanner.Key{l.name}, []string{"State", "Owner", "LeaseID", "Token"})
	if errors.Is(err, spanner.ErrRowNotFound) {
		return &LeaseLostError{Name: l.name, Token: l.token, Reason: "the row was deleted"}
	}
	if err != nil {
		return fmt.Errorf("spanmutex: Guard %q: %w", l.name, err)
	}
	return l.checkHeld(r)
}

// checkHeld returns a *LeaseLostError unless r (State, Owner, LeaseID,
// Token) shows this lease holding the row.
func (l *Lease) checkHeld(r *spanner.Row) error {
	var state, owner, leaseID spanner.NullString
	var token int64
	if err := r.Columns(&state, &owner, &leaseID, &token); err != nil {
		return fmt.Errorf("spanmutex: decode row %q: %w", l.name, err)
	}
	if State(state.StringVal) == StateStarted && leaseID.StringVal == l.id && token == l.token {
		return nil
	}
	lost := &LeaseLostError{Name: l.name, Token: l.token, CurrentState: State(state.StringVal),
		CurrentOwner: owner.StringVal, CurrentToken: token, currentLeaseID: leaseID.StringVal}
	if token == l.token && leaseID.StringVal != l.id && State(state.StringVal) == StateFailed {
		lost.Reason = "another contender recorded the section FAILED as abandoned: " +
			"this holder did not renew within the watermark on the last allowed attempt"
	}
	return lost
}
