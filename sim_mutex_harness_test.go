//go:build go1.25

package spanmutex

// The simulation of the run-once Mutex: a few processes, each running the
// real Mutex.Run code (mutex.go, lease_renew.go, mutex_interrupt.go, the
// pure decide) a few times against the simulated row (sim_mutex_store_test.go),
// in a testing/synctest bubble, with the Lock simulation's processes
// (simProc: pauses, crashes, latency, faults), clocks (simClock) and
// backoff (simBackOff), and a checker of the invariants of
// doc/simulation-mutex.md. One seed is one schedule.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/spanmutex/spanmutex/internal/leaserule"
	"github.com/spanmutex/spanmutex/internal/pace"
)

// simMutexParams are a schedule's settings, drawn from its seed.
type simMutexParams struct {
	procs       int
	lease       time.Duration
	jitter      float64
	maxAttempts int
	faultRate   float64 // probability that a Spanner call fails somehow
	pauses      bool
	crashes     bool
	cancelRate  float64 // of Run calls whose ctx is cancelled at a random point
	failRate    float64 // of sections that return an error
	interRate   float64 // of sections that return an *InterruptedError
	panicRate   float64 // of sections that panic
	// staleness, if not 0, makes DONE and FAILED rows stale after it
	// many longest leases (WithStaleness): a later Run starts a new
	// generation.
	staleness time.Duration
	stale     int
	// calm: no faults, pauses, crashes, cancellations or failing sections:
	// exactly once (inv4) is checked.
	calm   bool
	finish time.Duration
	chaos  time.Duration // how long pauses, crashes and partitions go on
	bound  time.Duration // virtual time for the Run calls (inv8)
}

// drawMutexParams draws a schedule's settings.
func drawMutexParams(r *rand.Rand) simMutexParams {
	p := simMutexParams{
		procs:       2 + r.IntN(4),
		lease:       []time.Duration{time.Second, time.Second, 500 * time.Millisecond, 2 * time.Second}[r.IntN(4)],
		maxAttempts: []int{1, 2, 3, 3, 4, 8}[r.IntN(6)],
		finish:      2 * time.Second,
		chaos:       20 * time.Second,
		bound:       70 * time.Second,
	}
	if r.IntN(2) == 0 {
		p.jitter = 0.2
	}
	p.faultRate = []float64{0, 0, 0.02, 0.05, 0.15}[r.IntN(5)]
	p.pauses = r.IntN(3) > 0
	p.crashes = r.IntN(3) == 0
	p.cancelRate = []float64{0, 0.1, 0.3}[r.IntN(3)]
	p.failRate = []float64{0, 0.2, 0.5}[r.IntN(3)]
	p.interRate = []float64{0, 0, 0.1, 0.3}[r.IntN(4)]
	p.panicRate = []float64{0, 0, 0, 0.05}[r.IntN(4)]
	p.stale = []int{0, 0, 2, 4}[r.IntN(4)]
	if r.IntN(10) < 3 {
		p.calm, p.faultRate, p.pauses, p.crashes, p.cancelRate = true, 0, false, false, 0
		p.failRate, p.interRate, p.panicRate, p.stale = 0, 0, 0, 0
	}
	return p
}

// simMutexHarness runs one schedule and checks it. Its checker's state is
// under h.mu, h being the Lock simulation's harness that hosts the
// processes (its trace, its pause and crash machinery); it runs no Lock.
type simMutexHarness struct {
	h     *simHarness
	seed  uint64
	par   simMutexParams
	rng   *rand.Rand
	drift *rand.Rand    // the clocks' rates (nil: all true)
	mixed *rand.Rand    // the processes' leases (nil: all par.lease)
	maxWM time.Duration // the longest lease of any process
	vers  *rand.Rand    // the processes' versions (nil: no version)
	renew *rand.Rand    // the processes' renewal intervals (nil: the default, a third of the lease)
	// sessions draws which processes' Scopes are made WithSessions (nil:
	// none), their Mutexes running through the Scope's session.
	sessions *rand.Rand
	need     bool // the Mutexes have a Needed callback, which says false or fails at times
	// resets: an operator resets the row at times (sim_mutex_operator_test.go).
	resets bool
	// slowSlot is the process slot whose every Spanner answer comes a
	// lease late (a degraded link), -1 if none: no lease it acquires can
	// be made fresh before its grant, so its Runs must end with ErrOutage
	// after WithMaxFailures give-backs (inv8: every Run ends), not acquire
	// and give back for ever (issue 41, fault 7).
	slowSlot int
	// quiet: no faults, pauses or partitions (crashes and cancellations
	// may happen): a crashed holder costs one lease plus jitter (inv9).
	quiet bool
	db    *simMutexDB

	// Under h.mu.
	sections  []*simSection
	bySection map[string]*simSection // by lease id
	evicted   map[string]bool        // lease ids a ForceReset evicted while live
	runs      []*simMutexRun
	lastToken int64
	fnCalls   int
	fnNil     int
	crashes   int
	crashedAt map[*simProc]time.Time
	owners    map[string]*simProc // by owner identity (WithOwner)
	takeovers int
	abandons  int
	evictions int // live sections a ForceReset cut off

	running sync.WaitGroup
}

// simSection is one call of fn: from the call until fn returns, its lease
// is lost (Done closes, which cancels its ctx), its process crashes, or its
// lease lapses on its own clock.
type simSection struct {
	run    *simMutexRun
	lease  *Lease
	ended  bool
	result string // "" while it runs; then "nil", "error", "interrupt", "panic"
}

// simMutexRun is one Run call.
type simMutexRun struct {
	p        *simProc
	who      string
	ctx      context.Context // its Run's, under h.mu
	began    time.Time       // when Run was called, under h.mu
	every    time.Duration   // its Mutex's renewal interval
	ctxEnded atomic.Int64    // UnixNano of the instant its ctx ended, 0 if not
	section  *simSection     // its fn call, if any
	calls    int             // of fn
	returned bool
	out      Outcome
	err      error
}

func (mh *simMutexHarness) event(who, format string, args ...any) { mh.h.event(who, format, args...) }

// live reports whether s runs with an unlapsed lease; call with h.mu held.
// A section found lapsed, lost or crashed stays ended.
func (s *simSection) live() bool {
	wm := s.run.p.lease
	if s.ended {
		return false
	}
	p := s.run.p
	lost := false
	select {
	case <-s.lease.Done():
		lost = true
	default:
	}
	if lost || p.isCrashed() || p.clk.Now().Sub(s.lease.lastAnchor()) >= wm {
		s.ended = true
		return false
	}
	return true
}

// check verifies invariant 1: no two sections run with unlapsed leases.
func (mh *simMutexHarness) check() {
	mh.h.mu.Lock()
	defer mh.h.mu.Unlock()
	mh.checkLocked()
}

func (mh *simMutexHarness) checkLocked() {
	var first *simSection
	for _, s := range mh.sections {
		if !s.live() {
			continue
		}
		if first != nil {
			mh.h.violateLocked("inv1: two sections run with unlapsed leases: %s token %d (anchor %v ago) and %s token %d (anchor %v ago)",
				first.run.who, first.lease.token, first.run.p.clk.Now().Sub(first.lease.lastAnchor()),
				s.run.who, s.lease.token, s.run.p.clk.Now().Sub(s.lease.lastAnchor()))
			s.ended = true // report each overlap once
			continue
		}
		first = s
	}
}

// rowWritten checks a committed write of op by lease l (nil for an
// abandon) that turned prev into r; call with the database's lock held.
func (mh *simMutexHarness) rowWritten(ts time.Time, op string, l *Lease, prev, r row) {
	h := mh.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if r.Attempts > int64(mh.par.maxAttempts) {
		h.violateLocked("inv5: %s wrote attempt %d of %d", op, r.Attempts, mh.par.maxAttempts)
	}
	// The row is never taken from a section that runs with an unlapsed
	// lease: a write that changes a STARTED row's holder, or ends it, by
	// anyone but that holder.
	if l != nil && op != "acquire" && l.id != prev.LeaseID {
		h.violateLocked("inv1: %s by token %d committed over a row it did not hold (%v): its fence let it through", op, l.token, mrow(prev))
	}
	judged := mh.db.judged(prev, ts) // the holder's liveness, by its session if it names one
	if op == "forcereset" && prev.State == StateStarted {
		mh.evictLocked(ts, judged, r)
	} else if prev.State == StateStarted && (l == nil || l.id != prev.LeaseID) {
		if s := mh.bySection[prev.LeaseID]; s != nil && s.live() {
			who := "an abandon"
			if op == "reset" {
				who = "a reset"
			}
			if l != nil {
				who = fmt.Sprintf("%s of token %d", op, l.token)
			}
			h.violateLocked("inv1: %s took the row (%v) from %s's section, which runs with an unlapsed lease (anchor %v ago)",
				who, mrow(r), s.run.who, s.run.p.clk.Now().Sub(s.lease.lastAnchor()))
		}
	}
	if op == "acquire" && prev.State == StateStarted {
		mh.takeovers++
	}
	if mh.quiet && prev.State == StateStarted && (op == "acquire" || op == "abandon") {
		mh.crashedHolderLocked(ts, judged)
	}
	if op == "abandon" {
		mh.abandons++
	}
	// A new generation: a stale row, or one of another version.
	fresh := op == "acquire" && r.Attempts == 1 &&
		((mh.par.staleness > 0 && ts.Sub(prev.FinishedAt) >= mh.par.staleness) || r.Version != prev.Version)
	if prev.State == StateDone && r.State != StateDone && !fresh {
		h.violateLocked("inv5: %s wrote %s over DONE (token %d)", op, r.State, r.Token)
	}
	switch {
	case r.State == StateDone && prev.State != StateDone:
		s := mh.bySection[l.id]
		switch {
		case s == nil:
			h.violateLocked("inv5: DONE written by token %d, whose section never ran", l.token)
		case s.result != "nil":
			h.violateLocked("inv5: DONE written by token %d, whose section returned %q", l.token, s.result)
		}
	case r.State == StateFailed && op == "finish":
		if s := mh.bySection[l.id]; s == nil || (s.result != "error" && s.result != "panic") {
			what := "never ran"
			if s != nil {
				what = fmt.Sprintf("returned %q", s.result)
			}
			h.violateLocked("inv5: FAILED recorded by token %d, whose section %s", l.token, what)
		}
	case r.State == StateFailed && op == "abandon":
		if prev.Attempts < int64(mh.par.maxAttempts) {
			h.violateLocked("inv5: token %d abandoned (FAILED) on attempt %d of %d", prev.Token, prev.Attempts, mh.par.maxAttempts)
		}
	}
}

// evictLocked records that a ForceReset wrote r over prev, STARTED, at
// ts. If prev's holder had renewed within its lease by Spanner's clock (so
// that Reset would have refused), the token written must be past the
// evicted one, so that a Fence rejects the evicted holder's once a newer
// holder's has been admitted, and the evicted lease's section no longer
// counts for inv1, whether it runs or begins later (it may run on until
// its next renewal fails, as ForceReset's contract says); call with h.mu
// held.
func (mh *simMutexHarness) evictLocked(ts time.Time, prev, r row) {
	if ts.Sub(prev.RenewedAt) >= holderLease(prev, mh.par.lease) {
		return // a holder silent past its lease: reset as Reset does
	}
	if r.Token <= prev.Token {
		mh.h.violateLocked("inv1: a ForceReset evicted the live holder of token %d but wrote token %d, not past it", prev.Token, r.Token)
	}
	mh.evicted[prev.LeaseID] = true
	if s := mh.bySection[prev.LeaseID]; s != nil && s.live() {
		mh.evictLiveLocked(s)
	}
}

// evictLiveLocked records that a ForceReset cut off section s, live or
// yet to begin: inv1 no longer counts it (it ends); call with h.mu held.
func (mh *simMutexHarness) evictLiveLocked(s *simSection) {
	s.ended = true
	mh.evictions++
}

// simStallSlack is how long after the earliest moment a crashed holder
// may be taken over the takeover may come: a read and an acquisition,
// each 2-40 ms there and back.
const simStallSlack = 150 * time.Millisecond

// crashedHolderLocked checks, in a quiet schedule, that a row held by a
// crashed process was taken over (or abandoned) at ts no later than
// simStallSlack after its lease and the largest jitter had passed, if a
// live Run waited all along (inv9: a dead process costs one lease plus
// jitter); call with h.mu held.
func (mh *simMutexHarness) crashedHolderLocked(ts time.Time, prev row) {
	holder := mh.owners[prev.Owner]
	crashed, ok := mh.crashedAt[holder]
	if holder == nil || !ok {
		return
	}
	lease := holderLease(prev, mh.par.lease)
	from := latest(prev.RenewedAt.Add(leaserule.After(lease, time.Duration(mh.par.jitter*float64(lease)))), crashed)
	late, slack := ts.Sub(from), simStallSlack
	if backOff := defaultMaxBackOff * 3 / 2; prev.Attempts > 1 || mh.failedSince(from.Add(-backOff)) {
		// A retry of a failed section, or a row FAILED lately (since
		// started over by a new generation or re-armed by a reset, its
		// attempts counted from 1 again): a waiter that read it FAILED
		// may be backing off before its own retry (d.retry), up to 1.5
		// times defaultMaxBackOff.
		slack += backOff
	}
	if late <= slack {
		return
	}
	for _, run := range mh.runs {
		if !run.returned && run.section == nil && !run.p.isCrashed() && !run.began.IsZero() && !run.began.After(from) &&
			run.ctx != nil && run.ctx.Err() == nil {
			mh.h.violateLocked("inv9: the row of crashed %s (token %d) was taken %v after its lease and jitter had passed, while %s waited",
				holder.name, prev.Token, late, run.who)
			return
		}
	}
}

// failedSince reports whether the row was FAILED at some instant since t
// (call with the database's mu held).
func (mh *simMutexHarness) failedSince(t time.Time) bool {
	rows := mh.db.rows[simMutexName]
	for i, v := range rows {
		if v.r.State == StateFailed && (i+1 == len(rows) || !rows[i+1].ts.Before(t)) {
			return true
		}
	}
	return false
}

// begin checks a section that begins now (fn called) and records it.
func (mh *simMutexHarness) begin(run *simMutexRun, lease *Lease) *simSection {
	now := time.Now()
	p := run.p
	mh.db.mu.Lock() // the history, and no store step in between
	defer mh.db.mu.Unlock()
	h := mh.h
	h.mu.Lock()
	defer h.mu.Unlock()
	age := p.clk.Now().Sub(lease.lastAnchor())
	h.eventLocked(p.name, "%s: section begins, token %d (anchor %v ago, id %v)", run.who, lease.token, age, simID(lease.id))
	run.calls++
	s := &simSection{run: run, lease: lease}
	if p.isCrashed() {
		s.ended = true
		return s // the call never happened: the process is gone
	}
	mh.fnCalls++
	if run.calls > 1 {
		h.violateLocked("inv3: %s's Run called fn %d times", run.who, run.calls)
	}
	run.section = s
	if ns := run.ctxEnded.Load(); ns != 0 && time.Unix(0, ns).Before(now) {
		h.violateLocked("inv3: %s's section began (token %d) %v after its Run's ctx ended", run.who, lease.token, now.Sub(time.Unix(0, ns)))
	}
	if age >= p.lease {
		h.violateLocked("inv3: %s's section began with token %d already lapsed on its own clock (anchor %v ago, lease %v)", run.who, lease.token, age, p.lease)
	} else if age >= run.every {
		// Claim 11 (freshen): nor about to lapse before its first renewal.
		h.violateLocked("inv3: %s's section began with token %d whose anchor is %v old, past a renewal interval (%v)", run.who, lease.token, age, run.every)
	}
	// A lease a ForceReset evicted before its section began (its
	// acquisition's answer still on the way) may begin after a newer
	// holder's, as ForceReset's contract allows: its token is older, and a
	// Fence rejects it once the newer one is admitted.
	if lease.token <= mh.lastToken && !mh.evicted[lease.id] {
		h.violateLocked("inv2: %s's section began with token %d after token %d had begun", run.who, lease.token, mh.lastToken)
	}
	mh.lastToken = max(mh.lastToken, lease.token)
	if ok, tookOver := mh.db.written(lease); !ok {
		h.violateLocked("inv6: %s's section began with token %d (id %v), which Spanner never wrote", run.who, lease.token, simID(lease.id))
	} else if tookOver != lease.TookOver() {
		h.violateLocked("inv6: %s's section began with token %d, TookOver %v, but the acquisition took over: %v", run.who, lease.token, lease.TookOver(), tookOver)
	}
	if mh.evicted[lease.id] { // a ForceReset took its row before it began
		mh.evictLiveLocked(s)
	}
	mh.sections = append(mh.sections, s)
	mh.bySection[lease.id] = s
	if mh.db.lostIDs[lease.id] {
		mh.db.counts["adopted"]++ // a section on an acquisition read back after its answer was lost
	}
	mh.checkLocked()
	return s
}

// end records how a section ended.
func (mh *simMutexHarness) end(s *simSection, result string) {
	h := mh.h
	mh.db.mu.Lock()
	defer mh.db.mu.Unlock()
	h.mu.Lock()
	defer h.mu.Unlock()
	mh.checkLocked()
	s.ended, s.result = true, result
	if result == "nil" && !s.run.p.isCrashed() {
		mh.fnNil++
	}
	h.eventLocked(s.run.p.name, "%s: section ends, token %d: %s", s.run.who, s.lease.token, result)
}

// returned checks how a Run call ended (inv5, inv7).
func (mh *simMutexHarness) returned(run *simMutexRun, out Outcome, err error) {
	h := mh.h
	mh.db.mu.Lock()
	defer mh.db.mu.Unlock()
	h.mu.Lock()
	defer h.mu.Unlock()
	run.returned, run.out, run.err = true, out, err
	h.eventLocked(run.p.name, "%s: Run returned %v, %s", run.who, out, errLine(err))
	if run.p.isCrashed() {
		return // nobody is there to see it
	}
	r := mh.db.current(simMutexName, time.Time{})
	ran := run.section != nil
	if ran != (out == Executed) {
		h.violateLocked("inv7: %s's Run returned %v, but fn ran in it: %v", run.who, out, ran)
	}
	var ee *exhaustedError
	// The row may have gone stale, been started by another version, or
	// been reset (sim_mutex_operator_test.go) since the Run read it.
	gens := mh.par.staleness > 0 || mh.vers != nil || mh.resets
	if errors.Is(err, ErrNotObtained) && (run.ctx == nil || run.ctx.Err() == nil) {
		h.violateLocked("inv7: %s's Run returned %v, %s, but its ctx has not ended", run.who, out, errLine(err))
	}
	if ran && out == Executed && err != nil {
		doneByIt := mh.db.ever(func(v row) bool { return v.State == StateDone && v.LeaseID == run.section.lease.id })
		// A lost lease is a definite answer (could not record DONE is not:
		// its outcome is unknown): the section's own DONE, FAILED or
		// give-back did not land. Broken by the library (see
		// simMutexRegressionSeeds, seeds 725, 2484, 3254): a write whose
		// answer was lost lands, another contender starts the section
		// again before the retry, which then reports the lease lost.
		if doneByIt && errors.Is(err, ErrLeaseLost) {
			h.violateLocked("inv7: %s's Run returned Executed, %s, but DONE was recorded under its lease", run.who, errLine(err))
		}
		id, tok := run.section.lease.id, run.section.lease.token
		if errors.Is(err, ErrLeaseLost) && !doneByIt {
			if mh.db.ever(func(v row) bool { return v.State == StateFailed && v.LeaseID == id && v.Token == tok }) {
				h.violateLocked("inv7: %s's Run returned Executed, %s, but FAILED was recorded under its lease", run.who, errLine(err))
			}
			if mh.db.ever(func(v row) bool { return v.State == StateNeeded && v.LeaseID == id && v.Token == tok }) {
				h.violateLocked("inv7: %s's Run returned Executed, %s, but the row was given back under its lease", run.who, errLine(err))
			}
		}
		if ie, ok := err.(*InterruptedError); ok && !mh.db.ever(func(v row) bool {
			return v.State == StateNeeded && v.LeaseID == run.section.lease.id && v.Token == ie.Token
		}) {
			h.violateLocked("inv7: %s's Run returned %s, but the row was never given back under its lease", run.who, errLine(err))
		}
	}
	switch {
	case out == Executed && err == nil:
		if !ran || run.section.result != "nil" {
			h.violateLocked("inv5: %s's Run returned Executed, nil, but its section did not return nil", run.who)
		} else if !mh.db.ever(func(v row) bool { return v.State == StateDone && v.LeaseID == run.section.lease.id }) ||
			(!gens && (r.State != StateDone || r.LeaseID != run.section.lease.id)) {
			h.violateLocked("inv5: %s's Run returned Executed, nil, but DONE was not recorded under its lease (row %v)", run.who, mrow(r))
		}
	case out == NotNeeded:
		if err != nil || !mh.need {
			h.violateLocked("inv7: %s's Run returned NotNeeded, %s, without a Needed callback that said so", run.who, errLine(err))
		}
	case out == AlreadyDone:
		if r.State != StateDone && !(gens && mh.db.ever(func(v row) bool { return v.State == StateDone })) {
			h.violateLocked("inv5: %s's Run returned AlreadyDone, but the row is %v", run.who, mrow(r))
		}
	case errors.As(err, &ee) && ee.Err == nil && out == NoOutcome:
		// Given up on the row's attempts (not on failed Spanner calls).
		exhausted := func(v row) bool {
			return v.Attempts >= int64(mh.par.maxAttempts) && (v.State == StateFailed || v.State == StateNeeded)
		}
		if !exhausted(r) && !(gens && mh.db.ever(exhausted)) {
			h.violateLocked("inv5: %s's Run gave up (%v), but the row is %v, MaxAttempts %d", run.who, errLine(err), mrow(r), mh.par.maxAttempts)
		}
	}
}

// settled checks exactly once (inv4) in a calm schedule whose Run calls
// have all returned: the row is DONE, fn ran once and returned nil, and
// every Run returned Executed (one) or AlreadyDone.
func (mh *simMutexHarness) settled() {
	if !mh.par.calm {
		return
	}
	h := mh.h
	mh.db.mu.Lock()
	defer mh.db.mu.Unlock()
	h.mu.Lock()
	defer h.mu.Unlock()
	if r := mh.db.current(simMutexName, time.Time{}); r.State != StateDone {
		h.violateLocked("inv4: calm schedule settled with the row %v, not DONE", mrow(r))
	}
	if mh.fnCalls != 1 || mh.fnNil != 1 {
		h.violateLocked("inv4: calm schedule ran fn %d times, %d returned nil", mh.fnCalls, mh.fnNil)
	}
	executed := 0
	for _, run := range mh.runs {
		switch {
		case run.out == Executed && run.err == nil:
			executed++
		case run.out == AlreadyDone && run.err == nil:
		default:
			h.violateLocked("inv4: calm schedule: %s's Run returned %v, %s", run.who, run.out, errShort(run.err))
		}
	}
	if executed != 1 {
		h.violateLocked("inv4: calm schedule: %d Run calls returned Executed, nil", executed)
	}
}

// --- processes -----------------------------------------------------------------

// newProc starts incarnation inc of process slot slot with its Run calls.
func (mh *simMutexHarness) newProc(slot, inc int) *simProc {
	h := mh.h
	p := mh.newProcess(slot, inc)
	name := p.name
	version := ""
	if mh.vers != nil { // an upgrade under way: restarts more likely run the new version
		version = []string{"v1", "v2"}[min(1, mh.vers.IntN(2)+inc)]
	}
	h.event(name, "started (clock rate %v, lease %v, version %q)", p.clk.rate, p.lease, version)
	m := mh.newMutex(p, version)
	calls := 1 + mh.rng.IntN(3)
	p.effortBound = runEffort*calls + holdEffort
	for i := range calls {
		run := &simMutexRun{p: p, who: fmt.Sprintf("%s/r%d", name, i)}
		crng := rand.New(rand.NewPCG(mh.rng.Uint64(), mh.rng.Uint64()))
		rm := m
		if p.scope.sessionsOn {
			// A Mutex per Run call, on a clock naming it: Run calls of
			// one process that back off alike then wake in turns of
			// their own, in the seed's order, which picks the one that
			// starts the Scope's session.
			rm = mh.mutexOf(p, version, m.cfg.renewInterval) // one renewal interval per process, as one Mutex has
			clk := *p.clk
			clk.who = run.who
			rm.cfg.clock = &clk
		}
		h.mu.Lock()
		mh.runs = append(mh.runs, run)
		h.mu.Unlock()
		mh.running.Add(1)
		go func() {
			defer mh.running.Done()
			mh.runner(rm, run, crng)
		}()
	}
	return p
}

// newProcess makes incarnation inc of process slot slot: its clock,
// lease and Scope, known to the host.
func (mh *simMutexHarness) newProcess(slot, inc int) *simProc {
	h := mh.h
	name := fmt.Sprintf("P%d", slot)
	if inc > 0 {
		name = fmt.Sprintf("P%d.%d", slot, inc)
	}
	p := &simProc{h: h, name: name, slot: slot, simLife: newSimLife(), seed: mh.rng.Uint64()}
	p.ctx, p.kill = context.WithCancel(context.Background())
	p.clk = &simClock{p: p, off: time.Duration(mh.rng.Int64N(int64(2*time.Hour))) - time.Hour, rate: 1, start: h.start}
	if mh.drift != nil {
		p.clk.rate = []float64{1, 1, 1, 1.0001, 1.001, 1.01}[mh.drift.IntN(6)]
	}
	if mh.db.rules.slowClocks && slot%2 == 1 {
		p.clk.rate = 0.95 // breaks assumption A5
	}
	p.lease = mh.par.lease
	if mh.mixed != nil {
		p.lease = []time.Duration{mh.par.lease / 2, mh.par.lease, 2 * mh.par.lease}[mh.mixed.IntN(3)]
	}
	p.scope = NewScope(WithoutWakeUps())
	if mh.sessions != nil && mh.sessions.IntN(4) != 0 {
		p.scope = sessionScope(p, slot*16+inc) // sim_mutex_session_test.go
	}
	p.scope.id = fmt.Sprintf("p%di%02d-%06x", slot, inc, mh.rng.IntN(1<<24))
	if slot == mh.slowSlot {
		p.slowAnswers = p.lease
	}
	h.mu.Lock()
	mh.owners[name] = p
	h.scopes[p.scope.id] = p
	h.procs = append(h.procs, p)
	if slot < len(h.slots) {
		h.slots[slot] = p
	} else {
		h.slots = append(h.slots, p)
	}
	h.mu.Unlock()
	return p
}

// newMutex makes p's Mutex: the real one, on p's connection, clock and
// seeded jitters.
func (mh *simMutexHarness) newMutex(p *simProc, version string) *Mutex {
	var every time.Duration // 0: the default, a third of the lease
	if mh.renew != nil {
		every = []time.Duration{p.lease / 2, p.lease / 6}[mh.renew.IntN(2)]
	}
	return mh.mutexOf(p, version, every)
}

// mutexOf makes a Mutex of p's renewing every every (0: the default),
// as newMutex does.
func (mh *simMutexHarness) mutexOf(p *simProc, version string, every time.Duration) *Mutex {
	opts := []MutexOption{WithLease(p.lease), WithJitter(mh.par.jitter), WithOwner(p.name),
		WithFinishTimeout(mh.par.finish), WithMaxAttempts(mh.par.maxAttempts), WithMaxFailures(mh.par.maxAttempts),
		WithBackOff(func() backoff.BackOff { return &simBackOff{p: p} })}
	if mh.par.staleness > 0 {
		opts = append(opts, WithStaleness(mh.par.staleness))
	}
	if version != "" {
		opts = append(opts, WithVersion(version))
	}
	if p.scope.sessionsOn {
		opts = append(opts, WithScope(p.scope))
	}
	if every > 0 {
		opts = append(opts, WithRenewInterval(every))
	}
	if mh.need {
		opts = append(opts, WithNeeded(func(context.Context) (bool, error) {
			switch x := p.draw(drawNeeded).Float64(); {
			case x < 0.05:
				return false, errSimNeeded
			case x < 0.25:
				return false, nil
			}
			return true, nil
		}))
	}
	if mh.h.full != nil {
		opts = append(opts, WithLogger(slog.New(&simLog{h: mh.h, who: p.name})))
	}
	m, err := newMutex(simMutexName, opts)
	if err != nil {
		panic(err)
	}
	m.store = &simMutexConn{db: mh.db, p: p}
	m.cfg.clock = p.clk
	// The jitters, from the schedule's seed; concurrent Run calls share it.
	var mu sync.Mutex
	src := rand.New(rand.NewPCG(p.seed, 2000))
	m.cfg.random = func() float64 {
		mu.Lock()
		defer mu.Unlock()
		return src.Float64()
	}
	return m
}

// errLine is errShort on one line (errors.Join puts its errors on lines
// of their own).
func errLine(err error) string {
	if err == nil {
		return "ok"
	}
	s := strings.ReplaceAll(err.Error(), "\n", " | ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// drawNeeded is the salt of the Needed callback's draws (simProc.draw).
const drawNeeded uint64 = 0x4eed

// errSimNeeded is what a failing Needed callback returns.
var errSimNeeded = errors.New("sim: the Needed callback failed")

// errSimSection is what a failing section returns.
var errSimSection = errors.New("sim: the section failed")

// simPanic is what a panicking section panics with.
type simPanic struct{}

// runner makes one Run call after a while, with a section of random length
// that ends as the schedule's rates say, and a ctx cancelled at random.
func (mh *simMutexHarness) runner(m *Mutex, run *simMutexRun, r *rand.Rand) {
	p, par := run.p, mh.par
	clk := *p.clk // timers naming the Run call (sim_sched_test.go)
	clk.who = run.who
	if err := pace.SleepOn(p.ctx, clk.NewTimer, time.Duration(r.Int64N(int64(5*time.Second)))); err != nil {
		mh.returned(run, NoOutcome, err)
		return
	}
	ctx, cancel := context.WithCancel(withSimWho(p.ctx, run.who))
	defer cancel()
	context.AfterFunc(ctx, func() { run.ctxEnded.Store(time.Now().UnixNano()) })
	if x := r.Float64(); x < par.cancelRate {
		at, d := simNow(), time.Duration(r.Int64N(int64(3*p.lease)))
		time.AfterFunc(d, func() { p.turn("cancel "+run.who, at, int64(d)); cancel() })
	} else if x < par.cancelRate*1.1 {
		cancel()
	}
	// The section's length and how it ends, drawn now.
	crit := time.Duration(r.Int64N(int64(p.lease)))
	if r.IntN(10) == 0 {
		crit = time.Duration(r.Int64N(int64(3 * p.lease)))
	}
	verdict, onCancel := r.Float64(), r.Float64()
	mh.h.mu.Lock()
	run.ctx, run.began, run.every = ctx, time.Now(), m.cfg.renewEvery()
	mh.h.mu.Unlock()
	mh.event(p.name, "%s: Run", run.who)
	fn := func(sctx context.Context, lease *Lease) error {
		s := mh.begin(run, lease)
		c, stop := clk.NewTimer(crit)
		defer stop()
		var res error
		select {
		case <-c:
			switch {
			case verdict < par.failRate:
				res = errSimSection
			case verdict < par.failRate+par.interRate:
				res = Interrupt("sim: stopped from outside", nil)
			case verdict < par.failRate+par.interRate+par.panicRate:
				mh.end(s, "panic")
				panic(simPanic{})
			}
		case <-sctx.Done():
			switch {
			case onCancel < 0.5:
				res = sctx.Err()
			case onCancel < 0.75:
			default:
				res = Interrupt("sim: ctx ended", sctx.Err())
			}
		case <-p.dead:
			res = errSimCrashed
		}
		var ie *InterruptedError
		switch {
		case res == nil:
			mh.end(s, "nil")
		case errors.As(res, &ie):
			mh.end(s, "interrupt")
		default:
			mh.end(s, "error")
		}
		return res
	}
	out, err := func() (out Outcome, err error) {
		defer func() {
			if x := recover(); x != nil {
				if _, ok := x.(simPanic); !ok {
					panic(x)
				}
				out, err = Executed, errors.New("sim: the section panicked")
			}
		}()
		return m.Run(ctx, fn)
	}()
	mh.returned(run, out, err)
}

// chaos pauses, crashes and restarts processes until stop is closed.
func (mh *simMutexHarness) chaos(stop <-chan struct{}) {
	h, par := mh.h, mh.par
	if !par.pauses && !par.crashes {
		return
	}
	incs := make([]int, par.procs)
	for tick := int64(0); ; tick++ {
		t := time.NewTimer(time.Duration(mh.rng.Int64N(int64(1500 * time.Millisecond))))
		select {
		case <-stop:
			t.Stop()
			return
		case <-t.C:
		}
		h.sched.turn(simKey{"chaos", "tick", tick, 0})
		h.mu.Lock()
		p := h.slots[mh.rng.IntN(len(h.slots))]
		h.mu.Unlock()
		switch x := mh.rng.IntN(10); {
		case x < 4 && par.pauses:
			p.pause(time.Duration(mh.rng.Int64N(int64(3 * p.lease))))
		case x < 6 && par.crashes && !p.isCrashed():
			p.crash()
			h.mu.Lock()
			mh.crashedAt[p] = time.Now()
			mh.crashes++
			h.mu.Unlock()
			incs[p.slot]++
			back := time.NewTimer(time.Duration(mh.rng.Int64N(int64(3 * time.Second))))
			select {
			case <-stop:
				back.Stop()
				return
			case <-back.C:
			}
			h.sched.turn(simKey{"chaos", "restart", tick, 0})
			mh.newProc(p.slot, incs[p.slot])
		}
	}
}

// simMutexResult is what one schedule found.
type simMutexResult struct {
	seed      uint64
	steps     int
	turns     int // turns the scheduler let go (sim_sched_test.go)
	sections  int
	takeovers int
	abandons  int
	// sessionSections counts the sections whose lease was held through a
	// session; sessionLosses, those of them lost with it.
	sessionSections, sessionLosses int
	counts                         map[string]int
	calm                           bool
	violations                     []string
	trace                          []string
}

// newMutexHarness returns an empty harness for schedule seed.
func newMutexHarness(seed uint64) *simMutexHarness {
	return &simMutexHarness{seed: seed, rng: rand.New(rand.NewPCG(seed, 0x6d75746578)), bySection: map[string]*simSection{}, evicted: map[string]bool{},
		crashedAt: map[*simProc]time.Time{}, owners: map[string]*simProc{}, slowSlot: -1}
}

// host makes the host of the processes, mh.h, and the database: the Lock
// simulation's harness, for its trace, its faults (par.faultRate), its
// partitions (parts), and its pause and crash machinery; it has no Lock,
// so its own checks see nothing. Call it in the bubble.
func (mh *simMutexHarness) host(rules simMutexRules, parts *rand.Rand, full *[]string) {
	h := &simHarness{seed: mh.seed, lastToken: map[string]int64{}, full: full, scopes: map[string]*simProc{}, stallDead: map[string]bool{}}
	h.par = simParams{procs: mh.par.procs, lease: mh.par.lease, jitter: mh.par.jitter, faultRate: mh.par.faultRate,
		pauses: mh.par.pauses, crashes: mh.par.crashes, cancelRate: mh.par.cancelRate, finish: mh.par.finish, bound: mh.par.bound}
	h.rng, h.parts, h.maxWM = mh.rng, parts, mh.maxWM
	h.start = time.Now()
	h.db = newSimDB(h, mh.par.lease)
	mh.h = h
	mh.db = &simMutexDB{mh: mh, rules: rules, rows: map[string][]simMutexVersion{}, counts: map[string]int{}, lostIDs: map[string]bool{},
		sessions: map[string][]simSession{}}
	h.event("sim", "params %+v", mh.par)
}

// runMutexSchedule runs schedule seed in a synctest bubble, appending every
// event to full if it is not nil.
func runMutexSchedule(t *testing.T, seed uint64, rules simMutexRules, full *[]string) (res simMutexResult) {
	res.seed = seed
	defer func() {
		if e := recover(); e != nil {
			res.violations = append(res.violations, fmt.Sprintf("seed %d: the schedule panicked: %v", seed, e))
		}
	}()
	synctest.Test(t, func(t *testing.T) {
		mh := newMutexHarness(seed)
		mh.par = drawMutexParams(mh.rng)
		// Streams of their own, each on in some schedules.
		if d := rand.New(rand.NewPCG(seed, 0xd81f7)); d.IntN(3) == 0 {
			mh.drift = d
		}
		if m := rand.New(rand.NewPCG(seed, 0x3a1ed)); m.IntN(4) == 0 {
			mh.mixed = m
		}
		var parts *rand.Rand
		if q := rand.New(rand.NewPCG(seed, 0xca7)); q.IntN(3) == 0 && !mh.par.calm {
			parts = q
		}
		mh.maxWM = mh.par.lease
		if mh.mixed != nil {
			mh.maxWM = 2 * mh.par.lease
		}
		mh.par.staleness = time.Duration(mh.par.stale) * mh.maxWM
		if v := rand.New(rand.NewPCG(seed, 0x7e5)); v.IntN(4) == 0 && !mh.par.calm {
			mh.vers = v
		}
		if r := rand.New(rand.NewPCG(seed, 0x4e3e)); r.IntN(4) == 0 {
			mh.renew = r
		}
		if s := rand.New(rand.NewPCG(seed, 0x5e5510)); s.IntN(2) == 0 {
			mh.sessions = s // the Lock's stream: sessions in half the schedules
		}
		mh.quiet = mh.par.faultRate == 0 && !mh.par.pauses && parts == nil
		mh.need = rand.New(rand.NewPCG(seed, 0x4eed)).IntN(5) == 0 && !mh.par.calm
		if sl := rand.New(rand.NewPCG(seed, 0x5105)); sl.IntN(4) == 0 && !mh.par.calm {
			mh.slowSlot, mh.quiet = sl.IntN(mh.par.procs), false
			// Its Runs end by WithMaxFailures give-backs, each after an
			// acquisition, three renewals and a give-back answered a lease
			// late and a backoff; its Runs (up to three) wait for each other.
			mh.par.bound += time.Duration(3*mh.par.maxAttempts) * (8*mh.maxWM + 3*time.Second)
		}
		mh.host(rules, parts, full)
		h := mh.h
		h.sched = newSimSched(seed)
		defer h.sched.stop()
		for i := range mh.par.procs {
			mh.newProc(i, 0)
		}
		mh.startOperator()
		stop := make(chan struct{})
		chaosDone := make(chan struct{})
		partsDone := make(chan struct{})
		go func() { defer close(chaosDone); mh.chaos(stop); <-partsDone }()
		go func() {
			defer close(partsDone)
			if h.parts != nil {
				h.partitions(stop) // sim_lock_harness_test.go
			}
		}()
		done := make(chan struct{})
		go func() {
			<-chaosDone // restarts join mh.running before chaos ends
			mh.running.Wait()
			close(done)
		}()
		bound := time.NewTimer(mh.par.bound)
		time.Sleep(mh.par.chaos)
		h.sched.turn(simKey{"sim", "chaos ends", 0, 0})
		close(stop)
		select {
		case <-done:
			h.sched.turn(simKey{"sim", "done", 0, 0})
			mh.settled()
			mh.sessionsLeft()
		case <-bound.C:
			h.sched.turn(simKey{"sim", "bound", 0, 0})
			// Liveness: chaos ended long ago; every Run call of a live
			// process returns.
			h.mu.Lock()
			var stuck []string
			for _, run := range mh.runs {
				if !run.returned && !run.p.isCrashed() {
					stuck = append(stuck, run.who)
				}
			}
			h.violateLocked("inv8: Run calls %v still running %v after the schedule began (chaos ended at %v)", stuck, mh.par.bound, mh.par.chaos)
			h.mu.Unlock()
		}
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
			h.violateLocked("stuck: Run calls still running 5 minutes after their processes crashed")
			h.mu.Unlock()
		}
		// Let renewal loops and detached calls wind down.
		time.Sleep(2*mh.maxWM + mh.par.finish + detachGrace)
		h.sched.turn(simKey{"sim", "end", 0, 0})
		res.turns, _ = h.sched.counts()
		mh.db.mu.Lock()
		res.steps, res.counts = mh.db.steps, mh.db.counts
		mh.db.mu.Unlock()
		h.mu.Lock()
		res.sections, res.calm, res.takeovers, res.abandons = mh.fnCalls, mh.par.calm, mh.takeovers, mh.abandons
		if mh.evictions > 0 {
			res.counts["forcereset of a live section"] += mh.evictions
		}
		res.violations, res.trace = h.violations, h.trace
		res.sessionSections, res.sessionLosses = mh.sessionCounts()
		h.mu.Unlock()
	})
	return res
}

// sessionCounts counts the sections whose lease was held through a
// session, and those of them lost with it; call with h.mu held.
func (mh *simMutexHarness) sessionCounts() (sections, losses int) {
	for _, s := range mh.sections {
		if s.lease.session == "" {
			continue
		}
		sections++
		var lost *leaseLostError
		if errors.As(s.lease.Err(), &lost) && strings.Contains(lost.Reason, "its session was lost") {
			losses++
		}
	}
	return sections, losses
}

// simMutexSummary formats a failing schedule for a test log.
func (r simMutexResult) String() string {
	return fmt.Sprintf("%s\n  trace (last %d events):\n    %s", strings.Join(r.violations, "\n  "), simTraceLen, strings.Join(r.trace, "\n    "))
}
