package spanmutex

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Lease is a holder's claim on a section or lock, handed to the section while
// it runs (or returned by Lock). While it is held it is renewed in the
// background; when it is lost, Done closes, Err says why, and the context
// given to the section is cancelled with that cause. When its holder lets
// go of it (Lock.Unlock returned, or Run's section returned and Run
// recorded how it ended), Done closes too and Err matches ErrReleased.
//
// Its token fences the holder's writes elsewhere: pass it with every write
// the section makes, and have the receiver reject tokens lower than the
// highest it has seen (see Fence), or call Guard inside your own Spanner
// transaction. Its methods are safe for concurrent use. A nil *Lease
// holds nothing: Err and Guard return an error saying where leases come
// from, Done a closed channel, and the other methods zero values.
type Lease struct {
	name       string
	owner      string
	id         string
	token      int64
	acquiredAt time.Time
	queuedAt   time.Time
	takeover   bool
	handedOff  bool
	// shared: a Semaphore's or RWLock's lease, held by its queue entry
	// (name, queuedAt, id), not by the row.
	shared bool
	// attempt is, for a run-once section, the row's Attempts as this
	// acquisition committed it: which attempt of its generation it is.
	attempt int64
	table   string
	// session is the session the lease is held through ("": none; it is
	// renewed on its own), as its row names it.
	session string
	// leaveSession ends the lease's membership of its session, once
	// granted through it (lock_session.go), or once it joined it at a
	// renewal (sessionJoin).
	leaveSession func()
	// through is the session that admitted the lease (session.admit), nil
	// if none did; set before the lease is granted or its renewals end.
	through *session
	// join, for a lease granted renewed on its own by a Lock of a Scope
	// with sessions (handed over by an Unlock), moves it into the Scope's
	// session at its first renewal (sessionJoin); nil otherwise.
	join *sessionJoin
	// anchor is the local time just before the request that set RenewedAt
	// at acquisition was sent (see keepAlive); renewals move it, under mu.
	anchor time.Time
	// renewedAt is the commit timestamp (Spanner's clock) of the last
	// acknowledged renewal; zero before the first, when acquiredAt is.
	renewedAt time.Time
	// unlocking is set by Lock.Unlock: renewal failures from then on are
	// reported by Unlock, not as a lost lease.
	unlocking atomic.Bool
	// hold is the telemetry of the hold (telemetry.go), set by the Lock,
	// Semaphore or Run that acquired the lease, under mu (setHold,
	// holdOp): a lease held through a session is its session's before its
	// acquirer sets hold, and the session's goroutine reads hold when it
	// loses the lease (telemetry.lost).
	hold op

	done     chan struct{}
	lostOnce sync.Once
	mu       sync.Mutex
	err      error
}

func newLease(name, owner, id string, token int64, takeover bool, table string) *Lease {
	return &Lease{name: name, owner: owner, id: id, token: token, takeover: takeover, table: table, done: make(chan struct{})}
}

// errNilLease is the error of a nil *Lease's Err and Guard.
var errNilLease = fmt.Errorf("%w: nil *Lease: leases come from Lock.Lock, Lock.TryLock, Mutex.Run or Election.Campaign", ErrInvalidConfig)

// Name returns the section's name.
func (l *Lease) Name() string {
	if l == nil {
		return ""
	}
	return l.name
}

// Owner returns the owner identity recorded in the row.
func (l *Lease) Owner() string {
	if l == nil {
		return ""
	}
	return l.owner
}

// Token returns the fencing token of this acquisition: strictly greater than
// the token of every earlier acquisition or takeover of the same name, and
// never handed out again (as long as the row is not deleted).
func (l *Lease) Token() int64 {
	if l == nil {
		return 0
	}
	return l.token
}

// AcquiredAt returns the Spanner commit timestamp of the acquisition.
func (l *Lease) AcquiredAt() time.Time {
	if l == nil {
		return time.Time{}
	}
	return l.acquiredAt
}

// QueuedAt returns, for a Lock's lease, the Spanner commit timestamp of the
// queue entry through which this Lock call waited its turn: the order in
// which the lock is granted among live waiters (FIFO). It is zero if the
// call took the lock without queueing, for every lease of a run-once Mutex,
// and when the entry's key is not known (its insert had an unknown
// outcome).
func (l *Lease) QueuedAt() time.Time {
	if l == nil {
		return time.Time{}
	}
	return l.queuedAt
}

// TookOver reports whether this acquisition took the section over from a
// holder that went silent past the lease.
func (l *Lease) TookOver() bool {
	if l == nil {
		return false
	}
	return l.takeover
}

// HandedOff reports whether a Lock acquired this lease by hand-off: the
// previous holder's Unlock wrote this contender in as holder, in the same
// read-write transaction that released the lock, and AcquiredAt is that
// transaction's commit timestamp. It is false for a lock taken while free
// (or taken over), for every lease of a run-once Mutex, and when an
// acquisition attempt of this Lock call had an unknown outcome (its own
// commit, not a hand-off, may then have made it the holder).
func (l *Lease) HandedOff() bool {
	if l == nil {
		return false
	}
	return l.handedOff
}

// Done returns a channel that is closed when the lease ends: it is lost (a
// renewal found the row taken over, or renewals kept failing until the
// lease could have passed), or its holder released it (Lock.Unlock
// returned, or Run's section returned and Run recorded its end). Err says
// which.
func (l *Lease) Done() <-chan struct{} {
	if l == nil {
		closed := make(chan struct{})
		close(closed)
		return closed
	}
	return l.done
}

// Err returns nil while the lease is held; once Done is closed, an
// error matching ErrLeaseLost if it was lost, or an error
// matching ErrReleased if its holder released it.
func (l *Lease) Err() error {
	if l == nil {
		return errNilLease
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// setHold records the telemetry of the hold (see hold).
func (l *Lease) setHold(h op) {
	l.mu.Lock()
	l.hold = h
	l.mu.Unlock()
}

// holdOp returns the telemetry of the hold (see hold).
func (l *Lease) holdOp() op {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.hold
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

// leftFirst reports whether r, a strong read that no longer shows the row
// held by l, was taken before any takeover of l was allowed by Spanner's
// clock: before l's last acknowledged renewal (or acquisition) plus lease,
// the lease l declared. Nobody but l's holder moves a live holder's row, so
// the move r shows was a write of l's holder: after a write of unknown
// outcome, that write landed.
func (l *Lease) leftFirst(r row, lease time.Duration) bool {
	last := l.lastRenewedAt()
	return !last.IsZero() && !r.heldBy(l.id) && r.Now.Before(last.Add(lease))
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

// end ends the lease now that its holder has let go of it, with err, the
// error of the unlock or of recording the section's end: lost if err says
// the row was no longer ours, released otherwise (a failed unlock too: the
// holder no longer renews it). A lease already lost stays lost.
func (l *Lease) end(err error) {
	var lost *leaseLostError
	if errors.As(err, &lost) {
		l.lose(lost)
		return
	}
	l.lose(fmt.Errorf("%w: %q (token %d) by its holder: it fences nothing now; acquire the lock again to write", ErrReleased, l.name, l.token))
}

// fencedAs returns a lease that fences as l does (its name, table, id and
// token) and has not ended: for a write of l's holder that must still land
// after l ended (the end of a section, retried: Mutex.leaveSessionAfter).
func (l *Lease) fencedAs() *Lease {
	c := newLease(l.name, l.owner, l.id, l.token, l.takeover, l.table)
	c.attempt, c.shared, c.queuedAt, c.session = l.attempt, l.shared, l.queuedAt, l.session
	return c
}

// lostTo is the error of lease l, which finds the row read as r no longer
// its own.
func (l *Lease) lostTo(r row) *leaseLostError {
	return &leaseLostError{Name: l.name, Token: l.token, CurrentState: r.State, CurrentOwner: r.Owner,
		CurrentToken: r.Token, currentLeaseID: r.LeaseID}
}
