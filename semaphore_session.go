package spanmutex

import (
	"context"
	"errors"
	"time"
)

// A Semaphore (and so an RWLock) of a Scope made WithSessions holds its
// permits through the Scope's session (scope_session.go), on a table that
// has sessions: permits granted by its own transaction (at once, or its
// waiting entry's) are held by an entry that names the session and
// declares sessionHeldLease, kept alive by the session's renewals and lost
// with it. Permits granted by another contender's Release are granted with
// the entry's own declared lease, as a Lock's hand-off is, and join the
// session at their first renewal (sessionJoin): a waiter gone, or a stray
// entry of a call that ended, then costs one lease, not the life of its
// Scope's session. A waiting entry names the session, whose renewals count
// as its own (semEntry.withSession): the waiter writes none of its own
// while the session lives.

// useSession makes the waiter's transactions name the Scope's session, if
// the Scope has sessions and the table can hold them; the returned done
// ends the use (a no-op without a session).
func (w *semWaiter) useSession(ctx context.Context) (done func()) {
	s := w.s
	if w.sess, w.sst = s.cfg.scope.sessionFor(ctx, s.store, s.db, &s.cfg); w.sess == nil {
		return func() {}
	}
	return w.sess.use()
}

// sessionNow sets the session the next transaction names: the live one,
// or one its write starts (session.next).
func (w *semWaiter) sessionNow() {
	if w.sess != nil {
		w.q.session, w.q.start = w.sess.next()
	}
}

// sessionWritten tells the session how a transaction that was to start
// it, sent at local time sent, ended: res.at is its commit timestamp if
// it wrote something naming the session.
func (w *semWaiter) sessionWritten(res semResult, sent time.Time, err error) {
	if w.q.start == nil {
		return
	}
	var at time.Time
	if err == nil && res.plan.names(w.q.session) {
		at = res.at
	}
	sessionWritten(w.sess, w.q.session, w.q.start, sent, at, err)
}

// admit is the grant rule's last step for permits held through a session
// (freshen's, for those renewed on their own): the lease joins the
// session, renewed first if it is a renewal interval old. A session lost
// since the entry was written gives errSessionChanged: the permits are
// given back, and the call waits again.
func (w *semWaiter) admit(ctx context.Context, lease *Lease) error {
	if w.sess == nil {
		return errSessionChanged
	}
	st, ok := w.s.store.(sessionStore) // the waiter's own calls, where it makes them itself
	if !ok {
		st = w.sst
	}
	leave, err := w.sess.admit(ctx, st, lease, lease.session, w.s.cfg.tel.lost(lease, w.s.lostHook(lease)))
	if err != nil {
		return err
	}
	lease.leaveSession = leave
	return nil
}

// joinLater marks granted lease, if it is renewed on its own (granted by
// another's Release) and the waiter used the Scope's session, to move
// into the session at its first renewal (sessionJoin).
func (w *semWaiter) joinLater(lease *Lease) {
	if w.sess != nil && lease.leaveSession == nil {
		lease.join = &sessionJoin{sess: w.sess, sst: w.sst}
	}
}

// sessionRenewed returns when our waiting entry was last proved alive, by
// the local clock: renewed, or the send time of the last acknowledged
// renewal of the session it names, if that is the Scope's live session
// (whose renewals count as the entry's). Once that session is lost, the
// entry is renewed on its own.
func (w *semWaiter) sessionRenewed(renewed time.Time) time.Time {
	if w.sess == nil || w.entrySession == "" {
		return renewed
	}
	if id, anchor := w.sess.live(); id == w.entrySession {
		return latest(renewed, anchor)
	}
	return renewed
}

// lostHook is what a held lease does when it is lost (its renewals, or
// its session's, found it gone or failed for its lease): unless our own
// Release is under way (it reports how it ended), the lease ends lost.
func (s *Semaphore) lostHook(lease *Lease) func(error) {
	return func(err error) {
		if !lease.unlocking.Load() {
			lease.lose(err)
		}
	}
}

// keepHeld starts what keeps granted lease alive (keepHeldThrough): a
// Release that did not land, on a lease held through the session, is
// retried in the background (releaseLater).
func (s *Semaphore) keepHeld(lease *Lease) (stop func(unreleased bool)) {
	return keepHeldThrough(&s.cfg, lease, semRenewer{s.store}, semJoinRenewer{st: s.store, lease: s.cfg.lease}, s.lostHook(lease), s.releaseLater)
}

// releaseLater releases lease, whose Release did not land, in the
// background (retryEnd) while it is a member of its session: one settle
// each time, whatever the failure (a write denied for a while is not
// retried by finish), until one lands or finds the entry gone (released by
// an earlier try, or lapsed); then the lease leaves the session. Each try
// is bounded by the finish timeout, so that the retries end within about
// a renewal interval of the session's loss.
func (s *Semaphore) releaseLater(lease *Lease) {
	q := semRequest{me: lease.id, op: semRelease, token: lease.token, size: s.size, lease: s.cfg.lease}
	retryEnd(s.cfg.clock, s.cfg.renewEvery(), func() bool { return lease.through.holds(lease) }, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.finishTimeout)
		res, err := s.store.settle(ctx, s.name, q)
		cancel()
		if err != nil && !errors.Is(err, ErrLeaseLost) {
			return false
		}
		s.cfg.logger.Debug("semaphore: a release retried in the background ended", "token", lease.token, "err", err)
		if err == nil {
			s.wake(context.Background(), res)
		}
		return true
	}, lease.leaveSession)
}

// semJoinRenewer renews a Semaphore's lease into a session (a
// sessionRenewer): its entry's renewal names the session and declares
// sessionHeldLease, in one blind write.
type semJoinRenewer struct {
	st    semStore
	lease time.Duration // declared when the renewal names no session
}

func (r semJoinRenewer) renewThrough(ctx context.Context, l *Lease, id string, start *sessionRow) error {
	ts, err := r.st.renewEntryThrough(ctx, l.name, queueKey{at: l.queuedAt, id: l.id}, id, r.lease, start)
	return entryRenewed(l, ts, err)
}

// readsSessions checks, outside any transaction, whether the table has
// sessions once a read of a store that does not read them found a holder
// declaring sessionHeldLease (sawSessionHeld): from then on its reads
// judge such holders by their sessions instead of by the century they
// declare. A store that never meets one costs nothing more.
func (s *spannerStore) readsSessions(ctx context.Context) {
	if s.sessionHeldSeen.Load() && !s.sessioned() {
		s.marks(ctx)
	}
}

// sawSessionHeld notes an entry e, as read and judged, that still
// declares sessionHeldLease: read without its session (readsSessions).
func (s *spannerStore) sawSessionHeld(e semEntry) {
	if e.lease == sessionHeldLease {
		s.sessionHeldSeen.Store(true)
	}
}
