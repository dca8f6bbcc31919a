//go:build go1.25

package spanmutex

// The Semaphore and RWLock in the deterministic simulation. Processes of
// one to three contenders each acquire, hold and release permits of one
// semaphore (or read and write one RWLock) on a simulated Spanner that
// applies each read-write transaction atomically at its commit instant,
// in virtual time (testing/synctest). Every choice comes from the seed:
// the processes' clocks and latencies, faults (calls that fail before
// Spanner, aborted transactions, answers lost after the commit), pauses,
// crashes and restarts, cancelled ctxs. The invariants are checked after
// every step of the store and at every grant (doc/simulation.md, "The
// Semaphore").

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/stretchr/testify/assert"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/spanmutex/spanmutex/internal/testutil"
)

// semSimParams are a schedule's settings, drawn from its seed.
type semSimParams struct {
	procs      int
	size       int64
	rw         bool // an RWLock: readers take 1, writers rwPermits
	lease      time.Duration
	faultRate  float64
	pauses     bool
	crashes    bool
	cancelRate float64
	// calm: no faults or pauses (crashes and cancelled ctxs may happen):
	// the liveness invariant S6 is checked.
	calm bool
	// bound is how long after the chaos ends the contenders may still be
	// at work, at least: stuckBound raises it to what their cycles may take.
	bound time.Duration
}

func drawSemParams(r *rand.Rand) semSimParams {
	p := semSimParams{procs: 2 + r.IntN(4), size: 1 + r.Int64N(4), rw: r.IntN(3) == 0,
		lease: []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second}[r.IntN(3)], bound: 60 * time.Second}
	p.faultRate = []float64{0, 0, 0.02, 0.05, 0.15}[r.IntN(5)]
	p.pauses = r.IntN(2) == 0
	p.crashes = r.IntN(2) == 0
	p.cancelRate = []float64{0, 0.1, 0.3}[r.IntN(3)]
	if r.IntN(10) < 3 {
		p.calm, p.faultRate, p.pauses = true, 0, false
	}
	return p
}

// semSimRules break the simulated store on purpose, to show that the
// invariants catch what they claim to (TestSemSimCheckerCatches).
type semSimRules struct {
	// kind, if set, makes every schedule a "semaphore" or an "rwlock"
	// (SPANMUTEX_SIM_SEM_KIND), the draws staying as they were.
	kind      string
	overGrant bool // holders are hidden from the plan: permits granted twice
	barging   bool // waiters are hidden from a newcomer's plan: it overtakes them
	stale     bool // a waiter's read shows the past: a grant read after its entry lapsed
	// sessionBlind: a holder held through a session is judged by its own
	// RenewedAt and the session's lease, its session's renewals ignored:
	// its permits are counted free while its session keeps it.
	sessionBlind bool
}

// semSim runs one schedule and checks it.
type semSim struct {
	seed  uint64
	rules semSimRules
	par   semSimParams
	rng   *rand.Rand
	// sessRng draws which processes' Scopes hold through sessions (nil:
	// none): three in four, in half the schedules (a stream of its own,
	// as the Lock's: the schedules without sessions stay as they were).
	sessRng *rand.Rand
	start   time.Time

	mu sync.Mutex // the store and the harness
	// The store: the row and the queue.
	exists  bool
	size    int64
	token   int64
	entries []semEntry // as written: judged by their sessions when read (judgedLocked)
	last    time.Time
	// sessions holds the versions of each session's row (session.go).
	sessions map[string][]simSession
	past     []semView // every view after a write, for stale reads and entryAt
	// pastDropped: views older than past's first were dropped.
	pastDropped bool
	steps       int
	// The harness.
	holds  []*semHold
	tokens map[int64]bool
	// takenOver: the tokens whose holder's entry another contender
	// deleted as lapsed (inv S7).
	takenOver map[int64]bool
	// grantSize: the size each token was granted under (the operator
	// resizes: sim_sem_operator_test.go).
	grantSize map[int64]int64
	grants    int
	// viaSession counts the grants held through a session, joins the
	// leases that joined one at a renewal.
	viaSession, joins int
	violations        []string
	ring              []string
	procs             []*semProc
	running           sync.WaitGroup
	// inv S6: whose entry each waiter id is, and since when the first
	// waiter of a live process has been kept waiting by nothing but
	// crashed processes' entries (zero: it is not).
	idOf         map[string]*semProc
	stalledSince time.Time
	// stallNext is the next instant of the 50 ms grid inv S6 is checked at
	// (checkStallsLocked); zero: not checked.
	stallNext time.Time
	stallDead map[*semProc]bool
	// outages cut processes off from Spanner (sim_sem_operator_test.go).
	outages []semOutage
	// cycles counts the acquire-hold-release cycles of every contender
	// started (stuckBound).
	cycles int
	// sched orders the goroutines that wake at one instant
	// (sim_sched_test.go); nil in the scenarios.
	sched *simSched
	// full, if not nil, gets every event, stamped with its turn.
	full *[]string
}

// stuckBound is how long the contenders may take, after the chaos ends,
// before the schedule counts as stuck: the schedule's bound, or three
// leases for every cycle started (a hold of up to two leases and the
// wait after a failed acquisition, one after another), if longer.
func (h *semSim) stuckBound() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return max(h.par.bound, time.Duration(h.cycles)*3*h.par.lease)
}

// semHold is a lease a contender holds, from Acquire's return until it
// calls Release, its lease ends, or its process crashes.
type semHold struct {
	p     *semProc
	who   string
	lease *Lease
	n     int64
	ended bool
}

const semSimName = "sem"

func (h *semSim) eventLocked(who, format string, args ...any) {
	line := fmt.Sprintf("%10v %-6s %s", time.Since(h.start), who, fmt.Sprintf(format, args...))
	if h.full != nil {
		// Stamped with the scheduler's turn (sim_sched_test.go), as the
		// Lock's: simTraceHash compares each turn's events as a set.
		*h.full = append(*h.full, fmt.Sprintf("%6d %s", h.sched.turnNow(), line))
	}
	h.ring = append(h.ring, line)
	if len(h.ring) > 80 {
		h.ring = h.ring[1:]
	}
}

func (h *semSim) event(who, format string, args ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.eventLocked(who, format, args...)
}

func (h *semSim) violateLocked(format string, args ...any) {
	msg := fmt.Sprintf("seed %d: %s", h.seed, fmt.Sprintf(format, args...))
	h.eventLocked("CHECK", "VIOLATION %s", msg)
	if len(h.violations) == 0 {
		h.violations = append(h.violations, msg+"\n  trace:\n    "+strings.Join(h.ring, "\n    "))
		return
	}
	h.violations = append(h.violations, msg)
}

// --- the store ------------------------------------------------------------------

// commitTS returns the next commit timestamp: now, strictly after the last.
func (h *semSim) commitTS() time.Time {
	t := time.Now()
	if !t.After(h.last) {
		t = h.last.Add(time.Microsecond)
	}
	h.last = t
	return t
}

// viewLocked is what a read at Spanner time now shows: the entries judged
// by their sessions as of now, as semSQL joins them.
func (h *semSim) viewLocked(now time.Time) semView {
	entries := make([]semEntry, len(h.entries))
	for i, e := range h.entries {
		entries[i] = h.judgedLocked(e, now)
	}
	return semView{now: now, exists: h.exists, state: StateShared, size: h.size, token: h.token, entries: entries}
}

// judgedLocked returns entry e, as written, judged by its session as of
// Spanner time t (semEntry.withSession).
func (h *semSim) judgedLocked(e semEntry, t time.Time) semEntry {
	if e.session == "" {
		return e
	}
	vs := h.sessions[e.session]
	i, _ := slices.BinarySearchFunc(vs, t, func(v simSession, t time.Time) int {
		if v.ts.After(t) {
			return 1
		}
		return -1
	})
	switch {
	case i == 0:
		return e.withSession(time.Time{}, 0, false)
	case h.rules.sessionBlind && e.token != 0:
		return e.withSession(time.Time{}, vs[i-1].lease, true)
	}
	return e.withSession(vs[i-1].renewed, vs[i-1].lease, true)
}

// liveLocked reports whether entry e, as written, counts at Spanner time t
// (semEntryLive, judged by its session).
func (h *semSim) liveLocked(e semEntry, t time.Time) bool {
	return semEntryLive(h.judgedLocked(e, t), t, h.par.lease)
}

// applyLocked writes plan p at ts, as semMutations does on Spanner.
func (h *semSim) applyLocked(p semPlan, q semRequest, ts time.Time) {
	if !h.exists || q.resized {
		h.size = q.size
	}
	for _, d := range p.deletes {
		h.entries = slices.DeleteFunc(h.entries, func(e semEntry) bool { return e.key() == d.key() })
		if d.token != 0 && (d.id != q.me || q.op != semRelease && q.op != semLeave) {
			h.takenOver[d.token] = true
		}
	}
	for _, g := range p.grants {
		for i := range h.entries {
			if h.entries[i].key() == g.entry.key() {
				h.entries[i].token, h.entries[i].renewed = g.token, ts
				h.entries[i].holdThrough(g.session)
				h.grantSize[g.token] = h.size
			}
		}
	}
	if p.insert != nil {
		e := *p.insert
		e.at, e.renewed, e.throughSession = ts, ts, false
		h.entries = append(h.entries, e)
		if e.token != 0 {
			h.grantSize[e.token] = h.size
		}
	}
	h.exists, h.token = true, p.token
	h.past = append(h.past, h.viewLocked(ts))
	if len(h.past) > 64 {
		h.past, h.pastDropped = h.past[1:], true
	}
}

// checkStoreLocked checks the store after a step at ts that read v and
// wrote p: the permits of the granted entries never exceed the size after
// a step that grants (inv S1: a Resize below them keeps them granted, and
// grants nobody until they fit), tokens are unique and at most the row's (inv S3), no live waiter is
// left before a holder granted after it (inv S4, FIFO without barging),
// and no entry is granted while a holder of its Scope has lapsed (inv S6:
// a dead process's waiting entries go with its first lapsed holder, so it
// costs the waiters no more than a lease after that), save the entry of
// the contender that settles, me, whose process is alive.
func (h *semSim) checkStoreLocked(ts time.Time, v semView, p semPlan, me string) {
	var used int64
	seen := map[int64]bool{}
	for _, e := range h.entries {
		if e.token == 0 {
			continue
		}
		used += e.permits
		if seen[e.token] || e.token > h.token {
			h.violateLocked("inv S3: token %d granted twice or above the row's %d", e.token, h.token)
		}
		seen[e.token] = true
	}
	if used > h.size && (len(p.grants) > 0 || p.insert != nil && p.insert.token != 0) {
		h.violateLocked("inv S1: granted entries hold %d permits, size %d", used, h.size)
	}
	granted := map[queueKey]bool{}
	for _, g := range p.grants {
		granted[g.entry.key()] = true
		if scope := scopeOf(g.entry.id); scope != "" && g.entry.id != me && slices.ContainsFunc(v.entries, func(e semEntry) bool {
			return e.token != 0 && scopeOf(e.id) == scope && !semEntryLive(e, ts, h.par.lease)
		}) {
			h.violateLocked("inv S6: %s granted although a holder of its Scope had lapsed: its process may be dead", short(g.entry.id))
		}
	}
	if p.insert != nil && p.insert.token != 0 {
		granted[queueKey{at: ts.UTC(), id: p.insert.id}] = true
	}
	for i, e := range h.entries {
		if !granted[e.key()] {
			continue
		}
		for _, before := range h.entries[:i] {
			if before.token == 0 && h.liveLocked(before, ts) {
				h.violateLocked("inv S4: %s granted (token %d) past the live waiter %s", short(e.id), e.token, short(before.id))
			}
		}
	}
}

// checkHoldsLocked checks the contenders' holds at virtual time now: the
// leases whose holders' clocks still count them unlapsed hold at most the
// size (inv S2; for an RWLock, no reader beside a writer): the size the
// latest of them was granted under, when all of them were live in the
// store (a Resize since may have made it smaller or larger).
func (h *semSim) checkHoldsLocked() {
	var used int64
	var who []string
	size, latest := h.size, int64(0)
	for _, hd := range h.holds {
		if hd.valid() {
			used += hd.n
			who = append(who, fmt.Sprintf("%s(%d, token %d)", hd.who, hd.n, hd.lease.Token()))
			if t := hd.lease.Token(); t > latest {
				size, latest = h.grantSize[t], t
			}
		}
	}
	if used > size {
		h.violateLocked("inv S2: holders %s hold %d permits, size %d", strings.Join(who, ", "), used, size)
	}
}

// valid reports whether the holder still counts its lease as held: not
// ended, and unlapsed on its own clock.
func (hd *semHold) valid() bool {
	return !hd.ended && hd.p.Now().Sub(hd.lease.lastAnchor()) < hd.p.lease
}

// checkStallsLocked checks inv S6 at every instant of a 50 ms grid of
// virtual time up to now, from the first after the schedule's start until
// the contenders are done: a crashed process costs the live waiters at
// most one lease (plus a second of polls and latency) for each of its
// entries in the way, never its waiting entries' time to live. What it
// reads changes only at a step of the store or a crash, so each changes
// calls it first: every instant of the grid is checked on the state it
// had, as a goroutine ticking every 50 ms would, without a goroutine and
// its turns (sim_sched_test.go).
func (h *semSim) checkStallsLocked(now time.Time) {
	for !h.stallNext.IsZero() && !h.stallNext.After(now) {
		h.checkStallLocked(h.stallNext)
		h.stallNext = h.stallNext.Add(50 * time.Millisecond)
	}
}

// checkStallLocked walks the queue as the grant rule does, counting only
// live processes' holders: the first waiter of a live process is stalled
// if it would fit, the crashed processes' waiting entries before it
// fitting too (they are in the way). A crashed process's waiting entry
// that does not fit beside the live holders is waited for as a live one
// would be: no stall. Each crashed process in the way since the stall
// began may cost two leases and a second: its holders lapse a lease after
// their last renewal, and a waiting entry of it granted before that (the
// process looking alive) lapses a lease after its grant; later ones go
// with its first lapsed holder.
func (h *semSim) checkStallLocked(now time.Time) {
	var used int64
	dead := map[*semProc]bool{}
	for _, e := range h.entries {
		if p := h.idOf[e.id]; e.token != 0 && h.liveLocked(e, now) {
			if p != nil && !p.isCrashed() {
				used += e.permits
			} else {
				dead[p] = true
			}
		}
	}
	var head *semEntry
	for i, e := range h.entries {
		p := h.idOf[e.id]
		alive := p != nil && !p.isCrashed()
		switch {
		case e.token != 0 || !h.liveLocked(e, now):
			continue
		case used+e.permits > h.size:
			// Waited for as a live entry would be.
		case !alive:
			dead[p] = true
			continue
		default:
			head = &h.entries[i]
		}
		break
	}
	if head == nil {
		h.stalledSince, h.stallDead = time.Time{}, map[*semProc]bool{}
		return
	}
	if h.stalledSince.IsZero() {
		h.stalledSince = now
	}
	for p := range dead {
		h.stallDead[p] = true
	}
	bound := time.Duration(max(len(h.stallDead), 1)) * (2*h.par.lease + time.Second)
	if stalled := now.Sub(h.stalledSince); stalled > bound {
		h.violateLocked("inv S6: %s kept waiting %v by crashed processes' entries (bound %v)", short(head.id), stalled, bound)
		h.stalledSince = now
	}
}

// --- a process ------------------------------------------------------------------

// semProc is one incarnation of a process: a clock, a Scope, a connection
// to the simulated Spanner (it is the semStore), and its contenders.
type semProc struct {
	h       *semSim
	name    string
	slot    int // the process's slot (-1: the operator's)
	seed    uint64
	off     time.Duration
	rate    float64
	lease   time.Duration
	scope   *Scope
	ctx     context.Context
	kill    context.CancelFunc
	nextID  atomic.Int64
	simLife           // running, paused or crashed
	effort  semEffort // inv S8, under simLife's mu
}

var _ semStore = (*semProc)(nil)

func (p *semProc) draw(salt uint64) *rand.Rand {
	return rand.New(rand.NewPCG(p.seed^uint64(time.Now().UnixNano()), salt))
}

// Now is the process's clock: virtual time, offset, running rate times as
// fast (rate >= 1, assumption A5).
func (p *semProc) Now() time.Time {
	return p.h.start.Add(p.off + time.Duration(float64(time.Since(p.h.start))*p.rate))
}

// NewTimer fires after d of the process's clock, not while it is paused.
func (p *semProc) NewTimer(d time.Duration) (<-chan time.Time, func() bool) {
	return p.timer(p.name, d)
}

// semClock is a process's clock as one contender's Semaphore sees it: its
// timers' turns are keyed by the contender (who).
type semClock struct {
	p   *semProc
	who string
}

func (c semClock) Now() time.Time { return c.p.Now() }

func (c semClock) NewTimer(d time.Duration) (<-chan time.Time, func() bool) {
	return c.p.timer(c.who, d)
}

// fork returns the clock of another goroutine of the contender (its
// Scope's session): its timers take turns of their own (forkingClock).
func (c semClock) fork(who string) clock { return semClock{c.p, c.who + "/" + who} }

// turn waits for p's turn (sim_sched_test.go) to do what, keyed also by a
// and b, numbers p knew before it waited.
func (p *semProc) turn(what string, a, b int64) { p.h.sched.turn(simKey{p.name, what, a, b}) }

// timer is NewTimer for the contender who: it takes a turn as it fires.
func (p *semProc) timer(who string, d time.Duration) (<-chan time.Time, func() bool) {
	ch := make(chan time.Time, 1)
	var stopped atomic.Bool
	at := simNow()
	t := time.AfterFunc(time.Duration(float64(d)/p.rate)+1, func() {
		p.turn("timer "+who, at, int64(d))
		p.whenRunning(func() {
			if !stopped.Load() {
				ch <- p.Now()
			}
		})
	})
	return ch, func() bool { stopped.Store(true); return t.Stop() }
}

// flight is one network flight to or from Spanner, then turn k however
// it ended.
func (p *semProc) flight(ctx context.Context, k simKey) error {
	defer p.h.sched.turn(k)
	r := p.draw(drawLatency)
	d := min(200*time.Microsecond+time.Duration(r.ExpFloat64()*float64(1500*time.Microsecond)), 20*time.Millisecond)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctxError(ctx)
	case <-p.dead:
		return errSimCrashed
	}
}

func (p *semProc) pause(d time.Duration) {
	if !p.stop() {
		return
	}
	p.h.event(p.name, "PAUSED for %v", d)
	at := simNow()
	time.AfterFunc(d, func() {
		p.turn("unpause", at, int64(d))
		fns, ok := p.cont()
		if !ok {
			return
		}
		p.h.event(p.name, "resumed")
		runEachInTurn(p.h.sched, p.turn, fns, "resumed")
	})
}

// gateTurn is gate, then turn k if the gate waited for a pause to end.
func (p *semProc) gateTurn(k simKey) error {
	waited, err := p.gateWaited()
	if waited {
		p.h.sched.turn(k)
	}
	return err
}

func (p *semProc) crash() {
	p.h.mu.Lock()
	p.h.checkStallsLocked(time.Now())
	p.h.mu.Unlock()
	fns, ok := p.end()
	if !ok {
		return
	}
	// What waited for a pause to end runs now, each in a turn of its own:
	// a timer of the Scope's session, which waits for nothing else.
	runEachInTurn(p.h.sched, p.turn, fns, "crashed")
	h := p.h
	h.mu.Lock()
	for _, hd := range h.holds {
		if hd.p == p {
			hd.ended = true
		}
	}
	h.eventLocked(p.name, "CRASHED")
	h.mu.Unlock()
	p.kill()
}

// call runs one Spanner call: the request's flight, a fault drawn
// (drawSimFault, sim_fault_test.go), fn applied atomically at the commit
// instant, the answer's flight. It narrows and injects the fault its own
// way, not as spannerCall does, so that its schedules stay those its
// seeds name: an abort of a read fails it before Spanner, a read whose
// answer is lost answers all the same, and a lost answer is always
// Unavailable (no drawLost draw); nor are there partitions, answer
// pauses or forced faults.
//
// Its turns (sim_sched_test.go) are keyed by who calls (the contender
// whose Semaphore's store it is), its op and the instant it began.
func (p *semProc) call(ctx context.Context, who, op string, write bool, fn func(ts time.Time) error) error {
	start := simNow()
	key := func(what string) simKey { return simKey{p.name, who + " " + op + what, start, 0} }
	if err := p.gateTurn(key("/gate")); err != nil {
		return err
	}
	p.countCall()
	if err := p.flight(ctx, key("/apply")); err != nil {
		return err
	}
	if err := p.h.cutOff(p, time.Now(), write); err != nil {
		p.h.event(p.name, "%s: %v (outage)", op, err)
		return err
	}
	f := drawSimFault(p.draw, p.h.par.faultRate)
	switch {
	case f == faultBefore || f == faultAbort && !write:
		p.h.event(p.name, "%s: unavailable", op)
		return status.Error(codes.Unavailable, "sim: unavailable")
	case f == faultAbort:
		p.h.event(p.name, "%s: aborted", op)
		return status.Error(codes.Aborted, "sim: aborted")
	}
	h := p.h
	h.mu.Lock()
	if p.isCrashed() {
		h.mu.Unlock()
		return errSimCrashed
	}
	h.checkStallsLocked(time.Now())
	err := fn(h.commitTS())
	h.steps++
	h.checkHoldsLocked()
	h.mu.Unlock()
	if err := p.flight(ctx, key("/answer")); err != nil {
		return err
	}
	if err := p.gateTurn(key("/resumed")); err != nil {
		return err
	}
	if f == faultLost && write {
		h.event(p.name, "%s: answer lost (applied, err=%v)", op, err)
		return status.Error(codes.Unavailable, "sim: answer lost")
	}
	return err
}

// semConn is one contender's connection to the simulated Spanner (its
// Semaphore's semStore): its calls' turns are keyed by who.
type semConn struct {
	p   *semProc
	who string
}

var _ semStore = semConn{}

// The process as a store (the scenarios'): its calls keyed by its name.
func (p *semProc) conn() semConn { return semConn{p, p.name} }

func (p *semProc) look(ctx context.Context, name string) (semView, error) {
	return p.conn().look(ctx, name)
}

func (p *semProc) settle(ctx context.Context, name string, q semRequest) (semResult, error) {
	return p.conn().settle(ctx, name, q)
}

func (p *semProc) renewEntry(ctx context.Context, name string, key queueKey) (time.Time, error) {
	return p.conn().renewEntry(ctx, name, key)
}

func (p *semProc) entryAt(ctx context.Context, name string, key queueKey, at time.Time) (bool, time.Time, error) {
	return p.conn().entryAt(ctx, name, key, at)
}

func (p *semProc) renewEntryThrough(ctx context.Context, name string, key queueKey, id string, lease time.Duration, start *sessionRow) (time.Time, error) {
	return p.conn().renewEntryThrough(ctx, name, key, id, lease, start)
}

func (p *semProc) sessionStore(ctx context.Context) sessionStore { return p.conn().sessionStore(ctx) }

func (c semConn) look(ctx context.Context, name string) (semView, error) {
	p := c.p
	var v semView
	err := p.call(ctx, c.who, "look", false, func(ts time.Time) error {
		v = p.h.viewLocked(ts)
		if p.h.rules.stale && len(p.h.past) > 4 {
			v = p.h.past[len(p.h.past)-4]
		}
		return nil
	})
	return v, err
}

func (c semConn) settle(ctx context.Context, name string, q semRequest) (semResult, error) {
	p := c.p
	var res semResult
	err := p.call(ctx, c.who, "settle", true, func(ts time.Time) error {
		h := p.h
		v := h.viewLocked(ts)
		seen := v
		switch {
		case h.rules.overGrant:
			seen.entries = slices.DeleteFunc(slices.Clone(v.entries), func(e semEntry) bool { return e.token != 0 && e.id != q.me })
		case h.rules.barging && q.op == semAcquire:
			seen.entries = slices.DeleteFunc(slices.Clone(v.entries), func(e semEntry) bool { return e.token == 0 && e.id != q.me })
		}
		plan, err := planSem(name, seen, q)
		if err != nil {
			h.eventLocked(p.name, "settle %v: %v", q.op, err)
			return err
		}
		res = semResult{plan: plan, view: v}
		if !plan.writes {
			return nil
		}
		h.applyLocked(plan, q, ts)
		if plan.names(q.session) {
			h.startsSession(p.name, q.start, ts)
		}
		plan.stamp(ts)
		res.plan, res.at = plan, ts
		h.eventLocked(p.name, "settle %v by %s: %s", q.op, short(q.me), plan.describe())
		h.checkStoreLocked(ts, v, plan, q.me)
		return nil
	})
	return res, err
}

func (c semConn) renewEntry(ctx context.Context, name string, key queueKey) (time.Time, error) {
	return c.renewWith(ctx, name, key, "renew", func(*semEntry, time.Time) {})
}

// renewEntryThrough renews the entry and makes it name session id,
// declaring sessionHeldLease (or none, declaring lease), in one write,
// which inserts the session's row if it starts the session (start).
func (c semConn) renewEntryThrough(ctx context.Context, name string, key queueKey, id string, lease time.Duration, start *sessionRow) (time.Time, error) {
	return c.renewWith(ctx, name, key, "renewThrough", func(e *semEntry, ts time.Time) {
		c.p.h.startsSession(c.p.name, start, ts)
		if id != "" && e.lease != sessionHeldLease {
			c.p.h.joins++
		}
		e.session, e.lease = id, lease
		e.holdThrough(id)
		e.throughSession = false // as written: judged when read
		c.p.h.eventLocked(c.p.name, "renewThrough %s session %s", short(key.id), short(id))
	})
}

// renewWith is a blind renewal of the entry of key, which also applies
// set to it: ErrLeaseLost if the entry is gone.
func (c semConn) renewWith(ctx context.Context, name string, key queueKey, op string, set func(*semEntry, time.Time)) (time.Time, error) {
	p := c.p
	var at time.Time
	err := p.call(ctx, c.who, op, true, func(ts time.Time) error {
		for i := range p.h.entries {
			if p.h.entries[i].key() == key {
				p.h.entries[i].renewed, at = ts, ts
				set(&p.h.entries[i], ts)
				return nil
			}
		}
		return fmt.Errorf("%w: semaphore %q: the entry is gone", ErrLeaseLost, name)
	})
	if err != nil {
		return time.Time{}, err
	}
	return at, nil
}

var _ sessionStores = semConn{}

// sessionStore: the simulated table has sessions; whether a process's
// Scope uses them is the schedule's draw (WithSessions). The session's
// loop calls under a name of its own: its turns never tie with its
// contender's.
func (c semConn) sessionStore(context.Context) sessionStore {
	return semConn{c.p, c.who + "/session"}
}

// startsSession inserts, at commit timestamp ts, the row of the session
// a write of process who starts (start; nil: none), in the write's call
// (h.mu held).
func (h *semSim) startsSession(who string, start *sessionRow, ts time.Time) {
	if start != nil {
		h.sessions[start.id] = append(h.sessions[start.id], simSession{ts: ts, renewed: ts, lease: start.lease.Truncate(time.Microsecond)})
		h.eventLocked(who, "startSession %s", short(start.id))
	}
}

// renewSession is the session's blind update: a single-use commit that
// fails NotFound if the row is gone.
func (c semConn) renewSession(ctx context.Context, id string) (time.Time, error) {
	var at time.Time
	err := c.p.call(ctx, c.who, "renewSession", true, func(ts time.Time) error {
		vs := c.p.h.sessions[id]
		if len(vs) == 0 {
			return errSessionGone
		}
		c.p.h.sessions[id] = append(vs, simSession{ts: ts, renewed: ts, lease: vs[len(vs)-1].lease})
		c.p.h.eventLocked(c.p.name, "renewSession %s", short(id))
		at = ts
		return nil
	})
	if err != nil {
		return time.Time{}, err
	}
	return at, nil
}

// entryAt reads the queue now, or as the last write at or before at left
// it (h.past); a time before the oldest view kept is refused, as Spanner
// refuses a read older than its version retention.
func (c semConn) entryAt(ctx context.Context, name string, key queueKey, at time.Time) (present bool, readAt time.Time, err error) {
	p := c.p
	err = p.call(ctx, c.who, "entryAt", false, func(ts time.Time) error {
		h := p.h
		v := h.viewLocked(ts)
		readAt = ts
		if !at.IsZero() {
			i := slices.IndexFunc(h.past, func(v semView) bool { return v.now.After(at) })
			switch {
			case i == 0 && h.pastDropped:
				return status.Error(codes.FailedPrecondition, "sim: read timestamp older than the versions kept")
			case i == 0:
				v = semView{}
			case i > 0:
				v = h.past[i-1]
			}
			readAt = at
		}
		_, present = v.find(key)
		return nil
	})
	return present, readAt, err
}

// describe is a plan in a trace.
func (p semPlan) describe() string {
	var b strings.Builder
	for _, d := range p.deletes {
		fmt.Fprintf(&b, "-%s ", short(d.id))
	}
	for _, g := range p.grants {
		fmt.Fprintf(&b, "grant %s(%d)=%d ", short(g.entry.id), g.entry.permits, g.token)
	}
	if p.insert != nil {
		fmt.Fprintf(&b, "+%s(%d) token %d", short(p.insert.id), p.insert.permits, p.insert.token)
	}
	return b.String()
}

func (o semOp) String() string {
	return [...]string{"?", "acquire", "try", "release", "leave", "settle"}[o]
}

// --- the schedule -----------------------------------------------------------------

// bareProc starts a process without contenders, as a scenario's store.
func (h *semSim) bareProc(slot int) *semProc {
	p := &semProc{h: h, name: fmt.Sprintf("S%d", slot), slot: slot, seed: uint64(slot), simLife: newSimLife(), rate: 1, lease: h.par.lease}
	p.ctx, p.kill = context.WithCancel(context.Background())
	return p
}

// contender names contender i of p ("P1.0/c2"): its owner, and who its
// events and turns are.
func (p *semProc) contender(i int) string { return fmt.Sprintf("%s/c%d", p.name, i) }

func (h *semSim) newProc(slot, inc int) *semProc {
	name := fmt.Sprintf("P%d.%d", slot, inc)
	p := &semProc{h: h, name: name, slot: slot, seed: h.rng.Uint64(), simLife: newSimLife(), rate: 1, lease: h.par.lease,
		off: time.Duration(h.rng.Int64N(int64(2*time.Hour))) - time.Hour}
	p.rate = []float64{1, 1, 1, 1.001, 1.01}[h.rng.IntN(5)]
	p.ctx, p.kill = context.WithCancel(context.Background())
	p.scope = NewScope(WithoutWakeUps())
	if h.sessRng != nil && h.sessRng.IntN(4) != 0 {
		p.scope = NewScope(WithoutWakeUps(), WithSessions())
	}
	p.scope.id = fmt.Sprintf("p%di%02d-%06x", slot, inc, h.rng.IntN(1<<24))
	pid := slot*16 + inc
	p.scope.ids = func() string {
		id := fmt.Sprintf("%08x-%04x-7000-8000-000000000000", p.nextID.Add(1), pid)
		h.mu.Lock()
		h.idOf[id[:24]+p.scope.id] = p
		h.mu.Unlock()
		return id
	}
	h.mu.Lock()
	h.procs = append(h.procs, p)
	h.eventLocked(name, "started")
	h.mu.Unlock()
	contenders := 1 + h.rng.IntN(3)
	p.effort.bound = waitEffort*contenders + holdEffort
	for i := range contenders {
		s := h.newSemaphore(p, i, h.par.size)
		cycles := 2 + h.rng.IntN(4)
		h.mu.Lock()
		h.cycles += cycles
		h.mu.Unlock()
		r := rand.New(rand.NewPCG(h.rng.Uint64(), h.rng.Uint64()))
		h.running.Add(1)
		at := simNow()
		go func() {
			defer h.running.Done()
			p.turn("start "+p.contender(i), at, 0)
			p.contend(s, i, cycles, r)
		}()
	}
	return p
}

// newSemaphore is contender i of p's Semaphore, declaring size.
func (h *semSim) newSemaphore(p *semProc, i int, size int64) *Semaphore {
	who := p.contender(i)
	cfg, err := configure(semSimName, []LockOption{WithLease(p.lease), WithOwner(who), WithScope(p.scope),
		WithFinishTimeout(2 * time.Second), WithMaxFailures(8), WithBackOff(func() backoff.BackOff { return &semSimBackOff{p: p} })})
	if err != nil {
		panic(err)
	}
	cfg.clock = semClock{p, who}
	cfg.random = rand.New(rand.NewPCG(p.seed, uint64(1000+i))).Float64
	return &Semaphore{name: semSimName, size: size, cfg: cfg, store: semConn{p, who}}
}

// semSimBackOff is the default backoff's shape, drawn from the seed.
type semSimBackOff struct {
	p   *semProc
	cur time.Duration
}

func (b *semSimBackOff) Reset() { b.cur = 0 }

func (b *semSimBackOff) NextBackOff() time.Duration {
	if b.cur == 0 {
		b.cur = defaultInitialBackOff
	}
	d := time.Duration(float64(b.cur) * (0.5 + b.p.draw(drawBackOff).Float64()))
	b.cur = min(time.Duration(float64(b.cur)*1.6), defaultMaxBackOff)
	return d
}

// weight draws what a contender declaring size asks for: 1 to size
// permits, or for an RWLock a read (1) or, one time in three, a write
// (all).
func (h *semSim) weight(r *rand.Rand, size int64) int64 {
	if h.par.rw {
		if r.IntN(3) == 0 {
			return rwPermits
		}
		return 1
	}
	return 1 + r.Int64N(size)
}

// contend is contender i of p: it acquires, holds and releases, cycles
// times.
func (p *semProc) contend(s *Semaphore, i, cycles int, r *rand.Rand) {
	h := p.h
	who := p.contender(i)
	for range cycles {
		if p.isCrashed() {
			return
		}
		n, try := h.weight(r, s.size), r.IntN(5) == 0
		ctx, cancel := context.WithCancel(p.ctx)
		if r.Float64() < h.par.cancelRate {
			at, d := simNow(), time.Duration(r.Int64N(int64(3*p.lease)))
			t := time.AfterFunc(d, func() { p.turn("cancel "+who, at, int64(d)); cancel() })
			defer t.Stop()
		}
		h.event(who, "acquire %d (try %v)", n, try)
		acquire := s.Acquire
		if try {
			acquire = s.TryAcquire
		}
		lease, err := acquire(ctx, n)
		ended := ctx.Err() != nil
		if err != nil {
			cancel()
			h.event(who, "acquire: %s", errShort(err))
			s = h.redeploy(p, i, s, err)
			if p.sleep(time.Duration(r.Int64N(int64(p.lease))), "sleep "+who) != nil {
				return
			}
			continue
		}
		hd := h.granted(p, who, lease, n, ended)
		hold := time.Duration(r.Int64N(int64(2 * p.lease)))
		at := simNow()
		select {
		case <-time.After(hold):
		case <-lease.Done():
		case <-p.dead:
		}
		p.turn("hold "+who, at, int64(hold))
		h.mu.Lock()
		hd.ended = true
		h.mu.Unlock()
		err = s.Release(p.ctx)
		cancel()
		h.released(who, lease, err)
	}
}

// sleep waits d, or until the process crashes, then takes turn what.
func (p *semProc) sleep(d time.Duration, what string) error {
	at := simNow()
	defer p.turn(what, at, int64(d))
	select {
	case <-time.After(d):
		return nil
	case <-p.dead:
		return errSimCrashed
	}
}

// granted records a lease Acquire returned, and checks it: its ctx had not
// ended (inv S5), its token is new (inv S3), the store shows its entry
// granted with that token and unlapsed (inv S5: a read of the present), and
// the holds do not exceed the size (inv S2).
func (h *semSim) granted(p *semProc, who string, l *Lease, n int64, ctxEnded bool) *semHold {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.grants++
	hd := &semHold{p: p, who: who, lease: l, n: n}
	h.eventLocked(who, "GRANTED %d permits, token %d", n, l.Token())
	if ctxEnded {
		h.violateLocked("inv S5: %s got token %d after its ctx ended", who, l.Token())
	}
	if h.tokens[l.Token()] {
		h.violateLocked("inv S3: token %d granted twice", l.Token())
	}
	h.tokens[l.Token()] = true
	now := time.Now()
	i := slices.IndexFunc(h.entries, func(e semEntry) bool { return e.id == l.id && e.token == l.Token() })
	if i >= 0 && h.entries[i].session != "" && h.entries[i].lease == sessionHeldLease {
		h.viaSession++
	}
	if i < 0 || !h.liveLocked(h.entries[i], now) {
		h.violateLocked("inv S5: %s got token %d, which the store does not show granted and unlapsed", who, l.Token())
	}
	h.holds = append(h.holds, hd)
	h.checkHoldsLocked()
	return hd
}

// released records what Release of l returned, and checks it: nil only if
// l's entry was not deleted as lapsed by another contender (inv S7: a
// lease taken over is reported lost, as its section may have overlapped
// another holder's).
func (h *semSim) released(who string, l *Lease, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.eventLocked(who, "released token %d: %v", l.Token(), err)
	if err == nil && h.takenOver[l.Token()] {
		h.violateLocked("inv S7: %s's Release of token %d returned nil, but its entry was deleted as lapsed", who, l.Token())
	}
}

type semSimResult struct {
	seed       uint64
	rw         bool // the schedule ran an RWLock
	steps      int
	grants     int
	viaSession int // grants held through a session
	joins      int // leases that joined a session at a renewal
	turns      int // turns the scheduler let go (sim_sched_test.go)
	ties       int // turns whose key another pending turn had
	violations []string
}

// runSemSchedule runs schedule seed in a synctest bubble.
func runSemSchedule(t *testing.T, seed uint64, rules semSimRules) (res semSimResult) {
	return runSemScheduleTraced(t, seed, rules, nil)
}

// runSemScheduleTraced runs schedule seed, appending every event to full
// if it is not nil.
func runSemScheduleTraced(t *testing.T, seed uint64, rules semSimRules, full *[]string) (res semSimResult) {
	res.seed = seed
	defer func() {
		if e := recover(); e != nil {
			res.violations = append(res.violations, fmt.Sprintf("seed %d: the schedule panicked: %v", seed, e))
		}
	}()
	synctest.Test(t, func(t *testing.T) {
		h := &semSim{seed: seed, rules: rules, tokens: map[int64]bool{}, takenOver: map[int64]bool{}, grantSize: map[int64]int64{}, start: time.Now(), idOf: map[string]*semProc{}, stallDead: map[*semProc]bool{},
			full: full, sessions: map[string][]simSession{}}
		if s := rand.New(rand.NewPCG(seed, 0x5e5510)); s.IntN(2) == 0 {
			h.sessRng = s
		}
		h.sched = newSimSched(seed)
		defer h.sched.stop()
		h.rng = rand.New(rand.NewPCG(seed, 0x5e3a))
		h.par = drawSemParams(h.rng)
		switch rules.kind {
		case "semaphore":
			h.par.rw = false
		case "rwlock":
			h.par.rw = true
		}
		if h.par.rw {
			h.par.size = rwPermits
		}
		res.rw = h.par.rw
		h.eventLocked("sim", "params %+v", h.par)
		incs := make([]int, h.par.procs)
		h.drawOutages()
		for i := range h.par.procs {
			h.newProc(i, 0)
		}
		h.startOperator()
		done := make(chan struct{})
		stop := make(chan struct{})
		go func() { h.chaos(stop, incs); h.running.Wait(); close(done) }()
		if h.par.calm {
			h.mu.Lock()
			h.stallNext = h.start.Add(50 * time.Millisecond)
			h.mu.Unlock()
		}
		time.Sleep(h.par.bound / 3)
		h.sched.turn(simKey{"sim", "chaos ends", 0, 0})
		close(stop)
		bound := h.stuckBound()
		select {
		case <-done:
			h.sched.turn(simKey{"sim", "done", 0, 0})
			h.mu.Lock()
			h.checkStallsLocked(time.Now())
			h.stallNext = time.Time{} // the contenders are done
			h.mu.Unlock()
		case <-time.After(bound):
			h.sched.turn(simKey{"sim", "bound", 0, 0})
			h.mu.Lock()
			h.violateLocked("stuck: contenders still waiting %v after the chaos ended", bound)
			h.mu.Unlock()
		}
		h.mu.Lock()
		procs := slices.Clone(h.procs)
		h.mu.Unlock()
		for _, p := range procs {
			p.crash()
		}
		<-done
		h.mu.Lock()
		h.stallNext = time.Time{}
		h.mu.Unlock()
		time.Sleep(3 * h.par.lease)
		h.sched.turn(simKey{"sim", "end", 0, 0})
		res.turns, res.ties = h.sched.counts()
		h.mu.Lock()
		res.steps, res.grants, res.violations = h.steps, h.grants, h.violations
		res.viaSession, res.joins = h.viaSession, h.joins
		h.mu.Unlock()
	})
	return res
}

// chaos pauses, crashes and restarts processes until stop closes.
func (h *semSim) chaos(stop <-chan struct{}, incs []int) {
	for tick := int64(0); ; tick++ {
		select {
		case <-stop:
			return
		case <-time.After(time.Duration(h.rng.Int64N(int64(4 * h.par.lease)))):
		}
		h.sched.turn(simKey{"chaos", "tick", tick, 0})
		h.mu.Lock()
		slot := h.rng.IntN(h.par.procs)
		var p *semProc
		for _, q := range h.procs {
			if q.name == fmt.Sprintf("P%d.%d", slot, incs[slot]) {
				p = q
			}
		}
		h.mu.Unlock()
		switch x := h.rng.IntN(4); {
		case x < 2 && h.par.pauses:
			p.pause(time.Duration(h.rng.Int64N(int64(3 * h.par.lease))))
		case x == 2 && h.par.crashes:
			p.crash()
			incs[slot]++
			h.newProc(slot, incs[slot])
		}
	}
}

// TestSemSimulation runs seeded schedules of the Semaphore and RWLock
// (SPANMUTEX_SIM_SEM_SEEDS=A-B; default 3,000, 200,000 with
// SPANMUTEX_SOAK=1; SPANMUTEX_SIM_SEM_KIND=semaphore or rwlock makes them
// all one kind) and checks their invariants.
func TestSemSimulation(t *testing.T) {
	t.Parallel() // CPU-bound: it runs beside the tests that wait out leases
	// 3,000 by default: with sessions a schedule takes longer, and go test
	// ./... has 4 minutes; CI's soaks run 4 minutes of each kind.
	seeds := testutil.SeedRange(t, "SPANMUTEX_SIM_SEM", 3_000, 200_000)
	began := time.Now()
	st, failed := semSimRun(t, seeds, semSimRules{kind: os.Getenv("SPANMUTEX_SIM_SEM_KIND")})
	violations := 0
	for i, r := range failed {
		violations += len(r.violations)
		if i < 10 {
			replay := replayCommand("SPANMUTEX_SIM_SEM_TRACE", "TestSemSimTrace", r.seed)
			if k := os.Getenv("SPANMUTEX_SIM_SEM_KIND"); k != "" {
				replay = "SPANMUTEX_SIM_SEM_KIND=" + k + " " + replay
			}
			t.Errorf("%s\n  replay: %s", strings.Join(r.violations, "\n  "), replay)
		}
	}
	t.Logf("wall time %v", time.Since(began).Round(time.Millisecond))
	t.Logf("semaphore simulation: %d schedules (%d of a Semaphore, %d of an RWLock), %d steps, %d turns, %d grants (%d held through a session, %d leases joined one at a renewal), %d violations (seeds %s)",
		st.schedules.Load(), st.schedules.Load()-st.rw.Load(), st.rw.Load(), st.steps.Load(), st.turns.Load(), st.grants.Load(), st.viaSession.Load(), st.joins.Load(), violations, seeds.Covered(st.schedules.Load()))
}

// semSimStats counts what a run of schedules did.
type semSimStats struct {
	schedules, rw, steps, grants, turns, viaSession, joins atomic.Int64
}

// semSimRun runs the schedules of seeds first..last on two workers and
// returns what they did and the failing ones, in seed order.
func semSimRun(t *testing.T, seeds testutil.Seeds, rules semSimRules) (st *semSimStats, failed []semSimResult) {
	st = &semSimStats{}
	var (
		next atomic.Uint64
		mu   sync.Mutex
	)
	next.Store(seeds.First)
	inWorkers(max(2, runtime.GOMAXPROCS(0)), func() {
		for seed := next.Add(1) - 1; seeds.Runs(seed); seed = next.Add(1) - 1 {
			res := runSemSchedule(t, seed, rules)
			st.schedules.Add(1)
			st.steps.Add(int64(res.steps))
			st.grants.Add(int64(res.grants))
			st.viaSession.Add(int64(res.viaSession))
			st.joins.Add(int64(res.joins))
			st.turns.Add(int64(res.turns))
			if res.rw {
				st.rw.Add(1)
			}
			if len(res.violations) > 0 {
				mu.Lock()
				failed = append(failed, res)
				mu.Unlock()
			}
		}
	})
	slices.SortFunc(failed, func(a, b semSimResult) int { return cmp.Compare(a.seed, b.seed) })
	return st, failed
}

// The invariants catch a broken store: each rule breaks the grant rule one
// way, and the invariant named fails within the first 100 schedules.
func TestSemSimCheckerCatches(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		rules semSimRules
		inv   string
	}{
		{"permits granted twice", semSimRules{overGrant: true}, "inv S1"},
		{"a newcomer overtakes the queue", semSimRules{barging: true}, "inv S4"},
		{"reads show the past", semSimRules{stale: true}, "inv S5"},
		{"holders judged blind to their sessions' renewals", semSimRules{sessionBlind: true}, "inv S2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			// Ten schedules at a time, until one is caught: the checker
			// must catch the rule within 100.
			found, others := false, 0
			for first := uint64(1); first <= 100 && !found; first += 10 {
				_, failed := semSimRun(t, testutil.Seeds{First: first, Last: first + 9}, c.rules)
				for _, r := range failed {
					caught := strings.Contains(strings.Join(r.violations, "\n"), c.inv)
					found = found || caught
					if !caught {
						others++
					}
				}
			}
			assert.True(t, found, "%s not caught in 100 schedules (%d failed otherwise)", c.inv, others)
		})
	}
}

// semSimRegressions are schedules that once broke an invariant; they run
// every time.
var semSimRegressions = []struct {
	seed uint64
	why  string
}{
	// A crashed process's two waiting entries, which did not fit
	// together, were granted one after the other, each lapsing a lease
	// later: the process cost the live waiters two leases (inv S6). Fixed:
	// a lapsed holder's Scope's waiting entries are deleted with it.
	{58, "a crashed process's entries granted in turn cost two leases (inv S6)"},
	{115, "a crashed process's entries granted in turn cost two leases (inv S6)"},
	// Found by the first 200,000-schedule soak, a fault of the checker:
	// inv S6 counted as a stall the wait behind a crashed process's
	// waiting entry that did not fit beside a live holder, which a live
	// entry would have caused too. Fixed: the check walks the queue as the
	// grant rule does.
	{124782, "a crashed process's entry waited for behind a live holder counted as a stall (inv S6)"},
	{164192, "a crashed process's entry waited for behind a live holder counted as a stall (inv S6)"},
	// Found by the second soak, a fault of the checker's bound: a crashed
	// process's waiting entry granted before its holder lapsed (the
	// process looked alive) lapses a lease after its grant, so the process
	// may cost two leases. The bound is two leases per crashed process;
	// that no entry is granted once a holder of its Scope lapsed is checked
	// at every grant.
	{27810, "a crashed process's entry granted before its holder lapsed cost a second lease (inv S6's bound)"},
	{171643, "a crashed process's entry granted before its holder lapsed cost a second lease (inv S6's bound)"},
	// Issue 41, fault 6: a Release whose first settle failed took its
	// entry's absence for its own work, though a contender had deleted
	// it as lapsed (inv S7). Fixed: Release judges by Spanner's clock
	// (ownRelease). Seeds found again with exact replay and the operator
	// (the first ones, 473 and 590, no longer broke it with the fix put
	// back): 33 of seeds 1-4000 break S7 without the fix.
	{779, "a Release after a failed try returned nil for a lease taken over (inv S7)"},
	{792, "a Release after a failed try returned nil for a lease taken over (inv S7)"},
	{990, "a Release after a failed try returned nil for a lease taken over (inv S7)"},
	// Issue 41, fault 2, put back by hand once the operator resizes
	// (sim_sem_operator_test.go): a waiter asking for more permits than
	// the new size waited for ever, and its Scope's other contenders
	// behind it (stuck). Fixed: such a waiter is deleted by the next
	// transaction and ends with a *SizeMismatchError.
	{2, "a waiter asking for more than the resized size waited for ever (stuck)"},
	{28, "the same (stuck)"},
	{45, "the same (stuck)"},
	// Issue 41, fault 3, put back by hand once outages cut processes off
	// (sim_sem_operator_test.go): a waiter whose entry renewals were
	// denied, its reads served, renewed again at once, hundreds of times
	// a second (inv S8). Fixed: a failed renewal counts toward
	// WithMaxFailures and is backed off. 70 of seeds 1-3000 break S8
	// without the fix.
	// Issue 44, found by the first range with sessions (seeds 1-20000):
	// a lease held through its Scope's session whose Release did not land
	// (failed for the finish window, or denied) left its entry live for as
	// long as the session lived, kept by the other contenders of the
	// Scope, which waited behind it for ever (stuck). Fixed: the release
	// is retried in the background while the lease is a member
	// (releaseLater), and that retry ends within an interval of the
	// session's loss (a finish's window outlived the crashed process:
	// the bubble deadlocked).
	{3695, "a session kept alive an entry whose Release failed (stuck)"},
	{5076, "the same, its Release denied (stuck)"},
	{18922, "the background release outlived its crashed process (deadlock)"},
	{9, "a waiter retried its denied renewals without a pause (inv S8)"},
	{43, "the same (inv S8)"},
	{50, "the same (inv S8)"},
}

// TestSemSimRegressions replays the schedules that once failed, once
// each: a seed is one schedule (TestSemSimReplay).
func TestSemSimRegressions(t *testing.T) {
	for _, s := range semSimRegressions {
		if res := runSemSchedule(t, s.seed, semSimRules{}); len(res.violations) > 0 {
			t.Errorf("regression seed %d (%s) fails again:\n%s\n  replay: %s", s.seed, s.why, strings.Join(res.violations, "\n"),
				replayCommand("SPANMUTEX_SIM_SEM_TRACE", "TestSemSimTrace", s.seed))
		}
	}
}

// TestSemSimTrace prints the whole trace of the Semaphore's schedule
// SPANMUTEX_SIM_SEM_TRACE names, each event stamped with its turn
// (sim_sched_test.go), and fails with its violations.
func TestSemSimTrace(t *testing.T) {
	s := os.Getenv("SPANMUTEX_SIM_SEM_TRACE")
	if s == "" {
		t.Skip("set SPANMUTEX_SIM_SEM_TRACE=seed")
	}
	var seed uint64
	if _, err := fmt.Sscan(s, &seed); err != nil {
		t.Fatalf("SPANMUTEX_SIM_SEM_TRACE=%q: want a seed", s)
	}
	var full []string
	res := runSemScheduleTraced(t, seed, semSimRules{kind: os.Getenv("SPANMUTEX_SIM_SEM_KIND")}, &full)
	for _, l := range full {
		fmt.Println(l)
	}
	t.Logf("seed %d: %d steps, %d grants, %d turns (%d tied)", seed, res.steps, res.grants, res.turns, res.ties)
	for _, v := range res.violations {
		t.Error(v)
	}
}
