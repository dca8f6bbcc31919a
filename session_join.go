package spanmutex

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/spanmutex/spanmutex/internal/spanerr"
)

// What a primitive needs to hold through its Scope's session beside
// session.go and session_store.go: the move of a lease renewed on its own
// into the session at its first renewal (sessionJoin), which the Lock and
// the Semaphore share.

// sessionRenewer renews a held lease through a session: a Lock's store
// whose table has sessions, or a Semaphore's (semJoinRenewer).
type sessionRenewer interface {
	// renewThrough renews l, fenced as renew is, and makes its row name
	// session id with sessionHeldLease as its lease, inserting the
	// session's row in the same write if it starts it (start not nil:
	// session.next); with id "", it names none and declares the lease l
	// was granted with. It sets l's renewal commit timestamp.
	renewThrough(ctx context.Context, l *Lease, id string, start *sessionRow) error
}

// asSessionRenewer returns st, a primitive's store, as a sessionRenewer,
// or nil.
func asSessionRenewer(st any) sessionRenewer {
	sr, _ := st.(sessionRenewer)
	return sr
}

// errJoinedSession: a renewal moved the lease into the Scope's session,
// which renews it from then on; its own renewals end (keepAlive).
var errJoinedSession = errors.New("spanmutex: the lease joined the Scope's session")

// A sessionJoin moves a lease handed over to a Lock (or granted by
// another's Release to a Semaphore) of a Scope with sessions into the
// session at the lease's first renewal, which it makes in keepAlive's
// place: the renewal writes the session's id into the row (or entry), and
// the century a holder through a session declares, in the same write
// (which starts the session if need be), so the hand-off costs what it
// did and the lease costs nothing of its own from then on. The grant
// rule's check (admit) follows the renewal; a lease the session cannot
// admit (lost meanwhile) stays renewed on its own, its row kept live by
// this renewal, and the next renewal names the session live then.
type sessionJoin struct {
	sess   *session
	sst    sessionStore
	st     sessionRenewer
	clk    clock
	log    *slog.Logger
	onLost func(error)
}

// renew is keepAlive's renewal of l, into the session (which the renewal
// starts if it must: session.next); it returns errJoinedSession once l is
// a member.
func (j *sessionJoin) renew(ctx context.Context, l *Lease) error {
	id, start := j.sess.next()
	sent := j.clk.Now()
	err := j.st.renewThrough(ctx, l, id, start)
	sessionWritten(j.sess, id, start, sent, l.lastRenewedAt(), err)
	if err != nil {
		return err
	}
	l.setAnchor(latest(l.lastAnchor(), sent))
	leave, err := j.sess.admit(ctx, j.sst, l, id, j.onLost)
	if err != nil {
		j.log.Debug("the lease could not join the Scope's session; renewing it on its own", "err", err)
		return nil
	}
	l.leaveSession = leave
	return errJoinedSession
}

// sessionWritten tells session sess how a write that named session id
// and, with start, inserted its row, ended: committed at Spanner time at
// (zero: it wrote nothing), sent at local time sent, or failed with err.
// Only a failure whose outcome may be unknown retires the id (unstarted):
// one that surely committed nothing (aborted, refused) leaves it to the
// next write. A write that started nothing tells nothing.
func sessionWritten(sess *session, id string, start *sessionRow, sent, at time.Time, err error) {
	switch {
	case start == nil:
	case err != nil:
		if spanerr.UnknownOutcome(err) {
			sess.unstarted(id)
		}
	case !at.IsZero():
		sess.started(id, sent, at)
	}
}

// retryEnd retries, in the background, the end of a lease held through a
// session (an Unlock, a Release, the record of a section's end) that did
// not land: the session's renewals for the Scope's other leases would
// keep its row live for as long as the session lives, where a row renewed
// on its own lapses after a lease. It calls try a renewal interval (every,
// by clk) after the last, while live reports that the session may still
// keep the row live, until try reports that the end landed or found the
// lease lost; then after, if not nil.
func retryEnd(clk clock, every time.Duration, live func() bool, try func() (ended bool), after func()) {
	go func() {
		if after != nil {
			defer after()
		}
		for live() {
			c, _ := clk.NewTimer(every)
			<-c
			if try() {
				return
			}
		}
	}()
}

// keepHeldThrough starts what keeps granted lease alive and returns what
// stops it: its session, if it was granted through one; otherwise its own
// renewals through own (keepAlive), which move it into the Scope's
// session at the first of them, through join, if it may join one
// (sessionJoin; join nil: never). Either calls onLost once the lease is
// lost. Stopped with unreleased (its end did not land), a lease held
// through its session leaves it only once endLater's retry ends
// (retryEnd); otherwise it leaves at once.
func keepHeldThrough(cfg *config, lease *Lease, own renewer, join sessionRenewer, onLost func(error), endLater func(*Lease)) (stop func(unreleased bool)) {
	leave := func(unreleased bool) {
		switch {
		case lease.leaveSession == nil:
		case unreleased && lease.through != nil:
			endLater(lease)
		default:
			lease.leaveSession()
		}
	}
	if lease.leaveSession != nil {
		return leave // its session renews it
	}
	st := own
	if j := lease.join; j != nil && join != nil {
		j.st, j.clk, j.log = join, cfg.clock, cfg.logger
		j.onLost = cfg.tel.lost(lease, onLost)
		st = j
	}
	stopRenewals := keepAlive(st, cfg, lease, lease.anchor, onLost)
	return func(unreleased bool) {
		stopRenewals() // after it, leaveSession is set if a renewal joined
		leave(unreleased)
	}
}
