package spanmutex

import "context"

// A Lock of a Scope made WithSessions holds through the Scope's session
// (scope_session.go): a lock it takes while free, or takes over, names the
// session in its row and is kept alive by the session's renewals instead
// of its own. A lock handed to it by an Unlock is renewed on its own.

// useSession makes the waiter's acquisitions name the Scope's session, if
// the Scope has sessions and the table can hold them; the returned done
// ends the use (a no-op without a session).
func (w *waiter) useSession(ctx context.Context) (done func()) {
	l := w.lock
	ss, ok := l.store.(sessionStores)
	if !ok || !l.scope.sessionsOn {
		return func() {}
	}
	st := ss.sessionStore(ctx)
	if st == nil {
		return func() {}
	}
	w.sess, w.sst = l.scope.session(sessionKey{database: l.key.database, table: l.key.table, lease: l.cfg.lease, interval: l.cfg.renewEvery()}, st, &l.cfg), st
	return w.sess.use()
}

// sessionNow sets the session an acquisition about to be sent names: the
// live one, started if need be (one lost since the last acquisition is
// not named again). A session that cannot be started is logged, and the
// acquisition holds without one.
func (w *waiter) sessionNow(ctx context.Context) {
	if w.sess == nil {
		return
	}
	id, err := w.sess.current(ctx)
	if err != nil && ctx.Err() == nil { // ended: the call ends too, and says why
		w.lock.cfg.logger.Warn("lock: could not start the Scope's session; taking the lock without it", "err", err)
	}
	w.session = id
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
