//go:build go1.25

package spanmutex

// Sessions in the simulation of the run-once Mutex: in some schedules
// (stream 0x5e5510, as the Lock's), most processes' Scopes are made
// WithSessions, and their Mutexes run their sections through the Scope's
// session (mutex_session.go). The simulated database keeps every version
// of each session's row, and every read that decides on the section's row
// judges it by its session as of the read's time, as the real store's
// reads join it (readIn, readSQL).

import (
	"context"
	"slices"
	"time"
)

// judgeSession returns r, read at Spanner time t, judged by vs, the
// versions of the session it names (row.withSession), as of t: the real
// store's join, as the simulations apply it.
func judgeSession(vs []simSession, r row, t time.Time) row {
	if r.Session == "" {
		return r
	}
	i, _ := slices.BinarySearchFunc(vs, t, func(v simSession, t time.Time) int {
		if v.ts.After(t) {
			return 1
		}
		return -1
	})
	if i == 0 {
		return r.withSession(time.Time{}, 0, false)
	}
	return r.withSession(vs[i-1].renewed, vs[i-1].lease, true)
}

// judged returns r, read at Spanner time t, judged by its session as of t;
// call with d.mu held.
func (d *simMutexDB) judged(r row, t time.Time) row {
	if d.rules.sessionUnread {
		return judgeSession(nil, r, t)
	}
	return judgeSession(d.sessions[r.Session], r, t)
}

// writeSession writes a version of session id at commit timestamp ts;
// call with d.mu held.
func (d *simMutexDB) writeSession(id string, ts time.Time, lease time.Duration) {
	d.sessions[id] = append(d.sessions[id], simSession{ts: ts, renewed: ts, lease: lease.Truncate(time.Microsecond)})
}

// sessionsLeft checks, once every Run call has returned, that no session
// keeps a lease as its member (inv8: it would be renewed for ever).
func (mh *simMutexHarness) sessionsLeft() {
	h := mh.h
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, p := range h.procs {
		p.scope.mu.Lock()
		for _, s := range p.scope.sessions {
			s.mu.Lock()
			if n := len(s.members); n > 0 {
				h.violateLocked("inv8: %s's session %s keeps %d leases after every Run call returned", p.name, short(s.id), n)
			}
			s.mu.Unlock()
		}
		p.scope.mu.Unlock()
	}
}

var _ sessionStores = (*simMutexConn)(nil)

// sessionStore: the simulated table has sessions; whether a process's
// Scope uses them is the harness's draw (WithSessions).
func (c *simMutexConn) sessionStore(context.Context) sessionStore {
	// The session's loop calls under a name of its own: its turns never
	// tie with a Run call's.
	return &simMutexConn{db: c.db, p: c.p, who: "session"}
}

// startSession is the session's blind insert: a single-use commit.
func (c *simMutexConn) startSession(ctx context.Context, id, _ string, lease time.Duration) (time.Time, error) {
	var ts time.Time
	err := c.call(ctx, "startSession", true, func() error {
		ts = c.db.commitTS()
		c.db.writeSession(id, ts, lease)
		c.db.counts["startSession"]++
		c.p.h.event(c.p.name, "startSession %s at %s", short(id), c.p.h.ts(ts))
		return nil
	})
	if err != nil {
		return time.Time{}, err
	}
	return ts, nil
}

// renewSession is the session's blind update: a single-use commit that
// fails NotFound if the row is gone.
func (c *simMutexConn) renewSession(ctx context.Context, id string) (time.Time, error) {
	var ts time.Time
	err := c.call(ctx, "renewSession", true, func() error {
		vs := c.db.sessions[id]
		if len(vs) == 0 {
			return errSessionGone
		}
		ts = c.db.commitTS()
		c.db.writeSession(id, ts, vs[len(vs)-1].lease)
		c.db.counts["renewSession"]++
		c.p.h.event(c.p.name, "renewSession %s at %s", short(id), c.p.h.ts(ts))
		return nil
	})
	if err != nil {
		return time.Time{}, err
	}
	return ts, nil
}
