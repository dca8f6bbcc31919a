package spanmutex

import (
	"context"
	"errors"
	"log/slog"
)

// What a primitive needs to hold through its Scope's session beside
// session.go and session_store.go: the move of a lease renewed on its own
// into the session at its first renewal (sessionJoin), which the Lock and
// the Semaphore share.

// sessionRenewer renews a held lease through a session: a Lock's store
// whose table has sessions, or a Semaphore's (semJoinRenewer).
type sessionRenewer interface {
	// renewThrough renews l, fenced as renew is, and makes its row name
	// session id with sessionHeldLease as its lease; with id "", it names
	// none and declares the lease l was granted with.
	renewThrough(ctx context.Context, l *Lease, id string) error
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
// the century a holder through a session declares, in the same write, so the hand-off costs what it did and the lease costs
// nothing of its own from then on. The grant rule's check (admit) follows
// the renewal; a lease the session cannot admit (lost meanwhile) stays
// renewed on its own, its row kept live by this renewal, and the next
// renewal names the session live then. A session that cannot be started
// leaves the lease renewed on its own.
type sessionJoin struct {
	sess   *session
	sst    sessionStore
	st     sessionRenewer
	clk    clock
	log    *slog.Logger
	onLost func(error)
}

// renew is keepAlive's renewal of l: into the session if it is live, or
// can be started; it returns errJoinedSession once l is a member.
func (j *sessionJoin) renew(ctx context.Context, l *Lease) error {
	id, err := j.sess.current(ctx)
	if err != nil && ctx.Err() == nil {
		j.log.Warn("could not start the Scope's session; renewing the lease on its own", "err", err)
	}
	sent := j.clk.Now()
	if err := j.st.renewThrough(ctx, l, id); err != nil || id == "" {
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
