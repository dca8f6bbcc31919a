//go:build go1.25

package spanmutex

// The simulation's Spanner: an in-memory, multi-version store of lock rows
// and queue entries that implements lockStore's semantics (lock_store.go,
// store*.go, queue_entry.go) in Go, with commit timestamps, strong and
// exact-timestamp reads, and, per process (simConn), latency, aborts and
// commits whose answer is lost. Every read-write transaction is applied at
// one instant of virtual time, which is its commit timestamp: a valid
// serialisation, as Spanner's is. The rules come from the real pure
// functions (decideLock, holderLive, silentFor, holderLease,
// policy.takeoverAfter); see doc/simulation.md for what is not modelled.

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"cloud.google.com/go/spanner"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// simRules are deliberate defects of the simulated store, to show that the
// checker reports what they break (TestSimCheckerCatches). All false in the
// simulation proper.
type simRules struct {
	noFence   bool // unlock and renew do not check that the lease still holds
	noToken   bool // a new holder keeps the previous token
	takeEarly bool // a takeover needs only half the holder's lease of silence
	noLeave   bool // leave and dequeue delete no entry
	noHistory bool // an exact-timestamp read shows the row as it is now
	// slowClocks is no store defect: half the processes' clocks run 5 %
	// slow, which assumption A5 rules out.
	slowClocks bool
}

// simDB is the simulated Spanner database shared by every process of a
// schedule.
type simDB struct {
	mu         sync.Mutex
	h          *simHarness
	rules      simRules
	own        time.Duration // the readers' own lease, for rows and entries that declare none
	simClockTS               // the latest commit timestamp, and the reads and commits of now
	rows       map[string][]simVersion
	queue      map[string][]*simEntry // sorted by key
	steps      int
	// unlocked holds the lease ids whose unlock committed.
	unlocked map[string]bool
	// sessions holds the versions of each session's row (session.go).
	sessions map[string][]simSession
	// joins counts the renewals that moved a lease into a session;
	// keptBySession, the hand-offs to entries live only by their session.
	joins, keptBySession int
}

// simSession is a committed version of a session's row.
type simSession struct {
	ts      time.Time
	renewed time.Time
	lease   time.Duration
}

// simVersion is a committed version of a lock's row.
type simVersion struct {
	ts time.Time
	r  row
}

type simEntry struct {
	key      queueKey
	owner    string
	renewed  time.Time
	lease    time.Duration
	wakeAddr string
	session  string // the session of the waiter's Scope it names, if any
}

// simClockTS is Spanner's clock in the simulation: virtual time in
// microseconds, never before the latest commit. Call its methods with the
// database's lock held.
type simClockTS struct {
	last time.Time // the latest commit timestamp
}

// readTS is Spanner's clock for a read now.
func (c *simClockTS) readTS() time.Time {
	now := time.Now().Truncate(time.Microsecond)
	if now.Before(c.last) {
		return c.last
	}
	return now
}

// commitTS is the timestamp of a commit now, strictly after every earlier
// one.
func (c *simClockTS) commitTS() time.Time {
	ts := time.Now().Truncate(time.Microsecond)
	if !ts.After(c.last) {
		ts = c.last.Add(time.Microsecond)
	}
	c.last = ts
	return ts
}

func newSimDB(h *simHarness, own time.Duration) *simDB {
	return &simDB{h: h, own: own, rows: map[string][]simVersion{}, queue: map[string][]*simEntry{}, unlocked: map[string]bool{},
		sessions: map[string][]simSession{}}
}

// current returns the lock's row as of now, with Now set to now, judged
// by its session as of now (judged).
func (d *simDB) current(name string, now time.Time) row {
	r := d.raw(name)
	r.Now = now
	return d.judged(r, now)
}

// raw returns the lock's row as last written, Now unset, not judged by
// its session: what a write starts from.
func (d *simDB) raw(name string) row {
	vs := d.rows[name]
	if len(vs) == 0 {
		return row{}
	}
	return vs[len(vs)-1].r
}

// judged returns r, read at Spanner time t, judged by its session as of t
// (row.withSession), as the real store's reads join it.
func (d *simDB) judged(r row, t time.Time) row {
	if r.Session == "" {
		return r
	}
	s, ok := d.sessionAt(r.Session, t)
	return r.withSession(s.renewed, s.lease, ok)
}

// sessionAt returns session id's row as of Spanner time t, if it existed.
func (d *simDB) sessionAt(id string, t time.Time) (simSession, bool) {
	if id == "" {
		return simSession{}, false
	}
	return sessionAsOf(d.sessions[id], t)
}

// sessionAsOf returns, of a session's versions vs, the one as of Spanner
// time t, if there was one.
func sessionAsOf(vs []simSession, t time.Time) (simSession, bool) {
	i, _ := slices.BinarySearchFunc(vs, t, func(v simSession, t time.Time) int {
		if v.ts.After(t) {
			return 1
		}
		return -1
	})
	if i == 0 {
		return simSession{}, false
	}
	return vs[i-1], true
}

// entryRenewed is when entry e was last proved alive as of Spanner time t:
// its own renewal or its session's, whichever is later (takes).
func (d *simDB) entryRenewed(e *simEntry, t time.Time) time.Time {
	s, _ := d.sessionAt(e.session, t)
	return latest(e.renewed, s.renewed)
}

// writeSession writes a version of session id at commit timestamp ts.
func (d *simDB) writeSession(id string, ts time.Time, lease time.Duration) {
	d.sessions[id] = append(d.sessions[id], simSession{ts: ts, renewed: ts, lease: lease.Truncate(time.Microsecond)})
}

// at returns the lock's row as of Spanner time t.
func (d *simDB) at(name string, t time.Time) row {
	vs := d.rows[name]
	i, _ := slices.BinarySearchFunc(vs, t, func(v simVersion, t time.Time) int {
		if v.ts.After(t) {
			return 1
		}
		return -1
	})
	var r row
	if i > 0 {
		r = vs[i-1].r
	}
	r.Now = t
	return d.judged(r, t)
}

func (d *simDB) write(name string, ts time.Time, r row) {
	r.Now = time.Time{}
	prev := d.raw(name)
	d.rows[name] = append(d.rows[name], simVersion{ts: ts, r: r})
	d.h.rowWritten(ts, prev, r)
}

func keyLess(a, b queueKey) bool {
	return a.at.Before(b.at) || (a.at.Equal(b.at) && a.id < b.id)
}

func keyCmp(a, b queueKey) int {
	if c := a.at.Compare(b.at); c != 0 {
		return c
	}
	return cmp.Compare(a.id, b.id)
}

// entryLive reports whether e counts as a live waiter at Spanner time now
// for lock row r: renewed within waiterTTLFactor of its declared lease, and
// not of the Scope of a holder silent past its declared lease.
func (d *simDB) entryLive(e *simEntry, r row, now time.Time) bool {
	ttl := waiterTTLFactor * holderLease(row{Lease: e.lease}, d.own)
	if now.Sub(d.entryRenewed(e, now)) >= ttl {
		return false
	}
	r.Now = now
	if r.Exists && r.State == StateStarted && !holderLive(r, d.own) &&
		scopeOf(e.key.id) != "" && scopeOf(e.key.id) == scopeOf(r.LeaseID) {
		return false
	}
	return true
}

// view is the lock as contender me, queued under key, sees it at Spanner
// time now: the row, the live entries before key (me's own never count),
// and whether key is queued.
func (d *simDB) view(name string, key queueKey, me string, now time.Time) lockView {
	v := lockView{row: d.current(name, now)}
	for _, e := range d.queue[name] {
		if e.key == key {
			v.queued = true
			continue
		}
		if e.key.id != me && keyLess(e.key, key) && d.entryLive(e, v.row, now) && v.ahead < maxAhead {
			v.ahead++
		}
	}
	return v
}

// holder writes owner (lease id id, declaring lease, or holding through
// session) into the lock as holder with the next token, at commit
// timestamp ts (holderMutation).
func (d *simDB) holder(name string, prev row, owner, id string, lease time.Duration, session string, ts time.Time) row {
	token := prev.Token + 1
	if d.rules.noToken && prev.Token > 0 {
		token = prev.Token
	}
	if session != "" {
		lease = sessionHeldLease
	}
	r := row{Exists: true, State: StateStarted, Owner: owner, LeaseID: id, Token: token,
		StartedAt: ts, RenewedAt: ts, UpdatedAt: ts, Lease: lease.Truncate(time.Microsecond), Session: session}
	d.write(name, ts, r)
	return r
}

func (d *simDB) removeEntries(name string, match func(*simEntry) bool) {
	d.queue[name] = slices.DeleteFunc(d.queue[name], match)
}

func (d *simDB) insert(name string, e *simEntry) {
	q := d.queue[name]
	i, _ := slices.BinarySearchFunc(q, e.key, func(x *simEntry, k queueKey) int { return keyCmp(x.key, k) })
	d.queue[name] = slices.Insert(q, i, e)
}

// handOn hands the lock read as v (held by lease id from) to the first
// entry that takes it, deleting the entries it passes, or frees it, at
// commit timestamp ts. With bound, entries are judged as unlock judges
// them: by a lower bound of Spanner's clock (the latest commit timestamp
// read so far, page by page of handOffScan entries); otherwise by the
// transaction's clock.
func (d *simDB) handOn(name string, v row, from, skip string, ts time.Time, bound bool) handOff {
	q := d.queue[name]
	now := v.Now
	if bound {
		now = latest(v.StartedAt, v.RenewedAt, v.UpdatedAt)
	}
	for page := 0; page*handOffScan < len(q) && page < maxHandOffPages; page++ {
		end := min(len(q), (page+1)*handOffScan)
		if bound {
			for _, e := range q[page*handOffScan : end] {
				now = latest(now, e.key.at, d.entryRenewed(e, ts))
			}
		}
		for i := page * handOffScan; i < end; i++ {
			e := q[i]
			ttl := waiterTTLFactor * holderLease(row{Lease: e.lease}, d.own)
			if now.Sub(d.entryRenewed(e, ts)) < ttl && e.key.id != from && (skip == "" || scopeOf(e.key.id) != skip) {
				if now.Sub(e.renewed) >= ttl {
					d.keptBySession++
				}
				d.queue[name] = slices.Delete(q, 0, i+1)
				r := d.holder(name, v, e.owner, e.key.id, e.lease, "", ts)
				return handOff{owner: e.owner, waiterID: e.key.id, wakeAddr: e.wakeAddr, token: r.Token}
			}
		}
		if end == len(q) {
			break
		}
	}
	// Every entry passed is deleted (up to the pages read).
	n := min(len(q), maxHandOffPages*handOffScan)
	d.queue[name] = slices.Delete(q, 0, n)
	free := v
	free.State, free.UpdatedAt = StateNeeded, ts
	d.write(name, ts, free)
	return handOff{}
}

// --- a process's connection -------------------------------------------------

// simConn is one process's lockStore: every call goes through the process
// (paused: it waits; crashed: it fails and writes nothing) and its faults.
type simConn struct {
	db  *simDB
	p   *simProc
	who string // the contender whose Lock uses it ("": the process's)
}

var _ lockStore = (*simConn)(nil)

// call runs one Spanner call of c's process on its database
// (spannerCall, sim_fault_test.go). sent reports whether the request
// reached Spanner; aborts says whether the call may be aborted (a
// read-write transaction the client does not retry itself).
func (c *simConn) call(ctx context.Context, op string, write, aborts bool, fn func() error) (sent bool, err error) {
	return c.p.spannerCall(ctx, c.db, c.who, op, write, aborts, fn)
}

// track notes p's calls in flight for the limbo check (inv10).
func (d *simDB) track(p *simProc, delta int) { d.h.busy(p, delta) }

// forced: the Lock's schedules force no faults.
func (d *simDB) forced(*simProc, string) (simFault, bool) { return faultNone, false }

// lostAnswer: the Lock's simulation does not count lost answers.
func (d *simDB) lostAnswer() {}

// commit applies fn at the commit instant and checks the invariants.
func (d *simDB) commit(p *simProc, _ simFault, fn func() error) (applied bool, err error) {
	d.mu.Lock()
	if p.isCrashed() {
		d.mu.Unlock()
		return false, errSimCrashed
	}
	err = fn()
	d.steps++
	d.h.check(time.Now())
	d.mu.Unlock()
	return true, err
}

func (c *simConn) read(ctx context.Context, name string) (row, error) {
	var r row
	_, err := c.call(ctx, "read", false, false, func() error {
		r = c.db.current(name, c.db.readTS())
		c.p.h.event(c.p.name, "read: %s", simRow(r))
		return nil
	})
	c.sawRow(ctx, r, err)
	return r, err
}

// glance reads the row with the clock and a Queued mark that keeps the
// column's rule: FALSE only when the queue is empty, and, drawn from the
// seed, sometimes TRUE then too (waiters who left leave it TRUE).
func (c *simConn) glance(ctx context.Context, name string) (row, error) {
	var r row
	_, err := c.call(ctx, "glance", false, false, func() error {
		r = c.db.current(name, c.db.readTS())
		r.Queued = markQueued
		if len(c.db.queue[name]) == 0 && c.p.draw(drawMark).IntN(4) != 0 {
			r.Queued = markEmpty
		}
		c.p.h.event(c.p.name, "glance: %s queued %d", simRow(r), r.Queued)
		return nil
	})
	c.sawRow(ctx, r, err)
	return r, err
}

// simVersionRetention is how far back the simulated Spanner keeps a row's
// versions: like Spanner's default version_retention_period, it refuses
// an exact-timestamp read older than an hour (FailedPrecondition).
const simVersionRetention = time.Hour

// beyondRetention returns the error Spanner answers an exact-timestamp read
// of at with, read at now, if at is older than the version retention; nil
// otherwise.
func beyondRetention(now, at time.Time) error {
	if now.Sub(at) <= simVersionRetention {
		return nil
	}
	return spanner.ToSpannerError(status.Errorf(codes.FailedPrecondition,
		"Read-only transaction timestamp %v has exceeded the maximum timestamp staleness", at))
}

func (c *simConn) readAt(ctx context.Context, name string, at time.Time) (row, error) {
	// An exact-timestamp read of a time not yet safe waits for it.
	if wait := at.Sub(time.Now()); wait > 0 {
		if err := c.p.sleepTurn(ctx, wait, simKey{c.p.name, "readAt/wait", simNow(), int64(wait)}); err != nil {
			return row{}, err
		}
	}
	var r row
	_, err := c.call(ctx, "readAt", false, false, func() error {
		if err := beyondRetention(c.db.readTS(), at); err != nil {
			c.p.h.event(c.p.name, "readAt %s: refused, older than the version retention", c.p.h.ts(at))
			return err
		}
		r = c.db.at(name, at)
		if c.db.rules.noHistory {
			r = c.db.current(name, c.db.readTS())
		}
		c.p.h.event(c.p.name, "readAt %s: %s", c.p.h.ts(at), simRow(r))
		return nil
	})
	return r, err
}

func (c *simConn) readLock(ctx context.Context, name string, key queueKey) (lockView, error) {
	var v lockView
	_, err := c.call(ctx, "readLock", false, false, func() error {
		v = c.db.view(name, key, key.id, c.db.readTS())
		c.p.h.event(c.p.name, "readLock %s: %s ahead %d queued %v", short(key.id), simRow(v.row), v.ahead, v.queued)
		return nil
	})
	callOf(ctx, key.id)
	c.sawRow(ctx, v.row, err)
	return v, err
}

func (c *simConn) acquireLock(ctx context.Context, name string, key queueKey, p policy, cl claim, join bool) (acquireResult, error) {
	d := c.db
	var res acquireResult
	callOf(ctx, cl.leaseID)
	sent, err := c.call(ctx, "acquireLock", true, true, func() error {
		now := d.readTS()
		v := d.view(name, key, cl.leaseID, now)
		if key == endOfQueue && join && cl.wakeAddr != "" && v.State == StateStarted && v.Session == "" {
			// readByKey: a joiner woken by wake-ups reads the row by key and
			// judges its holder by a lower bound of the clock (the row's
			// latest commit timestamp); one that looks live so is queued
			// behind, its place not counted.
			r := v.row
			r.Now = r.lastWritten()
			if holderLive(r, d.own) {
				v = lockView{row: r, ahead: 1, uncounted: true}
			}
		}
		dec := decideLock(v, cl.leaseID, p)
		if d.rules.takeEarly && dec.action == lockWait && v.State == StateStarted && v.ahead == 0 &&
			silentFor(v.row) >= holderLease(v.row, d.own)/2 {
			dec = lockDecision{action: lockTakeOver}
		}
		res = acquireResult{decision: dec, key: endOfQueue}
		switch {
		case dec.action == lockAcquire || dec.action == lockTakeOver:
			ts := d.commitTS()
			if dec.action == lockTakeOver {
				// The silent holder's Scope went silent with it.
				if s := scopeOf(v.LeaseID); s != "" && s != scopeOf(cl.leaseID) {
					d.removeEntries(name, func(e *simEntry) bool { return scopeOf(e.key.id) == s })
				}
			}
			r := d.holder(name, v.row, cl.owner, cl.leaseID, p.lease, cl.session, ts)
			c.startsSession(cl.startSession, ts)
			if v.queued {
				d.removeEntries(name, func(e *simEntry) bool { return e.key == key })
			}
			lease := newLease(name, cl.owner, cl.leaseID, r.Token, dec.action == lockTakeOver, "sim")
			lease.acquiredAt, lease.session = ts, cl.session
			res.lease = lease
			c.p.h.event(c.p.name, "acquireLock %s: %s token %d (ahead %d)", short(cl.leaseID), simAction(dec.action), r.Token, v.ahead)
		case dec.action == lockPassOn && key != endOfQueue:
			// A silent holder's lock, handed to the first live waiter
			// before us; the holder's Scope went silent with it.
			ts := d.commitTS()
			skip := silentScope(v.row, cl.leaseID)
			if skip != "" {
				d.removeEntries(name, func(e *simEntry) bool { return scopeOf(e.key.id) == skip })
			}
			res.handed = d.handOn(name, v.row, v.LeaseID, skip, ts, false)
			res.handed.at = ts
			res.decision = dec
			c.p.h.event(c.p.name, "acquireLock %s: passed silent token %d on to %s token %d", short(cl.leaseID), v.Token, short(res.handed.waiterID), res.handed.token)
		case (dec.action == lockWait || dec.action == lockPassOn) && join && key == endOfQueue:
			res.decision = lockDecision{action: lockWait}
			ts := d.commitTS()
			d.insert(name, &simEntry{key: queueKey{at: ts, id: cl.leaseID}, owner: cl.owner, renewed: ts,
				lease: p.lease.Truncate(time.Microsecond), wakeAddr: cl.wakeAddr, session: cl.session})
			c.startsSession(cl.startSession, ts)
			res.key, res.view = queueKey{at: ts, id: cl.leaseID}, v
			c.p.h.event(c.p.name, "acquireLock %s: queued at %s (ahead %d, row %s)", short(cl.leaseID), c.p.h.ts(ts), v.ahead, simRow(v.row))
		default:
			c.p.h.event(c.p.name, "acquireLock %s: %s (row %s, ahead %d)", short(cl.leaseID), simAction(dec.action), simRow(v.row), v.ahead)
		}
		return nil
	})
	if err != nil {
		return acquireResult{sent: sent}, err
	}
	if res.lease != nil {
		c.p.h.saw(ctx, c.p, res.lease.id, res.lease.token, true)
	}
	c.p.h.saw(ctx, c.p, res.handed.waiterID, res.handed.token, false)
	return res, nil
}

// enqueue is a join's single-use commit (joinWrite), sent at least once:
// the client sends it again when Spanner answers UNAVAILABLE, also when an
// earlier send was applied and only its answer lost, which leaves a stray
// entry of ours under the earlier send's key. It gives up after
// simJoinSends sends, as the client does when its deadline passes.
func (c *simConn) enqueue(ctx context.Context, name string, entries []queueInsert) (time.Time, error) {
	var (
		ts  time.Time
		err error
	)
	for range simJoinSends {
		_, err = c.call(ctx, "enqueue", true, false, func() error {
			ts = c.db.commitTS()
			for _, e := range entries {
				c.db.insert(name, &simEntry{key: queueKey{at: ts, id: e.id}, owner: e.owner, renewed: ts,
					lease: e.lease.Truncate(time.Microsecond), wakeAddr: e.wakeAddr, session: e.session})
				c.p.h.event(c.p.name, "enqueue %s at %s", short(e.id), c.p.h.ts(ts))
			}
			for _, r := range startsSessions(entries) {
				c.startsSession(r, ts)
			}
			return nil
		})
		if status.Code(err) != codes.Unavailable || errors.Is(err, errSimCrashed) || ctx.Err() != nil {
			break
		}
		c.p.h.event(c.p.name, "enqueue: sent again")
	}
	if err != nil {
		return time.Time{}, err
	}
	return ts, nil
}

// simJoinSends is how many times the simulated client sends a join's
// commit at most.
const simJoinSends = 3

func (c *simConn) findQueued(ctx context.Context, name, waiterID string) (queueKey, bool, error) {
	var (
		k  queueKey
		ok bool
	)
	_, err := c.call(ctx, "findQueued", false, false, func() error {
		for _, e := range c.db.queue[name] {
			if e.key.id == waiterID {
				k, ok = e.key, true
				break
			}
		}
		return nil
	})
	return k, ok, err
}

func (c *simConn) renewWaiter(ctx context.Context, name string, key queueKey, session string) error {
	_, err := c.call(ctx, "renewWaiter", true, false, func() error {
		for _, e := range c.db.queue[name] {
			if e.key == key {
				e.renewed, e.session = c.db.commitTS(), session
				return nil
			}
		}
		return status.Error(codes.NotFound, "sim: row not found")
	})
	return err
}

func (c *simConn) leave(ctx context.Context, name, waiterID string) (handOff, error) {
	var to handOff
	_, err := c.call(ctx, "leave", true, false, func() error {
		d := c.db
		ts := d.commitTS()
		if !d.rules.noLeave {
			d.removeEntries(name, func(e *simEntry) bool { return e.key.id == waiterID })
		}
		v := d.current(name, ts)
		if v.heldBy(waiterID) {
			to = d.handOn(name, v, waiterID, "", ts, false)
			c.p.h.event(c.p.name, "leave %s: was handed token %d; handed on to %s token %d", short(waiterID), v.Token, short(to.waiterID), to.token)
		} else {
			c.p.h.event(c.p.name, "leave %s", short(waiterID))
		}
		to.at = ts
		return nil
	})
	if err != nil {
		c.p.h.givingBackFailed(c.p, waiterID)
		return handOff{}, err
	}
	c.p.h.saw(ctx, c.p, to.waiterID, to.token, false)
	return to, nil
}

func (c *simConn) dequeue(ctx context.Context, name string, key queueKey) error {
	_, err := c.call(ctx, "dequeue", true, false, func() error {
		c.db.commitTS()
		if !c.db.rules.noLeave {
			c.db.removeEntries(name, func(e *simEntry) bool { return e.key == key })
		}
		c.p.h.event(c.p.name, "dequeue %s", short(key.id))
		return nil
	})
	if err != nil {
		c.p.h.givingBackFailed(c.p, key.id)
	}
	return err
}

func (c *simConn) purgeWaiter(ctx context.Context, name, waiterID string) error {
	_, err := c.call(ctx, "purgeWaiter", true, false, func() error {
		c.db.commitTS()
		c.db.removeEntries(name, func(e *simEntry) bool { return e.key.id == waiterID })
		return nil
	})
	return err
}

func (c *simConn) unlock(ctx context.Context, l *Lease) (handOff, error) {
	var to handOff
	_, err := c.call(ctx, "unlock", true, false, func() error {
		d := c.db
		v := d.current(l.name, d.readTS())
		if !d.rules.noFence && (!v.heldBy(l.id) || v.Token != l.token) {
			c.p.h.event(c.p.name, "unlock token %d: lost (row %s)", l.token, simRow(v))
			return l.lostTo(v)
		}
		ts := d.commitTS()
		to = d.handOn(l.name, v, l.id, "", ts, true)
		if !l.queuedAt.IsZero() {
			d.removeEntries(l.name, func(e *simEntry) bool { return e.key == queueKey{at: l.queuedAt, id: l.id} })
		}
		d.unlocked[l.id] = true
		to.at = ts
		c.p.h.event(c.p.name, "unlock token %d: handed to %s token %d", l.token, short(to.waiterID), to.token)
		return nil
	})
	var lost *leaseLostError
	if errors.As(err, &lost) {
		return handOff{}, lost
	}
	if err != nil {
		return handOff{}, err
	}
	c.p.h.saw(ctx, c.p, to.waiterID, to.token, false)
	return to, nil
}

// sawRow notes a row that an answer showed to c's process.
func (c *simConn) sawRow(ctx context.Context, r row, err error) {
	if err == nil && r.State == StateStarted {
		c.p.h.saw(ctx, c.p, r.LeaseID, r.Token, true)
	}
}

func (c *simConn) renew(ctx context.Context, l *Lease) error {
	return c.renewRow(ctx, "renew", l, nil)
}

var _ sessionRenewer = (*simConn)(nil)

// renewThrough is renew that also makes the row name session id (and
// declare sessionHeldLease), or none (and the process's lease) with "",
// and inserts the session's row if it starts the session (start).
func (c *simConn) renewThrough(ctx context.Context, l *Lease, id string, start *sessionRow) error {
	return c.renewRow(ctx, "renewThrough", l, func(v *row, ts time.Time) {
		c.startsSession(start, ts)
		v.Session, v.Lease = id, c.p.lease.Truncate(time.Microsecond)
		if id != "" {
			v.Lease = sessionHeldLease
			c.db.joins++
		}
		c.p.h.event(c.p.name, "renewThrough token %d session %s at %s", l.token, short(id), c.p.h.ts(ts))
	})
}

// renewRow is a renewal of l's row, op, fenced on l: it sets RenewedAt to
// the commit timestamp ts, and what set (if not nil) sets.
func (c *simConn) renewRow(ctx context.Context, op string, l *Lease, set func(v *row, ts time.Time)) error {
	_, err := c.call(ctx, op, true, false, func() error {
		d := c.db
		v := d.raw(l.name)
		if !d.rules.noFence && (!v.heldBy(l.id) || v.Token != l.token) {
			c.p.h.event(c.p.name, "%s token %d: lost (row %s)", op, l.token, simRow(v))
			return l.lostTo(v)
		}
		ts := d.commitTS()
		v.RenewedAt = ts
		if set != nil {
			set(&v, ts)
		}
		d.write(l.name, ts, v)
		l.setRenewedAt(ts)
		return nil
	})
	var lost *leaseLostError
	if errors.As(err, &lost) {
		return lost
	}
	return err
}

var _ sessionStores = (*simConn)(nil)

// sessionStore: the simulated table has sessions; whether a process's
// Scope uses them is the harness's draw (WithSessions).
func (c *simConn) sessionStore(context.Context) sessionStore {
	// The session's loop calls under a name of its own: its turns never
	// tie with its contender's.
	return &simConn{db: c.db, p: c.p, who: c.who + "/session"}
}

// startsSession inserts, at commit timestamp ts, the row of the session
// a write starts (start; nil: none), in the write's call.
func (c *simConn) startsSession(start *sessionRow, ts time.Time) {
	if start != nil {
		c.db.writeSession(start.id, ts, start.lease)
		c.p.h.event(c.p.name, "startSession %s at %s", short(start.id), c.p.h.ts(ts))
	}
}

// renewSession is the session's blind update: a single-use commit that
// fails NotFound if the row is gone.
func (c *simConn) renewSession(ctx context.Context, id string) (time.Time, error) {
	var ts time.Time
	_, err := c.call(ctx, "renewSession", true, false, func() error {
		vs := c.db.sessions[id]
		if len(vs) == 0 {
			return errSessionGone
		}
		ts = c.db.commitTS()
		c.db.writeSession(id, ts, vs[len(vs)-1].lease)
		c.p.h.event(c.p.name, "renewSession %s at %s", short(id), c.p.h.ts(ts))
		return nil
	})
	if err != nil {
		return time.Time{}, err
	}
	return ts, nil
}
