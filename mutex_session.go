package spanmutex

import (
	"context"
	"errors"
	"sync"
	"time"
)

// A Mutex of a Scope made WithSessions runs its section through the
// Scope's session (scope_session.go): a Run that takes the row while it is
// free, or takes it over, names the session in the row (declaring
// sessionHeldLease), and its lease is a member of the session: renewed by
// the session's writes, never its own, and lost with the session. A
// Mutex without sessions, or on a table without them, renews its lease
// itself (keepAlive), as before.

// runSession is one Run call's use of its Scope's session. A nil
// *runSession stands for no session: its acquisitions name none and its
// leases renew themselves.
type runSession struct {
	m    *Mutex
	sess *session
	st   sessionStore
	// done ends the use under way (session.use), nil while there is none:
	// a Run uses the session from its first acquisition attempt until its
	// lease is granted, and not while it waits for another holder, so
	// that waiting costs the session no renewals.
	done func()
}

// session returns the Run's use of its Scope's session: nil unless the
// Scope was made WithSessions and the table has sessions (checked as the
// Lock's are: sessionStores).
func (m *Mutex) session(ctx context.Context) *runSession {
	sess, st := m.cfg.scope.sessionFor(ctx, m.store, m.database(), &m.cfg)
	if sess == nil {
		return nil
	}
	return &runSession{m: m, sess: sess, st: st}
}

// database is the name of the Mutex's database ("" for a store not on
// Spanner), which keys its Scope's sessions with the table and lease.
func (m *Mutex) database() string {
	if st, ok := m.store.(*spannerStore); ok {
		return st.client.DatabaseName()
	}
	return ""
}

// name returns the id of the session an acquisition about to be sent
// writes into the row, and the session's row if the acquisition starts
// the session (session.next), and begins a use of it unless one is under
// way. "" and nil without a session.
func (rs *runSession) name() (string, *sessionRow) {
	if rs == nil {
		return "", nil
	}
	if rs.done == nil {
		rs.done = rs.sess.use()
	}
	return rs.sess.next()
}

// written tells the session how acquisition c, sent at local time sent,
// ended: lease is what it took, naming the session, if it took the row.
func (rs *runSession) written(c claim, sent time.Time, lease *Lease, err error) {
	if rs == nil {
		return
	}
	var at time.Time
	if lease != nil {
		at = lease.acquiredAt
	}
	sessionWritten(rs.sess, c.session, c.startSession, sent, at, err)
}

// pause ends the use under way, if any: the Run waits, or has its lease.
func (rs *runSession) pause() {
	if rs != nil && rs.done != nil {
		rs.done()
		rs.done = nil
	}
}

// admit is the grant rule's last step (claim 11) for a lease whose row
// names a session: the lease joins the session, which is renewed first
// if its last acknowledged write is a renewal interval old (session.admit).
// Once a member, the lease is lost with the session: Done closes with an
// error matching ErrLeaseLost that names the session's loss. A lease
// written under a session since lost cannot be granted: errSessionChanged.
func (rs *runSession) admit(ctx context.Context, lease *Lease) error {
	if rs == nil {
		return errSessionChanged
	}
	octx, cancel := detached(ctx, rs.m.cfg.finishTimeout)
	defer cancel()
	// Its loss is counted (telemetry) by followSession, which runs once
	// the section holds it.
	leave, err := rs.sess.admit(octx, rs.st, lease, lease.session, lease.lose)
	if err != nil {
		return err
	}
	lease.leaveSession = leave
	return nil
}

// grantRule applies the grant rule to lease: through its session if its
// row names one (admit), else by renewing the row itself (freshen). A
// lease held through a session that cannot be admitted (the session was
// lost, or changed, since the row was written) is reported as
// errSessionChanged, transient: the caller gives it back and obtains the
// section again, under the live session.
func (m *Mutex) grantRule(ctx context.Context, rs *runSession, lease *Lease) error {
	if lease.session == "" {
		return freshen(ctx, m.store, &m.cfg, lease)
	}
	err := rs.admit(ctx, lease)
	if errors.Is(err, ErrLeaseLost) {
		return errSessionChanged // the session, not the row, was lost
	}
	return err
}

// followSession stands in for keepAlive for a lease held through its
// session: it renews nothing, and calls onLost with the lease's error
// (an error matching ErrLeaseLost) once the lease is lost with its
// session, even if that was before it was called. The returned stop ends
// the lease's membership; it waits for the goroutine it started, and may
// be called more than once.
func followSession(lease *Lease, onLost func(error)) (stop func()) {
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-lease.Done(): // before stop, Done closes only on a loss
			onLost(lease.Err())
		case <-quit:
		}
	}()
	return sync.OnceFunc(func() {
		lease.leaveSession()
		close(quit)
		wg.Wait()
	})
}
