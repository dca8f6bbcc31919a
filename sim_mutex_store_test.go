//go:build go1.25

package spanmutex

// The simulated Spanner of the run-once Mutex: one section's row, kept as
// every committed version, behind the mutexStore interface (mutex_store.go) with
// spannerStore's semantics. The row's NEEDED/STARTED/DONE/FAILED state
// machine is the real pure function decide, applied inside the read-write
// transaction on the transaction's clock; a new holder is written as
// holderMutation writes it (token+1, StartedAt = RenewedAt = UpdatedAt =
// the commit timestamp, the declared lease, the attempt count); finish,
// renew and interrupt are fenced as Lease.Guard fences (STARTED under the
// same lease id and token), with the recognition of an earlier try whose
// answer was lost that finish and interrupt do; release gives the row back
// NEEDED with one attempt fewer; an abandon records FAILED under the
// abandoner's claim id. Each read-write transaction is applied at one
// instant of virtual time, its commit timestamp. Calls go through the
// process (simProc: paused, crashed) and its faults, as the Lock's simConn
// does. See doc/simulation-mutex.md.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// simMutexName is the section every Run of a schedule runs; the
// scenarios' Mutexes (mutexScenarios) run sections of other names, each a
// row of its own that the checker does not follow.
const simMutexName = "simsection"

// simMutexRules are deliberate defects of the simulated store, to show
// that the checker reports what they break (TestSimMutexCheckerCatches).
// All false in the simulation proper.
type simMutexRules struct {
	noFence      bool // finish, renew and interrupt do not check that the lease still holds
	noToken      bool // a new holder keeps the previous token
	takeEarly    bool // a takeover needs only half the holder's lease of silence
	doneOnFail   bool // finish records DONE whatever state it was asked to record
	abandonEarly bool // a silent holder is abandoned (FAILED) whatever its attempt count
	forgetDone   bool // a DONE row reads (and is decided on) as NEEDED
	slowClocks   bool // odd process slots' clocks run 5% slow, breaking assumption A5 (not a store defect)
	lateTakeover bool // the store's clock runs half the holder's lease behind: takeovers come late
	resetLive    bool // Reset cuts a live holder off, as ForceReset does
	forceNoBump  bool // ForceReset keeps the token of the live holder it evicts
	// sessionUnread: a row held through a session is judged without its
	// session's renewals (by its own RenewedAt and the reader's lease)
	sessionUnread bool
}

// simMutexVersion is a committed version of the section's row.
type simMutexVersion struct {
	ts time.Time
	r  row
}

// simMutexDB is the simulated database of one schedule.
type simMutexDB struct {
	mu         sync.Mutex
	mh         *simMutexHarness
	rules      simMutexRules
	simClockTS // the latest commit timestamp, and the reads and commits of now
	// rows holds the committed versions of each section's row, by name.
	rows  map[string][]simMutexVersion
	steps int
	// counts counts the writes by kind, and the answers lost ("lost").
	counts map[string]int
	// losing is set while a call whose answer will be lost is applied;
	// lostIDs holds the lease ids of acquisitions applied so.
	losing  bool
	lostIDs map[string]bool
	// force, if set, replaces the fault drawn for a call of p's (a
	// scenario's script); it returns ok false to leave the draw.
	force func(p *simProc, op string) (f simFault, ok bool)
	// sessions holds the versions of each session's row
	// (sim_mutex_session_test.go).
	sessions map[string][]simSession
}

// current returns the row of section name as of now, with Now set to
// now; call with d.mu held.
func (d *simMutexDB) current(name string, now time.Time) row {
	var r row
	if vs := d.rows[name]; len(vs) > 0 {
		r = vs[len(vs)-1].r
	}
	r.Now = now
	return r
}

// write commits r, the row of section name, at ts, by op of lease l (nil:
// not a lease's write), over prev; the checker follows simMutexName's
// writes only. Call with d.mu held.
func (d *simMutexDB) write(name string, ts time.Time, op string, l *Lease, prev, r row) {
	r.Now = time.Time{}
	d.rows[name] = append(d.rows[name], simMutexVersion{ts: ts, r: r})
	kind := op
	switch {
	case op == "acquire" && prev.State == StateStarted:
		kind = "takeover"
	case op == "finish":
		kind = "finish " + string(r.State)
	}
	d.counts[kind]++
	if name == simMutexName {
		d.mh.rowWritten(ts, op, l, prev, r)
	}
}

// written reports whether some committed version of l's row had l's id
// and token, STARTED, and whether the version before it was STARTED too
// (the acquisition took over); call with d.mu held.
func (d *simMutexDB) written(l *Lease) (ok, tookOver bool) {
	vs := d.rows[l.name]
	for i, v := range vs {
		if v.r.State == StateStarted && v.r.LeaseID == l.id && v.r.Token == l.token {
			return true, i > 0 && vs[i-1].r.State == StateStarted
		}
	}
	return false, false
}

// forget is r as a store that forgets DONE reads it.
func (d *simMutexDB) forget(r row) row {
	if d.rules.forgetDone && r.State == StateDone {
		r.State = StateNeeded
	}
	return r
}

// skew is r as a store whose clock runs half the holder's lease ahead
// (or behind) reads it.
func (d *simMutexDB) skew(r row, own time.Duration) row {
	if d.rules.takeEarly && r.State == StateStarted {
		r.Now = r.Now.Add(holderLease(r, own) / 2)
	}
	if d.rules.lateTakeover && r.State == StateStarted {
		r.Now = r.Now.Add(-holderLease(r, own) / 2)
	}
	return r
}

// ever reports whether some committed version of the schedule's section
// (simMutexName) satisfies f; call with d.mu held.
func (d *simMutexDB) ever(f func(row) bool) bool {
	for _, v := range d.rows[simMutexName] {
		if f(v.r) {
			return true
		}
	}
	return false
}

// mrow formats a row for the trace.
type mrow row

func (r mrow) String() string {
	if !r.Exists {
		return "{none}"
	}
	v := ""
	if r.Version != "" {
		v = " " + r.Version
	}
	return fmt.Sprintf("{%s %v tok %d att %d%s}", r.State, simID(r.LeaseID), r.Token, r.Attempts, v)
}

// --- a process's connection ---------------------------------------------------

// simMutexConn is one process's store: every call goes through the process
// (paused: it waits; crashed: it fails and writes nothing) and its faults.
type simMutexConn struct {
	db *simMutexDB
	p  *simProc
	// who names the calls of the connection when their ctx names no Run
	// call ("": the process's): its session's loop's.
	who string
}

var _ mutexStore = (*simMutexConn)(nil)

// call runs one Spanner call of c's process on its database
// (spannerCall, sim_fault_test.go). A read-write transaction's abort is
// retried by the client (ReadWriteTransaction), so aborts are not drawn;
// what reaches the caller is a call that never reached Spanner
// (Unavailable) or a commit whose answer was lost (DeadlineExceeded or
// Unavailable: unknown outcome), or its ctx ending on the way there or
// back.
func (c *simMutexConn) call(ctx context.Context, op string, write bool, fn func() error) error {
	_, err := c.p.spannerCall(ctx, c.db, c.who, op, write, false, fn)
	return err
}

// track: the Mutex's simulation has no limbo check.
func (d *simMutexDB) track(*simProc, int) {}

// forced is the fault d.force puts on p's call op, if any.
func (d *simMutexDB) forced(p *simProc, op string) (simFault, bool) {
	if d.force == nil {
		return faultNone, false
	}
	d.mu.Lock()
	force := d.force
	d.mu.Unlock()
	return force(p, op)
}

// lostAnswer counts an answer lost ("lost").
func (d *simMutexDB) lostAnswer() {
	d.mu.Lock()
	d.counts["lost"]++
	d.mu.Unlock()
}

// commit applies fn at the commit instant, with d.losing set if its answer
// will be lost, and checks the invariants.
func (d *simMutexDB) commit(p *simProc, f simFault, fn func() error) (applied bool, err error) {
	d.mu.Lock()
	if p.isCrashed() {
		d.mu.Unlock()
		return false, errSimCrashed
	}
	d.losing = f == faultLost
	err = fn()
	d.losing = false
	d.steps++
	d.mh.check()
	d.mu.Unlock()
	return true, err
}

func (c *simMutexConn) checkSchema(ctx context.Context) error {
	return c.call(ctx, "checkSchema", false, func() error { return nil })
}

func (c *simMutexConn) read(ctx context.Context, name string) (row, error) {
	var r row
	err := c.call(ctx, "read", false, func() error {
		now := c.db.readTS()
		r = c.db.skew(c.db.forget(c.db.judged(c.db.current(name, now), now)), c.p.lease)
		c.p.h.event(c.p.name, "read: %v", mrow(r))
		return nil
	})
	if err != nil {
		return row{}, err
	}
	return r, nil
}

// readAt returns the row as of Spanner time at (an exact-timestamp read;
// the mutex's callers read only the past), refusing, as Spanner does, a
// time older than the version retention (beyondRetention).
func (c *simMutexConn) readAt(ctx context.Context, name string, at time.Time) (row, error) {
	var r row
	err := c.call(ctx, "readAt", false, func() error {
		if err := beyondRetention(c.db.readTS(), at); err != nil {
			c.p.h.event(c.p.name, "readAt %v: refused, older than the version retention", c.p.h.ts(at))
			return err
		}
		for _, v := range c.db.rows[name] {
			if v.ts.After(at) {
				break
			}
			r = v.r
		}
		r.Now = at
		c.p.h.event(c.p.name, "readAt %v: %v", c.p.h.ts(at), mrow(r))
		return nil
	})
	if err != nil {
		return row{}, err
	}
	return r, nil
}

// acquire decides on the row read at the transaction's time, judged by
// its session, with the real decide, and writes what that decides, as
// spannerStore.acquire does: a holder that names a session declares
// sessionHeldLease.
func (c *simMutexConn) acquire(ctx context.Context, name string, p policy, cl claim) (decision, *Lease, error) {
	d := c.db
	var (
		dec   decision
		lease *Lease
	)
	err := c.call(ctx, "acquire", true, func() error {
		now := d.readTS()
		r := d.current(name, now)
		judged := d.judged(r, now)
		dec = decide(d.skew(d.forget(judged), p.lease), p)
		if d.rules.abandonEarly && dec.action == actTakeOver {
			dec = decision{action: actAbandon}
		}
		if d.rules.takeEarly && dec.action == actWait && r.State == StateStarted &&
			silentFor(judged) >= holderLease(judged, p.lease)/2 {
			dec = decision{action: actTakeOver}
			if r.Attempts >= p.maxAttempts {
				dec = decision{action: actAbandon}
			}
		}
		switch dec.action {
		case actAcquire, actTakeOver:
			ts := d.commitTS()
			token := r.Token + 1
			if d.rules.noToken && r.Token > 0 {
				token = r.Token
			}
			attempts := r.Attempts + 1
			if dec.fresh {
				attempts = 1
			}
			// holderMutation: LastError and Version are kept, FinishedAt
			// cleared.
			w := r
			w.Exists, w.State, w.Owner, w.LeaseID, w.Token, w.Attempts = true, StateStarted, cl.owner, cl.leaseID, token, attempts
			w.StartedAt, w.RenewedAt, w.UpdatedAt, w.FinishedAt = ts, ts, ts, time.Time{}
			w.Lease, w.Session = p.lease.Truncate(time.Microsecond), cl.session
			if cl.session != "" {
				w.Lease = sessionHeldLease
			}
			c.startsSession(cl.startSession, ts)
			if p.version != "" {
				w.Version = p.version
			}
			lease = newLease(name, cl.owner, cl.leaseID, token, dec.action == actTakeOver, "sim")
			lease.acquiredAt, lease.session = ts, cl.session
			if d.losing {
				d.lostIDs[cl.leaseID] = true
			}
			d.write(name, ts, "acquire", lease, r, w)
			c.p.h.event(c.p.name, "acquire %v: %v token %d attempt %d (was %v)", simID(cl.leaseID), dec.action, token, attempts, mrow(r))
		case actAbandon:
			ts := d.commitTS()
			w := r
			w.State, w.LeaseID, w.FinishedAt, w.UpdatedAt = StateFailed, cl.leaseID, ts, ts
			w.LastError = fmt.Sprintf("abandoned: holder %q (token %d) went silent on attempt %d of %d", r.Owner, r.Token, r.Attempts, p.maxAttempts)
			d.write(name, ts, "abandon", nil, r, w)
			c.p.h.event(c.p.name, "acquire %v: abandon token %d attempt %d", simID(cl.leaseID), r.Token, r.Attempts)
		default:
			c.p.h.event(c.p.name, "acquire %v: %v (row %v)", simID(cl.leaseID), dec.action, mrow(r))
		}
		return nil
	})
	if err != nil {
		// dec is what the transaction decided if it reached Spanner (zero
		// otherwise): if its commit landed, it is what was written.
		return dec, nil, err
	}
	return dec, lease, nil
}

// guard is Lease.Guard on the row r: a *leaseLostError unless r is STARTED
// under l's id and token.
func (d *simMutexDB) guard(l *Lease, r row) *leaseLostError {
	if d.rules.noFence {
		return nil
	}
	if r.State == StateStarted && r.LeaseID == l.id && r.Token == l.token {
		return nil
	}
	lost := l.lostTo(r)
	if !r.Exists {
		lost.Reason = "the row was deleted"
	}
	if r.Token == l.token && r.LeaseID != l.id && r.State == StateFailed {
		lost.Reason = "another contender recorded the section FAILED as abandoned"
	}
	return lost
}

// fenced runs the fenced read-write transaction of op: write runs only
// while l holds the row; committed recognises an earlier try of op whose
// answer was lost (fencedUpdate).
func (c *simMutexConn) fenced(ctx context.Context, op string, l *Lease, committed func(*leaseLostError) bool, write func(r row, ts time.Time)) (time.Time, error) {
	d := c.db
	var ts time.Time
	err := c.call(ctx, op, true, func() error {
		r := d.current(l.name, d.readTS())
		if lost := d.guard(l, r); lost != nil {
			if committed != nil && committed(lost) {
				c.p.h.event(c.p.name, "%s token %d: found committed (row %v)", op, l.token, mrow(r))
				ts = d.commitTS()
				return nil
			}
			c.p.h.event(c.p.name, "%s token %d: lost (row %v)", op, l.token, mrow(r))
			return lost
		}
		ts = d.commitTS()
		write(r, ts)
		return nil
	})
	var lost *leaseLostError
	if errors.As(err, &lost) {
		return time.Time{}, lost
	}
	if err != nil {
		return time.Time{}, err
	}
	return ts, nil
}

func (c *simMutexConn) finish(ctx context.Context, l *Lease, to State, lastError string) error {
	_, err := c.fenced(ctx, "finish "+string(to), l, func(lost *leaseLostError) bool {
		return lost.CurrentState == to && lost.currentLeaseID == l.id
	}, func(r row, ts time.Time) {
		w := r
		w.State, w.LastError, w.FinishedAt, w.UpdatedAt = to, "", ts, ts
		if c.db.rules.doneOnFail {
			w.State = StateDone
		}
		if to == StateFailed {
			w.LastError = truncate(lastError, maxErrorText)
		}
		c.db.write(l.name, ts, "finish", l, r, w)
		c.p.h.event(c.p.name, "finish token %d: %s", l.token, to)
	})
	return err
}

func (c *simMutexConn) renew(ctx context.Context, l *Lease) error {
	ts, err := c.fenced(ctx, "renew", l, nil, func(r row, ts time.Time) {
		w := r
		w.RenewedAt = ts
		c.db.write(l.name, ts, "renew", l, r, w)
	})
	if err == nil {
		l.setRenewedAt(ts)
	}
	return err
}

func (c *simMutexConn) release(ctx context.Context, l *Lease) error {
	d := c.db
	return c.call(ctx, "release", true, func() error {
		r := d.current(l.name, d.readTS())
		if r.State != StateStarted || r.LeaseID != l.id {
			c.p.h.event(c.p.name, "release token %d: not ours (row %v)", l.token, mrow(r))
			return nil // no longer ours: nothing to give back
		}
		ts := d.commitTS()
		w := r
		w.State, w.Attempts, w.UpdatedAt = StateNeeded, max(r.Attempts-1, 0), ts
		d.write(l.name, ts, "release", l, r, w)
		c.p.h.event(c.p.name, "release token %d: NEEDED attempts %d", l.token, w.Attempts)
		return nil
	})
}

func (c *simMutexConn) interrupt(ctx context.Context, l *Lease, reason string) error {
	_, err := c.fenced(ctx, "interrupt", l, func(lost *leaseLostError) bool {
		return lost.CurrentState == StateNeeded && lost.currentLeaseID == l.id && lost.CurrentToken == l.token
	}, func(r row, ts time.Time) {
		w := r
		w.State, w.Attempts, w.LastError, w.FinishedAt, w.UpdatedAt = StateNeeded, max(r.Attempts-1, 0), truncate(reason, maxErrorText), ts, ts
		c.db.write(l.name, ts, "interrupt", l, r, w)
		c.p.h.event(c.p.name, "interrupt token %d: NEEDED attempts %d", l.token, w.Attempts)
	})
	return err
}

// reset re-arms the row as spannerStore.reset does: planReset on the row
// read at the transaction's time, written at its commit.
func (c *simMutexConn) reset(ctx context.Context, name string, lease time.Duration, leaseID string, force bool) (ResetResult, error) {
	d := c.db
	var res ResetResult
	err := c.call(ctx, "reset", true, func() error {
		now := d.readTS()
		raw := d.current(name, now)
		r := d.skew(d.forget(d.judged(raw, now)), lease)
		w, planned, err := planReset(name, r, lease, leaseID, force || d.rules.resetLive)
		if err != nil { // a *resetRefusedError
			c.p.h.event(c.p.name, "reset refused: %s", err.(*resetRefusedError).Reason)
			return err
		}
		res = planned
		w.RenewedAt, w.Lease = raw.RenewedAt, raw.Lease // as read, not as judged: the reset writes neither
		if d.rules.forceNoBump && planned.Forced {
			w.Token = r.Token
		}
		ts := d.commitTS()
		prev := d.current(name, ts)
		w.UpdatedAt = ts
		op := "reset"
		if force {
			op = "forcereset"
		}
		d.write(name, ts, op, nil, prev, w)
		c.p.h.event(c.p.name, "%s from %s: NEEDED token %d", strings.ToUpper(op), prev.State, w.Token)
		return nil
	})
	return res, err
}
