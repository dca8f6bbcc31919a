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
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// sessionScope returns a Scope for p made WithSessions, whose session ids
// come in the schedule's order, numbered for process pid.
func sessionScope(p *simProc, pid int) *Scope {
	s := NewScope(WithoutWakeUps(), WithSessions())
	s.ids = func() string {
		return fmt.Sprintf("%08x-%04x-7000-8000-000000000000", p.nextID.Add(1), pid)
	}
	return s
}

// judgeSession returns r, read at Spanner time t, judged by vs, the
// versions of the session it names (row.withSession), as of t: the real
// store's join, as the simulations apply it.
func judgeSession(vs []simSession, r row, t time.Time) row {
	if r.Session == "" {
		return r
	}
	v, ok := sessionAsOf(vs, t)
	return r.withSession(v.renewed, v.lease, ok)
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

// TestSimMutexScenarioSessionLapsesWhilePaused: P0 runs a long section
// (3 s, lease 500 ms) through its Scope's session, which renews it; no
// lease renews itself. P0 is paused at 0.7 s for 1.5 s, across the
// session's renewals: the session lapses while the process lives, and
// P1, waiting since 0.1 s without a session, takes the section over with
// token 2 once the session's last renewal is a lease old, and completes
// it. When P0 resumes, its session is lost, and with it the lease (Done,
// ErrLeaseLost naming the session) and the section's ctx; its finish is
// fenced. The checker's invariants hold throughout.
func TestSimMutexScenarioSessionLapsesWhilePaused(t *testing.T) {
	var (
		violations, full []string
		runs             []*simMutexRun
		counts           map[string]int
	)
	synctest.Test(t, func(t *testing.T) {
		mh := newMutexHarness(1)
		mh.par = simMutexParams{procs: 2, lease: 500 * time.Millisecond, maxAttempts: 3, finish: 2 * time.Second, bound: time.Minute}
		mh.maxWM = mh.par.lease
		mh.host(simMutexRules{}, nil, &full)
		h := mh.h
		p0, p1 := mh.newProcess(0, 0), mh.newProcess(1, 0)
		id := p0.scope.id
		p0.scope = sessionScope(p0, 0)
		p0.scope.id = id
		m0, m1 := mh.newMutex(p0, ""), mh.newMutex(p1, "")
		r0, r1 := &simMutexRun{p: p0, who: "P0/r0"}, &simMutexRun{p: p1, who: "P1/r0"}
		done := make(chan struct{}, 2)
		go func() { mh.scriptedRun(m0, r0, 3*time.Second, nil); done <- struct{}{} }()
		time.Sleep(100 * time.Millisecond)
		go func() { mh.scriptedRun(m1, r1, 0, nil); done <- struct{}{} }()
		time.Sleep(600 * time.Millisecond)
		p0.pause(1500 * time.Millisecond)
		<-done
		<-done
		p0.crash()
		p1.crash()
		time.Sleep(2*mh.maxWM + mh.par.finish + detachGrace)
		h.mu.Lock()
		violations, runs = h.violations, mh.runs
		h.mu.Unlock()
		mh.db.mu.Lock()
		counts = mh.db.counts
		mh.db.mu.Unlock()
	})
	trace := strings.Join(full, "\n    ")
	if len(violations) > 0 {
		t.Fatalf("%s\n  trace:\n    %s", strings.Join(violations, "\n  "), trace)
	}
	var r0, r1 *simMutexRun
	for _, r := range runs {
		switch r.who {
		case "P0/r0":
			r0 = r
		case "P1/r0":
			r1 = r
		}
	}
	if r0 == nil || r1 == nil || r0.section == nil || r1.section == nil {
		t.Fatalf("the script did not run as planned:\n    %s", trace)
	}
	l0, l1 := r0.section.lease, r1.section.lease
	var lost *leaseLostError
	switch {
	case l0.session == "":
		t.Errorf("P0's section was not held through its session")
	case !errors.As(l0.Err(), &lost) || !strings.Contains(lost.Reason, "its session was lost"):
		t.Errorf("P0's lease: %v, want lost with its session", l0.Err())
	case !errors.Is(r0.err, ErrLeaseLost) || r0.out != Executed:
		t.Errorf("P0's Run returned %v, %v: want Executed, its finish fenced (ErrLeaseLost)", r0.out, r0.err)
	case !l1.TookOver() || l1.Token() != l0.Token()+1 || r1.out != Executed || r1.err != nil:
		t.Errorf("P1: token %d (took over %v), Run returned %v, %v: want token %d taken over, Executed", l1.Token(), l1.TookOver(), r1.out, r1.err, l0.Token()+1)
	case counts["renewSession"] == 0 || counts["renew"] != 0:
		t.Errorf("%d session renewals, %d lease renewals: want the session's only", counts["renewSession"], counts["renew"])
	}
	if t.Failed() {
		t.Logf("trace:\n    %s", trace)
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

// startsSession inserts, at commit timestamp ts, the row of the session
// a write starts (start; nil: none), in the write's call.
func (c *simMutexConn) startsSession(start *sessionRow, ts time.Time) {
	if start != nil {
		c.db.writeSession(start.id, ts, start.lease)
		c.db.counts["startSession"]++
		c.p.h.event(c.p.name, "startSession %s at %s", short(start.id), c.p.h.ts(ts))
	}
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
