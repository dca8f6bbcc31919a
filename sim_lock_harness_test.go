//go:build go1.25

package spanmutex

// The simulation's processes, clocks, network, checker and schedules. One
// schedule (a seed) runs the real Lock code of a few processes against the
// simulated Spanner (sim_lock_store_test.go) inside a testing/synctest bubble,
// where time is virtual. See doc/simulation.md.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/spanmutex/spanmutex/internal/pace"
)

// simName is the lock every contender of a schedule contends for.
const simName = "simlock"

// --- events ------------------------------------------------------------------

// simEvent is one line of a schedule's trace, formatted only if printed.
type simEvent struct {
	at     time.Duration
	who    string
	format string
	args   []any
}

// simTraceLen is how many events a failing schedule's trace shows.
const simTraceLen = 40

type simTS time.Duration // a Spanner or virtual time, as the offset from the schedule's start

func (t simTS) String() string { return time.Duration(t).String() }

type simID string // a waiter or lease id, shortened when printed

func (id simID) String() string {
	if len(id) != 36 {
		return string(id)
	}
	return strings.TrimLeft(string(id[:8]), "0") + "@" + string(id[24:29])
}

func short(id string) simID { return simID(id) }

type simRow row

func (r simRow) String() string {
	if !r.Exists {
		return "{none}"
	}
	return fmt.Sprintf("{%s %s tok %d renewed %v}", r.State, simID(r.LeaseID), r.Token, r.RenewedAt.Format("05.000000"))
}

type simAction lockAction

func (a simAction) String() string {
	switch lockAction(a) {
	case lockAcquire:
		return "acquire"
	case lockTakeOver:
		return "take over"
	case lockHeld:
		return "held"
	case lockWait:
		return "wait"
	case lockPassOn:
		return "pass on"
	case lockWrongKind:
		return "wrong kind"
	}
	return "?"
}

// --- the harness ----------------------------------------------------------------

// simParams are a schedule's settings, drawn from its seed.
type simParams struct {
	procs      int
	lease      time.Duration
	jitter     float64
	faultRate  float64 // probability that a call fails somehow
	pauses     bool
	crashes    bool
	forgeries  bool
	lossRate   float64 // datagrams
	dupRate    float64
	lateRate   float64
	cancelRate float64 // of Lock calls whose ctx is cancelled at a random point
	// calm: no faults or pauses (crashes and cancelled ctxs may happen):
	// the liveness (inv5) and cleanliness (inv8) invariants are checked.
	calm   bool
	finish time.Duration
	bound  time.Duration // virtual time for the contenders
}

// simHarness runs one schedule and checks it.
type simHarness struct {
	seed  uint64
	rules simRules
	par   simParams
	rng   *rand.Rand // the schedule's own draws (the root and chaos goroutines)
	drift *rand.Rand // the clocks' rates (nil: all true)
	mixed *rand.Rand // the processes' leases (nil: all par.lease)
	// sessions draws which processes' Scopes hold through sessions (nil:
	// none): three in four, so that some schedules mix processes with and
	// without.
	sessions *rand.Rand
	parts    *rand.Rand // partitions (nil: none)
	// answerPauses: processes also pause just as a Spanner answer arrives.
	answerPauses bool
	// chaosOver turns true halfway through the schedule's bound: from
	// then on no call fails, no process pauses, crashes or is cut off
	// anew, and datagrams arrive once and on time, so that liveness after
	// chaos can be checked (inv5 from calmFrom on).
	chaosOver atomic.Bool
	calmFrom  time.Time     // under mu: when inv5 starts to apply (zero: not yet)
	maxWM     time.Duration // the longest lease of any process
	start     time.Time
	db        *simDB
	// sched orders the goroutines that wake at one instant
	// (sim_sched_test.go); nil in scripted schedules.
	sched *simSched

	mu         sync.Mutex
	ring       [simTraceLen]simEvent
	nEvents    int
	holds      []*simHold
	lastToken  map[string]int64
	violations []string
	trace      []string  // the trace at the first violation
	full       *[]string // if set, every event (simTrace)
	procs      []*simProc
	slots      []*simProc // the current incarnation of each process slot
	running    sync.WaitGroup
	grants     int

	// inv5, in calm schedules: the lock is stalled (free, or held by a
	// crashed process) since stalledSince (zero: it is not), and waiting
	// counts the Lock calls under way in processes that have not crashed.
	stalled    bool
	holderProc *simProc // the process of the row's holder, nil if free
	waiting    int
	idleSince  time.Time // stalled with a Lock call waiting since (zero: not)
	scopes     map[string]*simProc
	stallDead  map[string]bool        // the Scopes of the crashed processes in the way of the current stall
	limbo      map[limboKey]*simLimbo // inv10: the leases not yet granted or ended
	givingBack map[string]string      // inv10: the waiters a give-back of which failed
}

// simHold is a lease a contender holds, from its Lock's return until its
// Unlock call, Done closing, its process's crash, or the lease lapsing on
// the holder's clock.
type simHold struct {
	p     *simProc
	who   string
	lease *Lease
	wm    time.Duration
	ended bool
}

func (h *simHarness) ts(t time.Time) simTS { return simTS(t.Sub(h.start)) }

// event records a trace line.
func (h *simHarness) event(who, format string, args ...any) {
	h.mu.Lock()
	h.eventLocked(who, format, args...)
	h.mu.Unlock()
}

// eventLocked records a trace line; call with h.mu held.
func (h *simHarness) eventLocked(who, format string, args ...any) {
	h.ring[h.nEvents%simTraceLen] = simEvent{at: time.Since(h.start), who: who, format: format, args: args}
	h.nEvents++
	if h.full != nil {
		// Stamped with the scheduler's turn (sim_sched_test.go): the
		// events of one turn may be logged in any order (TestSimReplay).
		*h.full = append(*h.full, fmt.Sprintf("%6d %12v %-6s %s", h.sched.turnNow(), time.Since(h.start), who, fmt.Sprintf(format, args...)))
	}
}

// traceLocked returns the last events; call with h.mu held.
func (h *simHarness) traceLocked() []string {
	var out []string
	n := min(h.nEvents, simTraceLen)
	for i := h.nEvents - n; i < h.nEvents; i++ {
		e := h.ring[i%simTraceLen]
		out = append(out, fmt.Sprintf("%12v %-6s %s", e.at, e.who, fmt.Sprintf(e.format, e.args...)))
	}
	return out
}

// violate records a broken invariant; call with h.mu held.
func (h *simHarness) violateLocked(format string, args ...any) {
	msg := fmt.Sprintf("seed %d at %v: ", h.seed, time.Since(h.start)) + fmt.Sprintf(format, args...)
	h.violations = append(h.violations, msg)
	h.eventLocked("CHECK", "%s", msg)
	if h.trace == nil {
		h.trace = h.traceLocked()
	}
}

// lapsed reports whether hold's lease has lapsed on its holder's clock.
func (hd *simHold) lapsed() bool {
	return hd.p.clk.Now().Sub(hd.lease.lastAnchor()) >= hd.wm
}

// check verifies invariant 1: no two callers hold unlapsed leases of one
// name at virtual time now.
func (h *simHarness) check(time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.checkLocked()
}

func (h *simHarness) checkLocked() {
	var live *simHold
	for _, hd := range h.holds {
		if hd.ended {
			continue
		}
		if hd.lapsed() {
			// Lapsed by its holder's clock, for now: a renewal sent
			// before and acknowledged after moves its anchor on, and its
			// holder holds again.
			continue
		}
		if live != nil {
			h.violateLocked("inv1: two holders with unlapsed leases: %s token %d (anchor %v ago) and %s token %d (anchor %v ago)",
				live.who, live.lease.token, live.p.clk.Now().Sub(live.lease.lastAnchor()),
				hd.who, hd.lease.token, hd.p.clk.Now().Sub(hd.lease.lastAnchor()))
			hd.ended = true // report each overlap once
			continue
		}
		live = hd
	}
}

// grant checks a lease a Lock or TryLock call returned at virtual time
// now, whose ctx ended at ctxEnded (zero: not seen to end), and records
// the hold.
func (h *simHarness) grant(p *simProc, who string, l *Lock, lease *Lease, ctxEnded time.Time) *simHold {
	now := time.Now()
	h.db.mu.Lock() // the history, and no store step in between
	defer h.db.mu.Unlock()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.grants++
	h.grantedLimboLocked(lease)
	hd := &simHold{p: p, who: who, lease: lease, wm: l.cfg.lease}
	h.eventLocked(p.name, "%s: Lock returned token %d (anchor %v ago, id %v)", who, lease.token, p.clk.Now().Sub(lease.lastAnchor()), simID(lease.id))
	if p.isCrashed() {
		return nil // the return never happened: the process is gone
	}
	if !ctxEnded.IsZero() && ctxEnded.Before(now) {
		h.violateLocked("inv3: %s's Lock returned token %d %v after its ctx ended", who, lease.token, now.Sub(ctxEnded))
	}
	if age := p.clk.Now().Sub(lease.lastAnchor()); age >= hd.wm {
		h.violateLocked("inv4: %s's Lock returned token %d already lapsed on its own clock (anchor %v ago, lease %v)", who, lease.token, age, hd.wm)
	} else if age >= l.cfg.renewEvery() {
		// Claim 11 (b): a lease older than a renewal interval is renewed
		// before it is granted.
		h.violateLocked("inv4: %s's Lock returned token %d older than a renewal interval on its own clock (anchor %v ago, interval %v)", who, lease.token, age, l.cfg.renewEvery())
	}
	if r := h.db.current(l.name, time.Time{}); !r.heldBy(lease.id) || r.Token != lease.token {
		// A fresh lease cannot have been taken over: the row shows it.
		h.violateLocked("inv9: %s's Lock returned token %d (id %v), but the row is %v", who, lease.token, simID(lease.id), simRow(r))
	}
	if last := h.lastToken[l.name]; lease.token <= last {
		h.violateLocked("inv2: %s's Lock returned token %d after token %d had been returned", who, lease.token, last)
	}
	h.lastToken[l.name] = max(h.lastToken[l.name], lease.token)
	written := false
	for _, v := range h.db.rows[l.name] {
		if v.r.State == StateStarted && v.r.LeaseID == lease.id && v.r.Token == lease.token {
			written = true
			break
		}
	}
	if !written {
		h.violateLocked("inv6: %s's Lock returned token %d (id %v), which Spanner never wrote", who, lease.token, simID(lease.id))
	}
	h.holds = append(h.holds, hd)
	h.checkLocked()
	return hd
}

// unlocked checks that an Unlock that returned nil committed its unlock
// (claim 13: it never reports success for a lease that was taken over).
func (h *simHarness) unlocked(p *simProc, who string, lease *Lease) {
	h.db.mu.Lock()
	defer h.db.mu.Unlock()
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.db.unlocked[lease.id] && !p.gone {
		h.violateLocked("inv7: %s's Unlock of token %d returned nil, but no unlock of it committed (row %v)", who, lease.token, simRow(h.db.current(simName, time.Time{})))
	}
}

// settled checks, once every contender has returned, that the calls of
// processes still alive left nothing behind (claim 13): no queue entry, and
// the lock not held by them. Only in calm schedules: with faults a leave may
// fail for the finish timeout, and the entry then expires.
func (h *simHarness) settled() {
	if !h.par.calm {
		return
	}
	h.db.mu.Lock()
	defer h.db.mu.Unlock()
	h.mu.Lock()
	defer h.mu.Unlock()
	alive := func(id string) *simProc {
		if p := h.scopes[scopeOf(id)]; p != nil && !p.gone {
			return p
		}
		return nil
	}
	for _, e := range h.db.queue[simName] {
		if p := alive(e.key.id); p != nil {
			h.violateLocked("inv8: every call of %s has returned, but its entry %v is still queued", p.name, simID(e.key.id))
		}
	}
	if r := h.db.current(simName, time.Time{}); r.State == StateStarted {
		if p := alive(r.LeaseID); p != nil {
			h.violateLocked("inv8: every call of %s has returned, but the lock is still held by its %v", p.name, simID(r.LeaseID))
		}
	}
}

// release ends a hold (Unlock called, Done closed).
func (h *simHarness) release(hd *simHold, why string) {
	if hd == nil {
		return
	}
	h.mu.Lock()
	hd.ended = true
	h.eventLocked(hd.p.name, "%s: stops holding token %d (%s)", hd.who, hd.lease.token, why)
	h.mu.Unlock()
}

// --- liveness (inv5) -------------------------------------------------------

// stallBound is how long the lock may stay stalled while a Lock call
// waits: a poll (a quarter lease) and a few round trips, plus a lease and
// the jitter for each crashed process whose holder or queue entries were
// in the way (claim 14: a dead process costs one lease plus jitter).
func (h *simHarness) stallBound() time.Duration {
	lease := h.maxWM + time.Duration(h.par.jitter*float64(h.maxWM))
	return h.maxWM/4 + 100*time.Millisecond + time.Duration(len(h.stallDead))*lease
}

// rowWritten notes a new version of the lock's row, committed at ts; call
// with the database's lock held.
func (h *simHarness) rowWritten(ts time.Time, prev, r row) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.limboWrittenLocked(prev, r, ts)
	h.endIdleLocked(ts)
	h.holderProc = nil
	if r.State == StateStarted {
		h.holderProc = h.scopes[scopeOf(r.LeaseID)]
		h.stalled = h.holderProc != nil && h.holderProc.isCrashed()
	} else {
		h.stalled = true
	}
	h.startIdleLocked(ts)
}

// crashedLocked notes that p crashed at now; call with h.mu held and the
// database's.
func (h *simHarness) crashedLocked(p *simProc, now time.Time) {
	h.waiting -= p.waiting
	p.waiting, p.gone = 0, true
	if h.waiting == 0 {
		h.endIdleLocked(now)
	}
	if h.holderProc == p && !h.stalled {
		h.stalled = true
		h.startIdleLocked(now)
	}
	h.noteDeadLocked()
}

// noteDeadLocked adds to stallDead the crashed processes in the way now:
// the holder, and those with entries queued (live or not: a hand-off
// judges them by a lower bound of the clock).
func (h *simHarness) noteDeadLocked() {
	if h.idleSince.IsZero() {
		return
	}
	if h.holderProc != nil && h.holderProc.gone {
		h.stallDead[h.holderProc.scope.id] = true
	}
	for _, e := range h.db.queue[simName] {
		if p := h.scopes[scopeOf(e.key.id)]; p != nil && p.gone {
			h.stallDead[p.scope.id] = true
		}
	}
}

func (h *simHarness) startIdleLocked(now time.Time) {
	if h.checksLiveness(now) && h.stalled && h.waiting > 0 && h.idleSince.IsZero() {
		h.idleSince = now
		clear(h.stallDead)
		h.noteDeadLocked()
	}
}

func (h *simHarness) endIdleLocked(now time.Time) {
	if h.idleSince.IsZero() {
		return
	}
	d := now.Sub(h.idleSince)
	if d > h.stallBound() {
		what, bound := "free", h.stallBound()
		if h.holderProc != nil {
			what = "held by crashed " + h.holderProc.name
		}
		var dead []string
		for _, p := range h.procs {
			if h.stallDead[p.scope.id] {
				dead = append(dead, p.name)
			}
		}
		h.violateLocked("inv5: the lock stayed %s for %v (bound %v: %d crashed process(es) %v in the way) while %d Lock call(s) waited",
			what, d, bound, len(dead), dead, h.waiting)
	}
	h.idleSince = time.Time{}
}

// checksLiveness reports whether inv5 applies at now: in calm schedules
// always, in the others once chaos is over and what it set in motion has
// settled (calmFrom). Call with h.mu held.
func (h *simHarness) checksLiveness(now time.Time) bool {
	return h.par.calm || (!h.calmFrom.IsZero() && !now.Before(h.calmFrom))
}

// endChaos ends the schedule's chaos (chaosOver) and makes inv5 apply
// from settle later: by then the pauses, partitions, backoffs and
// detached calls begun before have ended. A stall under way then is
// timed from then.
func (h *simHarness) endChaos(settle time.Duration) {
	h.chaosOver.Store(true)
	time.AfterFunc(settle, func() {
		h.sched.turn(simKey{"sim", "calm", 0, 0})
		h.db.mu.Lock()
		defer h.db.mu.Unlock()
		h.mu.Lock()
		defer h.mu.Unlock()
		h.calmFrom = time.Now()
		h.startIdleLocked(h.calmFrom)
	})
}

// settleAfterChaos is how long after chaos ends inv5 starts to apply: the
// longest pause (3 leases), and a backoff at its longest with the
// randomisation (1.5 × defaultMaxBackOff) and a detached call's finish
// timeout after it.
func (h *simHarness) settleAfterChaos() time.Duration {
	return 3*h.par.lease + defaultMaxBackOff*3/2 + h.par.finish
}

// waitBegins and waitEnds bracket a Lock call of a live process.
func (h *simHarness) waitBegins(p *simProc) {
	h.db.mu.Lock()
	defer h.db.mu.Unlock()
	h.mu.Lock()
	defer h.mu.Unlock()
	if p.gone {
		return
	}
	h.waiting++
	p.waiting++
	h.startIdleLocked(time.Now())
}

func (h *simHarness) waitEnds(p *simProc) {
	h.db.mu.Lock()
	defer h.db.mu.Unlock()
	h.mu.Lock()
	defer h.mu.Unlock()
	if p.gone {
		return
	}
	h.waiting--
	p.waiting--
	if h.waiting == 0 {
		h.endIdleLocked(time.Now())
	}
}

// --- processes ---------------------------------------------------------------

// simProc is one incarnation of a process: a Scope, a clock, a connection
// to the simulated Spanner, and its contenders.
type simProc struct {
	h      *simHarness
	name   string
	slot   int
	scope  *Scope
	clk    *simClock
	conn   *simConn
	addr   string // "" unless it listens for wake-ups
	ctx    context.Context
	kill   context.CancelFunc
	nextID atomic.Int64

	seed    uint64
	lease   time.Duration // its Locks'
	waiting int           // Lock calls under way, under h.mu
	gone    bool          // crashed, as h knows it, under h.mu
	simLife               // running, paused or crashed; its mu guards the rest
	// cut: its Spanner calls fail before they reach Spanner until
	// partitioned; lossy: they reach it, and their answers are lost.
	partitioned time.Time
	lossy       bool
	// inflight counts its Spanner calls under way, and idleSince is when
	// the last one ended (inv10), under h.mu.
	inflight  int
	idleSince time.Time
	// slowAnswers delays every answer to its Spanner calls (a degraded
	// link; the Mutex's simulation, slowSlot).
	slowAnswers time.Duration
	// effort counts its Spanner calls per window (inv12), under mu;
	// effortBound is the most allowed in one window (0: unchecked).
	effort      simEffort
	effortBound int
}

// draw returns a source for the draws of one event of kind salt at the
// current virtual time: keyed by the process, the kind and the time, not
// by the order in which goroutines happen to run, so that a schedule
// replays.
func (p *simProc) draw(salt uint64) *rand.Rand {
	return rand.New(rand.NewPCG(p.seed^uint64(time.Now().UnixNano()), salt))
}

// Salts of draw.
const (
	drawLatency uint64 = iota + 1
	drawFaults
	drawBackOff
	drawNet
	drawLost
	drawAnswerPause // and the next
	drawMark        = drawAnswerPause + 2
	drawCtxFirst    = drawMark + 1 // Scope.ctxFirst
)

// latency draws one network flight to or from Spanner: 0.2-20 ms.
func (p *simProc) latency() time.Duration {
	r := p.draw(drawLatency)
	d := 200*time.Microsecond + time.Duration(r.ExpFloat64()*float64(1500*time.Microsecond))
	if r.IntN(50) == 0 {
		d += time.Duration(r.Int64N(int64(15 * time.Millisecond)))
	}
	return min(d, 20*time.Millisecond)
}

// turn waits for p's turn (sim_sched_test.go) to do what, keyed also by a
// and b, numbers p knew before it waited.
func (p *simProc) turn(what string, a, b int64) { p.h.sched.turn(simKey{p.name, what, a, b}) }

// sleepTurn is sleep, then turn k, however the sleep ended.
func (p *simProc) sleepTurn(ctx context.Context, d time.Duration, k simKey) error {
	err := p.sleep(ctx, d)
	p.h.sched.turn(k)
	return err
}

// gateTurn is gate, then turn k if the gate waited for a pause to end.
func (p *simProc) gateTurn(k simKey) error {
	waited, err := p.gateWaited()
	if waited {
		p.h.sched.turn(k)
	}
	return err
}

// sleep waits d of virtual time, or fails when ctx ends or the process
// crashes.
func (p *simProc) sleep(ctx context.Context, d time.Duration) error {
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

// pause stops the process (SIGSTOP) for d: its timers do not fire, its
// Spanner calls and datagrams wait.
func (p *simProc) pause(d time.Duration) {
	if !p.stop() {
		return
	}
	p.h.excuseLimbo(p, "", "paused")
	p.h.event(p.name, "PAUSED for %v", d)
	at := simNow()
	time.AfterFunc(d, func() {
		p.turn("unpause", at, int64(d))
		p.unpause()
	})
}

func (p *simProc) unpause() {
	fns, ok := p.cont()
	if !ok {
		return
	}
	p.h.event(p.name, "resumed")
	p.runDeferred(fns, "resumed")
}

// runDeferred runs what waited for a pause to end (runEachInTurn).
func (p *simProc) runDeferred(fns []func(), why string) { runEachInTurn(p.h.sched, p.turn, fns, why) }

// runEachInTurn runs fns, what waited for a pause of a process to end,
// each in a turn of its own (they wake different goroutines), keyed by
// why, the instant and its place (turn: the process's); without a
// scheduler (sched nil), at once.
func runEachInTurn(sched *simSched, turn func(what string, a, b int64), fns []func(), why string) {
	at := simNow()
	for i, fn := range fns {
		if sched == nil {
			fn()
			continue
		}
		go func() {
			turn(why, at, int64(i))
			fn()
		}()
	}
}

// crash ends the process: from now on its Spanner calls fail and write
// nothing, its datagrams are lost, its callers' ctxs are cancelled, and it
// no longer counts as a holder. Its goroutines wind down on their own.
func (p *simProc) crash() {
	fns, ok := p.end()
	if !ok {
		return
	}
	h := p.h
	h.db.mu.Lock()
	h.mu.Lock()
	for _, hd := range h.holds {
		if hd.p == p && !hd.ended {
			hd.ended = true
		}
	}
	h.crashedLocked(p, time.Now())
	h.excuseLimboLocked(p, "", "crashed")
	h.eventLocked(p.name, "CRASHED")
	h.mu.Unlock()
	h.db.mu.Unlock()
	p.kill()
	p.runDeferred(fns, "crashed")
}

// simClock is a process's local clock: virtual time plus an offset (only
// durations may cross clocks), whose timers do not fire while the process
// is paused.
type simClock struct {
	p   *simProc
	who string // whose timers (a contender's, a Mutex's): keys of their turns
	off time.Duration
	// rate is how fast the clock runs (1: true time). Assumption A5 allows
	// a clock that runs fast, not one that runs slow: rate >= 1.
	rate  float64
	start time.Time // the virtual time the rate is measured from
}

func (c *simClock) Now() time.Time {
	now := time.Now()
	if c.rate == 0 || c.rate == 1 {
		return now.Add(c.off)
	}
	return c.start.Add(c.off + time.Duration(float64(now.Sub(c.start))*c.rate))
}

// fork returns the clock of another goroutine of the contender: its
// timers take turns of their own (forkingClock).
func (c *simClock) fork(who string) clock {
	f := *c
	f.who = c.who + "/" + who
	return &f
}

func (c *simClock) NewTimer(d time.Duration) (<-chan time.Time, func() bool) {
	ch := make(chan time.Time, 1)
	var stopped atomic.Bool
	if c.rate != 0 && c.rate != 1 && d > 0 {
		// Rounded up, so that a timer always moves the clock on by d.
		d = time.Duration(math.Ceil(float64(d)/c.rate)) + 1
	}
	at := simNow()
	t := time.AfterFunc(d, func() {
		c.p.turn("timer "+c.who, at, int64(d))
		c.p.whenRunning(func() {
			if !stopped.Load() {
				ch <- c.Now()
			}
		})
	})
	return ch, func() bool { stopped.Store(true); return t.Stop() }
}

// simBackOff is the exponential backoff of defaultBackOff, drawn from the
// schedule's seed.
type simBackOff struct {
	p   *simProc
	cur time.Duration
}

func (b *simBackOff) Reset() { b.cur = 0 }

func (b *simBackOff) NextBackOff() time.Duration {
	if b.cur == 0 {
		b.cur = defaultInitialBackOff
	}
	f := 0.5 + b.p.draw(drawBackOff).Float64()
	d := time.Duration(float64(b.cur) * f)
	b.cur = min(time.Duration(float64(b.cur)*1.6), defaultMaxBackOff)
	return d
}

// --- the network -------------------------------------------------------------

// send carries a wake-up datagram from p to addr: lost, late, duplicated
// as the schedule says; delivered to the process slot's current
// incarnation when it runs.
func (h *simHarness) send(from *simProc, addr string, msg []byte) {
	if from.isCrashed() {
		return
	}
	r := from.draw(drawNet)
	calm := h.chaosOver.Load()
	copies := 1
	if r.Float64() < h.par.dupRate && !calm {
		copies = 2
	}
	var delays []time.Duration
	for range copies {
		if r.Float64() < h.par.lossRate && !calm {
			continue
		}
		d := 100*time.Microsecond + time.Duration(r.ExpFloat64()*float64(time.Millisecond))
		if r.Float64() < h.par.lateRate && !calm {
			d += time.Duration(r.Int64N(int64(2 * h.par.lease)))
		}
		delays = append(delays, d)
	}
	h.event(from.name, "datagram to %s: %q (%d copies)", addr, msg[len(wakeMagic):], len(delays))
	at := simNow()
	for i, d := range delays {
		time.AfterFunc(d, func() {
			from.turn("datagram "+addr, at, int64(d)<<1|int64(i))
			h.deliver(addr, msg)
		})
	}
}

func (h *simHarness) deliver(addr string, msg []byte) {
	h.mu.Lock()
	var to *simProc
	for _, p := range h.slots {
		if p.addr == addr {
			to = p
		}
	}
	h.mu.Unlock()
	if to == nil || to.isCrashed() {
		return
	}
	to.whenRunning(func() {
		if !to.isCrashed() {
			to.scope.receive(msg, func() bool { return true })
		}
	})
}

// forge sends a datagram nobody's Unlock sent to a listening process: a
// waiter id it may know (a queued one, the holder) and a commit timestamp
// that is old, current, in the future or one a real hand-off had.
func (h *simHarness) forge() {
	var targets []string
	h.mu.Lock()
	for _, p := range h.slots {
		if p.addr != "" && !p.isCrashed() {
			targets = append(targets, p.addr)
		}
	}
	h.mu.Unlock()
	if len(targets) == 0 {
		return
	}
	h.db.mu.Lock()
	var ids []string
	var stamps []time.Time
	for _, e := range h.db.queue[simName] {
		ids = append(ids, e.key.id)
	}
	for _, v := range h.db.rows[simName] {
		stamps = append(stamps, v.ts)
		if v.r.LeaseID != "" {
			ids = append(ids, v.r.LeaseID)
		}
	}
	now := h.db.readTS()
	h.db.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	id := ids[h.rng.IntN(len(ids))]
	var at time.Time
	switch h.rng.IntN(5) {
	case 0: // none
	case 1:
		if len(stamps) > 0 {
			at = stamps[h.rng.IntN(len(stamps))]
		} else {
			at = now
		}
	case 2:
		at = now
	case 3:
		at = now.Add(time.Duration(h.rng.Int64N(int64(3 * time.Second))))
	case 4:
		at = now.Add(-time.Duration(h.rng.Int64N(int64(10 * time.Second))))
	}
	if !at.IsZero() && at.Before(h.start) {
		at = h.start.Add(time.Microsecond)
	}
	addr := targets[h.rng.IntN(len(targets))]
	msg := wakeDatagram(id, at)
	h.event("forger", "datagram to %s: %q", addr, msg[len(wakeMagic):])
	sent, d := simNow(), time.Duration(h.rng.Int64N(int64(time.Millisecond)))
	time.AfterFunc(d, func() {
		h.sched.turn(simKey{"forger", "datagram " + addr, sent, int64(d)})
		h.deliver(addr, msg)
	})
}

// --- schedules ---------------------------------------------------------------

// drawParams draws a schedule's settings.
func drawParams(r *rand.Rand) simParams {
	p := simParams{
		procs:  2 + r.IntN(4),
		lease:  []time.Duration{time.Second, time.Second, 500 * time.Millisecond, 2 * time.Second}[r.IntN(4)],
		finish: 2 * time.Second,
		bound:  30 * time.Second,
	}
	if r.IntN(2) == 0 {
		p.jitter = 0.2
	}
	p.faultRate = []float64{0, 0, 0.02, 0.05, 0.15}[r.IntN(5)]
	p.pauses = r.IntN(3) > 0
	p.crashes = r.IntN(3) == 0
	p.forgeries = r.IntN(3) == 0
	p.lossRate = []float64{0, 0.1, 0.5}[r.IntN(3)]
	p.dupRate = []float64{0, 0.1}[r.IntN(2)]
	p.lateRate = []float64{0, 0.1, 0.3}[r.IntN(3)]
	p.cancelRate = []float64{0, 0.1, 0.3}[r.IntN(3)]
	if r.IntN(10) < 3 {
		p.calm, p.faultRate, p.pauses = true, 0, false
	}
	return p
}

// newProc starts a new incarnation of process slot slot with its
// contenders.
func (h *simHarness) newProc(slot, inc int, listening bool) *simProc {
	name := fmt.Sprintf("P%d", slot)
	if inc > 0 {
		name = fmt.Sprintf("P%d.%d", slot, inc)
	}
	p := &simProc{h: h, name: name, slot: slot, simLife: newSimLife(),
		seed: h.rng.Uint64()}
	p.ctx, p.kill = context.WithCancel(context.Background())
	p.clk = &simClock{p: p, off: time.Duration(h.rng.Int64N(int64(2*time.Hour))) - time.Hour, rate: 1, start: h.start}
	if h.drift != nil { // a stream of its own: the schedules without drift stay as they were
		p.clk.rate = []float64{1, 1, 1, 1.0001, 1.001, 1.01}[h.drift.IntN(6)]
	}
	p.lease = h.par.lease
	if h.mixed != nil {
		p.lease = []time.Duration{h.par.lease / 2, h.par.lease, 2 * h.par.lease}[h.mixed.IntN(3)]
	}
	if h.rules.slowClocks && slot%2 == 1 {
		p.clk.rate = 0.95 // breaks assumption A5
	}
	p.conn = &simConn{db: h.db, p: p}
	p.scope = NewScope(WithoutWakeUps())
	if h.sessions != nil && h.sessions.IntN(4) != 0 {
		p.scope = NewScope(WithoutWakeUps(), WithSessions())
	}
	p.scope.id = fmt.Sprintf("p%di%02d-%06x", slot, inc, h.rng.IntN(1<<24))
	p.scope.ctxFirst = func() bool { return p.draw(drawCtxFirst).IntN(2) == 0 }
	pid := slot*16 + inc
	p.scope.ids = func() string {
		return fmt.Sprintf("%08x-%04x-7000-8000-000000000000", p.nextID.Add(1), pid)
	}
	if listening {
		p.addr = fmt.Sprintf("10.0.0.%d:7946", slot+1)
		p.scope.listening.Store(&listener{advertise: p.addr, done: make(chan struct{}),
			simSend: func(addr string, msg []byte) { h.send(p, addr, msg) }})
	}
	h.mu.Lock()
	h.scopes[p.scope.id] = p
	h.procs = append(h.procs, p)
	if slot < len(h.slots) {
		h.slots[slot] = p
	} else {
		h.slots = append(h.slots, p)
	}
	h.mu.Unlock()
	h.event(name, "started (scope %s, listening %v)", p.scope.id, listening)
	contenders := 1 + h.rng.IntN(2)
	p.effortBound = waitEffort*contenders + holdEffort
	for i := range contenders {
		cycles := 2 + h.rng.IntN(4)
		l := h.newLock(p, i)
		crng := rand.New(rand.NewPCG(h.rng.Uint64(), h.rng.Uint64()))
		h.running.Add(1)
		go func() {
			defer h.running.Done()
			p.contender(l, fmt.Sprintf("%s/c%d", name, i), cycles, crng)
		}()
	}
	return p
}

func (h *simHarness) newLock(p *simProc, i int) *Lock {
	opts := []LockOption{WithLease(p.lease), WithJitter(h.par.jitter), WithOwner(fmt.Sprintf("%s/c%d", p.name, i)),
		WithScope(p.scope), WithFinishTimeout(h.par.finish), WithMaxFailures(8),
		WithBackOff(func() backoff.BackOff { return &simBackOff{p: p} })}
	if h.full != nil {
		opts = append(opts, WithLogger(slog.New(&simLog{h: h, who: p.name})))
	}
	cfg, err := configure(simName, opts)
	if err != nil {
		panic(err)
	}
	// Its own clock and connection, naming the contender, so that the
	// keys of its turns differ from its process's other contender's.
	who := fmt.Sprintf("%s/c%d", p.name, i)
	clk := *p.clk
	clk.who = who
	cfg.clock = &clk
	// The library's jitters, from the schedule's seed too.
	cfg.random = rand.New(rand.NewPCG(p.seed, uint64(1000+i))).Float64
	return &Lock{name: simName, cfg: cfg, store: &simConn{db: h.db, p: p, who: who}, key: localKey{database: "sim", table: cfg.table, name: simName}, scope: p.scope}
}

// simLog puts the library's log lines into a traced schedule's events.
type simLog struct {
	h     *simHarness
	who   string
	attrs []slog.Attr
}

func (l *simLog) Enabled(context.Context, slog.Level) bool { return true }

func (l *simLog) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString("log: " + r.Message)
	for _, a := range l.attrs {
		if a.Key != "mutex" {
			b.WriteString(" " + a.String())
		}
	}
	r.Attrs(func(a slog.Attr) bool { b.WriteString(" " + a.String()); return true })
	l.h.event(l.who, "%s", b.String())
	return nil
}

func (l *simLog) WithAttrs(as []slog.Attr) slog.Handler {
	return &simLog{h: l.h, who: l.who, attrs: append(slices.Clip(l.attrs), as...)}
}

func (l *simLog) WithGroup(string) slog.Handler { return l }

// contender runs a few Lock (or TryLock) / Unlock cycles with short
// critical sections, cancelling some ctxs at random points.
func (p *simProc) contender(l *Lock, who string, cycles int, r *rand.Rand) {
	h := p.h
	for range cycles {
		if p.ctx.Err() != nil {
			return
		}
		if err := pace.SleepOn(p.ctx, l.cfg.clock.NewTimer, time.Duration(r.Int64N(int64(time.Second)))); err != nil {
			return
		}
		ctx, cancel := context.WithCancel(withSimWho(withSimCall(p.ctx), who))
		var ended atomic.Int64
		context.AfterFunc(ctx, func() { ended.Store(time.Now().UnixNano()) })
		if x := r.Float64(); x < h.par.cancelRate {
			at, d := simNow(), time.Duration(r.Int64N(int64(3*h.par.lease)))
			time.AfterFunc(d, func() { p.turn("cancel "+who, at, int64(d)); cancel() })
		} else if x < h.par.cancelRate*1.1 {
			cancel()
		}
		try := r.IntN(5) == 0
		h.event(p.name, "%s: %s", who, map[bool]string{true: "TryLock", false: "Lock"}[try])
		var (
			lease *Lease
			err   error
		)
		if try {
			lease, err = l.TryLock(ctx)
		} else {
			// A call waits until it returns or its ctx ends.
			var once sync.Once
			h.waitBegins(p)
			stop := context.AfterFunc(ctx, func() { once.Do(func() { h.waitEnds(p) }) })
			lease, err = l.Lock(ctx)
			stop()
			once.Do(func() { h.waitEnds(p) })
		}
		if lease == nil {
			h.event(p.name, "%s: no lease: %v", who, errShort(err))
			cancel()
			continue
		}
		var endedAt time.Time
		if ns := ended.Load(); ns != 0 {
			endedAt = time.Unix(0, ns)
		}
		hd := h.grant(p, who, l, lease, endedAt)
		cancel()
		crit := time.Duration(r.Int64N(int64(h.par.lease / 2)))
		if r.IntN(10) == 0 {
			crit = time.Duration(r.Int64N(int64(3 * h.par.lease)))
		}
		c, stop := l.cfg.clock.NewTimer(crit)
		select {
		case <-c:
			h.release(hd, "Unlock")
		case <-lease.Done():
			h.release(hd, "Done closed")
		case <-p.dead:
			stop()
			return
		}
		stop()
		uctx, ucancel := context.WithCancel(context.Background())
		if r.IntN(10) == 0 {
			ucancel()
		}
		err = l.Unlock(uctx)
		ucancel()
		h.event(p.name, "%s: Unlock: %v", who, errShort(err))
		if err == nil {
			h.unlocked(p, who, lease)
		}
	}
}

func errShort(err error) string {
	if err == nil {
		return "ok"
	}
	s := err.Error()
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return s
}

// chaos pauses, crashes and restarts processes and forges datagrams until
// stop is closed.
func (h *simHarness) chaos(stop <-chan struct{}) {
	incs := make([]int, h.par.procs)
	for tick := int64(0); ; tick++ {
		t := time.NewTimer(time.Duration(h.rng.Int64N(int64(3 * time.Second))))
		select {
		case <-stop:
			t.Stop()
			return
		case <-t.C:
		}
		h.sched.turn(simKey{"chaos", "tick", tick, 0})
		h.mu.Lock()
		p := h.slots[h.rng.IntN(len(h.slots))]
		h.mu.Unlock()
		switch x := h.rng.IntN(10); {
		case x < 4 && h.par.pauses:
			p.pause(time.Duration(h.rng.Int64N(int64(3 * h.par.lease))))
		case x < 5 && h.par.crashes && !p.isCrashed():
			p.crash()
			slot := p.slot
			incs[slot]++
			inc, listening := incs[slot], p.addr != ""
			back := time.Duration(h.rng.Int64N(int64(3 * time.Second)))
			t := time.NewTimer(back)
			select {
			case <-stop:
				t.Stop()
				return
			case <-t.C:
			}
			h.sched.turn(simKey{"chaos", "restart", tick, 0})
			h.newProc(slot, inc, listening)
		case x >= 7 && h.par.forgeries:
			h.forge()
		}
	}
}

// partitions cuts processes off from Spanner for a while, until stop is
// closed: all their calls fail before reaching Spanner, or (lossy) reach
// it and lose their answers.
func (h *simHarness) partitions(stop <-chan struct{}) {
	r := h.parts
	for tick := int64(0); ; tick++ {
		t := time.NewTimer(time.Second + time.Duration(r.Int64N(int64(5*time.Second))))
		select {
		case <-stop:
			t.Stop()
			return
		case <-t.C:
		}
		h.sched.turn(simKey{"partitions", "tick", tick, 0})
		h.mu.Lock()
		p := h.slots[r.IntN(len(h.slots))]
		h.mu.Unlock()
		d := time.Duration(r.Int64N(int64(2 * p.lease)))
		lossy := r.IntN(3) == 0
		p.mu.Lock()
		p.partitioned, p.lossy = time.Now().Add(d), lossy
		p.mu.Unlock()
		h.event(p.name, "PARTITIONED for %v (answers lost: %v)", d, lossy)
	}
}

// partition reports whether p is cut off from Spanner now, and whether
// its requests still reach Spanner.
func (p *simProc) partition() (cut, lossy bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Now().Before(p.partitioned) {
		return true, p.lossy
	}
	return false, false
}

// simResult is what one schedule found.
type simResult struct {
	seed    uint64
	steps   int
	grants  int
	busiest int // the most Spanner calls a process made in one effortWindow
	turns   int // turns the scheduler let go (sim_sched_test.go)
	ties    int // of which with a key another pending turn had
	// sessionGrants counts the grants of leases held through a session;
	// sessionLosses, those of them lost with their session.
	sessionGrants, sessionLosses int
	// sessionJoins counts the renewals that moved a lease granted renewed
	// on its own into its Scope's session (sessionJoin).
	sessionJoins int
	// keptBySession counts the hand-offs to entries past their own time
	// to live, live by their session's renewals.
	keptBySession int
	// observed counts the terms the election's observer reported;
	// sessionTerms, those of them held through a session.
	observed, sessionTerms int
	violations             []string
	trace                  []string
}

// runSchedule runs schedule seed in a synctest bubble.
func runSchedule(t *testing.T, seed uint64, rules simRules) (res simResult) {
	return runScheduleTraced(t, seed, rules, nil)
}

// runScheduleTraced runs schedule seed, appending every event to full if
// it is not nil.
func runScheduleTraced(t *testing.T, seed uint64, rules simRules, full *[]string) (res simResult) {
	res.seed = seed
	defer func() {
		if e := recover(); e != nil {
			res.violations = append(res.violations, fmt.Sprintf("seed %d: the schedule panicked: %v", seed, e))
		}
	}()
	synctest.Test(t, func(t *testing.T) {
		h := &simHarness{seed: seed, rules: rules, lastToken: map[string]int64{}, full: full, scopes: map[string]*simProc{}, stallDead: map[string]bool{},
			limbo: map[limboKey]*simLimbo{}, givingBack: map[string]string{}}
		h.rng = rand.New(rand.NewPCG(seed, 0x5eed))
		h.par = drawParams(h.rng)
		// Streams of their own, each on in some schedules: the others stay
		// as they were.
		if d := rand.New(rand.NewPCG(seed, 0xd81f7)); d.IntN(3) == 0 {
			h.drift = d
		}
		if m := rand.New(rand.NewPCG(seed, 0x3a1ed)); m.IntN(4) == 0 {
			h.mixed = m
		}
		if s := rand.New(rand.NewPCG(seed, 0x5e5510)); s.IntN(2) == 0 {
			h.sessions = s
		}
		if q := rand.New(rand.NewPCG(seed, 0xca7)); q.IntN(3) == 0 && !h.par.calm {
			h.parts = q
		}
		if a := rand.New(rand.NewPCG(seed, 0xa115)); a.IntN(3) == 0 && h.par.pauses {
			h.answerPauses = true
		}
		h.maxWM = h.par.lease
		if h.mixed != nil {
			h.maxWM = 2 * h.par.lease
		}
		h.start = time.Now()
		h.sched = newSimSched(seed)
		defer h.sched.stop()
		h.db = newSimDB(h, h.par.lease)
		h.db.rules = rules
		h.event("sim", "params %+v", h.par)
		for i := range h.par.procs {
			h.newProc(i, 0, h.rng.IntN(2) == 0)
		}
		obs := h.newObserver(rand.New(rand.NewPCG(seed, 0x0b5e)))
		stop := make(chan struct{})
		chaosDone := make(chan struct{})
		partsDone := make(chan struct{})
		go func() { defer close(chaosDone); h.chaos(stop); <-partsDone }()
		go func() {
			defer close(partsDone)
			if h.parts != nil {
				h.partitions(stop)
			}
		}()
		done := make(chan struct{})
		go func() {
			// Contenders started later (restarts) join h.running before
			// chaos ends; wait for chaos first.
			<-chaosDone
			h.running.Wait()
			close(done)
		}()
		bound := time.NewTimer(h.par.bound)
		time.Sleep(h.par.bound / 2)
		h.sched.turn(simKey{"sim", "chaos ends", 0, 0})
		close(stop)
		h.endChaos(h.settleAfterChaos())
		select {
		case <-done:
			h.sched.turn(simKey{"sim", "done", 0, 0})
			h.settled()
			h.limboAtEnd()
		case <-bound.C:
			h.sched.turn(simKey{"sim", "bound", 0, 0})
		}
		obs.stop()
		res.sessionTerms = h.checkObserved(obs)
		observed := obs.observedTokens()
		res.observed = len(observed)
		h.event(obs.p.name, "observed tokens %v", observed)
		// Whatever still runs is ended as a crash would end it.
		h.mu.Lock()
		procs := append([]*simProc(nil), h.procs...)
		h.mu.Unlock()
		for _, p := range procs {
			p.crash()
		}
		select {
		case <-done:
		case <-time.After(5 * time.Minute):
			h.mu.Lock()
			h.violateLocked("stuck: contenders still running 5 minutes after their processes crashed")
			h.mu.Unlock()
		}
		// Let renewal loops of leases never unlocked expire.
		time.Sleep(2*h.maxWM + h.par.finish)
		h.sched.turn(simKey{"sim", "end", 0, 0})
		res.turns, res.ties = h.sched.counts()
		h.mu.Lock()
		res.steps, res.grants, res.sessionJoins, res.keptBySession = h.db.steps, h.grants, h.db.joins, h.db.keptBySession
		res.violations, res.trace = h.violations, h.trace
		for _, hd := range h.holds {
			if hd.lease.session != "" {
				res.sessionGrants++
				var lost *leaseLostError
				if errors.As(hd.lease.Err(), &lost) && strings.Contains(lost.Reason, "its session was lost") {
					res.sessionLosses++
				}
			}
		}
		for _, p := range h.procs {
			if n := p.busiest(); n > res.busiest {
				res.busiest = n
			}
		}
		h.mu.Unlock()
	})
	return res
}
