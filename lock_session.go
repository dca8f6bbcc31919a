package spanmutex

import (
	"context"
	"errors"
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

// joinLater marks granted lease, if it is renewed on its own (handed over
// by an Unlock) and the waiter used the Scope's session, to move into the
// session at its first renewal (sessionJoin).
func (w *waiter) joinLater(lease *Lease) {
	if w.sess != nil && lease.leaveSession == nil {
		lease.join = &sessionJoin{sess: w.sess, sst: w.sst}
	}
}

// keepHeld starts what keeps granted lease alive and returns what stops
// it: its session, if it was granted through one; otherwise its own
// renewals (keepAlive), which move it into the Scope's session at the
// first of them if it may join one (sessionJoin). Stopped with unreleased
// (its Unlock did not land), a lease held through the session leaves it
// only once an unlock retried in the background lands (releaseLater): the
// session would keep its row live for as long as it lives, where a row
// renewed on its own lapses after a lease.
func (l *Lock) keepHeld(lease *Lease, ll *localLock) (stop func(unreleased bool)) {
	leave := func(unreleased bool) {
		switch {
		case lease.leaveSession == nil:
		case unreleased && lease.through != nil:
			go l.releaseLater(lease)
		default:
			lease.leaveSession()
		}
	}
	if lease.leaveSession != nil {
		return leave // its session renews it
	}
	var st renewer = l.store
	if j, sr := lease.join, asSessionRenewer(l.store); j != nil && sr != nil {
		j.st, j.clk, j.log = sr, l.cfg.clock, l.cfg.logger
		j.onLost = l.cfg.tel.lost(lease, l.lostHook(lease, ll))
		st = j
	}
	stopRenewals := keepAlive(st, &l.cfg, lease, lease.anchor, l.lostHook(lease, ll))
	return func(unreleased bool) {
		stopRenewals() // after it, leaveSession is set if a renewal joined
		leave(unreleased)
	}
}

// releaseLater unlocks lease, whose Unlock did not land, while it is a
// member of its session (whose renewals keep its row live): one try every
// renewal interval, each for the finish timeout, until one lands or finds
// the lock moved on, or the session is lost (the row then lapses with
// it); then the lease leaves the session.
func (l *Lock) releaseLater(lease *Lease) {
	defer lease.leaveSession()
	for lease.through.holds(lease) {
		c, _ := l.cfg.clock.NewTimer(l.cfg.renewEvery())
		<-c
		ctx, cancel := context.WithTimeout(context.Background(), l.cfg.finishTimeout)
		ll := l.scope.get(l.key)
		err := l.release(ctx, ll, lease)
		ll.release(lease.id, "")
		l.scope.put(ll)
		cancel()
		if err == nil || errors.Is(err, ErrLeaseLost) {
			l.cfg.logger.Debug("lock: an unlock retried in the background ended", "token", lease.token, "err", err)
			return
		}
	}
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
