package spanmutex

import (
	"context"
	"time"
)

// WithSessions makes a Scope keep the locks it holds alive through
// sessions (doc/design.md, section 5.3): one row per Scope (and per table,
// lease and renewal interval) in the sessions table, renewed once every
// third of the lease (or WithRenewInterval) with a single write, instead
// of one read-write transaction per held lock every third of its lease.
// A process's idle cost then no longer grows with the locks it holds;
// losing the session (renewals failing for a whole lease, or one that
// commits past it) loses every lease held through it, each signalled by
// Lease.Done.
//
// A Lock of the Scope holds through the session a lock it takes while
// free or takes over; a lock handed to it by another holder's Unlock joins
// the session at its first renewal. A waiting Lock call's queue entry
// names the session, whose renewals keep it live: the call writes no
// renewal of its own while it waits. An Election given the Scope
// (WithScope) holds its terms the same way: it is a Lock. A Semaphore or
// RWLock of the Scope does the same with its holders' and waiters' queue
// entries: permits its own transaction grants are held through the
// session, permits granted by another's Release join it at their first
// renewal. A Mutex of the Scope runs its section through the session when
// its Run takes the row, free or by takeover: the lease given to the
// section is lost with the session (Done closes with an error matching
// ErrLeaseLost, and the section's ctx is cancelled). The table needs the
// Session columns of the mutex table and its queue, and the sessions
// table (spanmutex ddl --upgrade adds them); where it has them not, the
// Scope's primitives hold and wait as without sessions.
//
// A row held through a session declares a lease of a century, so that a
// process of an older spanmutex, which does not read sessions, never takes
// it over; it waits for the holder's Unlock instead. Turn sessions on once
// every process that uses the table runs a spanmutex that reads them
// (doc/library.md, Sessions).
func WithSessions() ScopeOption {
	return func(s *Scope) { s.sessionsOn = true }
}

// sessionKey names one session of a Scope: its table, its lease and its
// renewal interval (the grant rule of a lease held through it goes by
// the session's interval, so a lease's own must be it).
type sessionKey struct {
	database, table string
	lease, interval time.Duration
}

// sessionFor returns the Scope's session for a primitive whose store is
// store (on database, or "" off Spanner) and whose config is cfg: keyed by
// the table, lease and renewal interval of cfg, made on first use, with
// the store of its table's sessions. It returns nil unless the Scope was
// made WithSessions and the table has sessions (sessionStores).
func (s *Scope) sessionFor(ctx context.Context, store any, database string, cfg *config) (*session, sessionStore) {
	ss, ok := store.(sessionStores)
	if s == nil || !s.sessionsOn || !ok {
		return nil, nil
	}
	st := ss.sessionStore(ctx)
	if st == nil {
		return nil, nil
	}
	k := sessionKey{database: database, table: cfg.table, lease: cfg.lease, interval: cfg.renewEvery()}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sessions == nil {
		s.sessions = map[sessionKey]*session{}
	}
	sess := s.sessions[k]
	if sess == nil {
		sess = newSession(st, cfg)
		if s.ids != nil {
			sess.newID = s.ids
		}
		s.sessions[k] = sess
	}
	return sess, st
}
