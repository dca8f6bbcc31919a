package spanmutex

import (
	"context"
	"errors"
	"time"
)

// A Lock of a Scope made WithSessions holds through the Scope's session
// (scope_session.go): a lock it takes while free, or takes over, names the
// session in its row and is kept alive by the session's renewals instead
// of its own. A lock handed to it by an Unlock is renewed on its own until
// its first renewal, which moves it into the session (sessionJoin).

// useSession makes the waiter's acquisitions name the Scope's session, if
// the Scope has sessions and the table can hold them; the returned done
// ends the use (a no-op without a session).
func (w *waiter) useSession(ctx context.Context) (done func()) {
	l := w.lock
	if w.sess, w.sst = l.scope.sessionFor(ctx, l.store, l.key.database, &l.cfg); w.sess == nil {
		return func() {}
	}
	return w.sess.use()
}

// sessionNow sets the session an acquisition about to be sent names: the
// live one, or one the acquisition starts (session.next; one lost since
// the last acquisition is not named again).
func (w *waiter) sessionNow() {
	if w.sess != nil {
		w.session, w.startSession = w.sess.next()
	}
}

// sessionWritten tells the session how an attempt that was to start it,
// sent at local time sent, ended: with the lease it took, or the entry it
// queued, it wrote the session's id (acquireResult.wroteAt).
func (w *waiter) sessionWritten(res acquireResult, sent time.Time, err error) {
	sessionWritten(w.sess, w.session, w.startSession, sent, res.wroteAt(), err)
}

// admit is the grant rule's last step for a lease held through a session
// (freshen's, for one renewed on its own): the lease joins the session,
// renewed first if it is a renewal interval old. A session lost since the
// lease was written gives errSessionChanged: the lease is handed on.
func (w *waiter) admit(ctx context.Context, lease *Lease) error {
	if w.sess == nil {
		return errSessionChanged
	}
	st, ok := w.st.(sessionStore) // the waiter's own calls, where it makes them itself
	if !ok {
		st = w.sst
	}
	leave, err := w.sess.admit(ctx, st, lease, lease.session, w.lock.cfg.tel.lost(lease, w.lock.lostHook(lease, w.local)))
	if err != nil {
		return err
	}
	lease.leaveSession = leave
	return nil
}

// lostHook is what a held lease does when it is lost (its renewals, or
// its session's, found it taken over or failed for its lease): unless our
// own Unlock is under way (it reports how it ended), the lease ends lost,
// and the Scope's waiters no longer wait for this holder's Unlock.
func (l *Lock) lostHook(lease *Lease, ll *localLock) func(error) {
	return func(err error) {
		if !lease.unlocking.Load() {
			lease.lose(err)
			ll.release(lease.id, "")
		}
	}
}

// joinLater marks granted lease, if it is renewed on its own (handed over
// by an Unlock) and the waiter used the Scope's session, to move into the
// session at its first renewal (sessionJoin).
func (w *waiter) joinLater(lease *Lease) {
	if w.sess != nil && lease.leaveSession == nil {
		lease.join = &sessionJoin{sess: w.sess, sst: w.sst}
	}
}

// keepHeld starts what keeps granted lease alive (keepHeldThrough): an
// Unlock that did not land, on a lease held through the session, is
// retried in the background (releaseLater).
func (l *Lock) keepHeld(lease *Lease, ll *localLock) (stop func(unreleased bool)) {
	return keepHeldThrough(&l.cfg, lease, l.store, asSessionRenewer(l.store), l.lostHook(lease, ll), l.releaseLater)
}

// releaseLater unlocks lease, whose Unlock did not land, in the
// background (retryEnd) while it is a member of its session, each try for
// the finish timeout; then the lease leaves the session.
func (l *Lock) releaseLater(lease *Lease) {
	retryEnd(l.cfg.clock, l.cfg.renewEvery(), func() bool { return lease.through.holds(lease) }, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), l.cfg.finishTimeout)
		defer cancel()
		ll := l.scope.get(l.key)
		err := l.release(ctx, ll, lease)
		ll.release(lease.id, "")
		l.scope.put(ll)
		ended := err == nil || errors.Is(err, ErrLeaseLost)
		if ended {
			l.cfg.logger.Debug("lock: an unlock retried in the background ended", "token", lease.token, "err", err)
		}
		return ended
	}, lease.leaveSession)
}

// liveSession returns the id of the Scope's session if it has one live
// ("" otherwise, or without sessions); it starts none.
func (w *waiter) liveSession() string {
	if w.sess == nil {
		return ""
	}
	id, _ := w.sess.live()
	return id
}

// sessionRenews reports whether our entry names the Scope's live session,
// whose renewals count as the entry's (liveEntry, takes): then the entry
// needs no renewal of its own, and counts as renewed when the session's
// last acknowledged renewal was sent.
func (w *waiter) sessionRenews() bool {
	if w.sess == nil || w.entrySession == "" {
		return false
	}
	id, anchor := w.sess.live()
	if id != w.entrySession {
		return false
	}
	w.entryRenewed = latest(w.entryRenewed, anchor)
	return true
}
