//go:build go1.25

package spanmutex

// The fault seam of the simulations: what can happen to one simulated
// Spanner call, how it is drawn, and the call that the Lock's store
// (simConn) and the Mutex's (simMutexConn) both go through. The
// Semaphore's store (semProc.call) draws its faults here too, but narrows
// and injects them its own way (see there). See doc/simulation.md,
// "Adding a fault".

import (
	"context"
	"math/rand/v2"
	"time"

	"cloud.google.com/go/spanner"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// simFault is what happens to one call.
type simFault int

const (
	faultNone   simFault = iota
	faultBefore          // fails before reaching Spanner (Unavailable): nothing applied
	faultAbort           // a read-write transaction aborted (Aborted): nothing applied
	faultLost            // applied, but the answer is lost (DeadlineExceeded or Unavailable)
)

// errSimCrashed is what a call of a crashed process returns.
var errSimCrashed = status.Error(codes.Unavailable, "sim: process crashed")

// ctxError is the error a Spanner call returns when its ctx ended.
func ctxError(ctx context.Context) error { return spanner.ToSpannerError(ctx.Err()) }

// drawSimFault draws the fault of one call from draw(drawFaults): none
// with probability 1-rate, else before, abort or lost, a third each. The
// store then narrows it to what the call can meet (forCall, or the
// Semaphore's own rule).
func drawSimFault(draw func(salt uint64) *rand.Rand, rate float64) simFault {
	if rate == 0 {
		return faultNone
	}
	r := draw(drawFaults)
	if r.Float64() >= rate {
		return faultNone
	}
	return []simFault{faultBefore, faultAbort, faultLost}[r.IntN(3)]
}

// forCall narrows a drawn fault to what a call of the Lock's or the
// Mutex's store can meet: an abort only where the client does not retry
// it (aborts), else it counts as a lost answer for a write and a failure
// before Spanner for a read; a lost answer only for a write.
func (f simFault) forCall(write, aborts bool) simFault {
	switch {
	case f == faultAbort && aborts:
		return faultAbort
	case (f == faultAbort || f == faultLost) && write:
		return faultLost
	case f == faultAbort || f == faultLost:
		return faultBefore
	}
	return f
}

// partitioned is f for a call of a process partitioned from Spanner (cut):
// it fails before Spanner, or, when the partition is lossy, a write
// reaches Spanner and loses its answer.
func (f simFault) partitioned(cut, lossy, write bool) simFault {
	switch {
	case cut && lossy && write:
		return faultLost
	case cut:
		return faultBefore
	}
	return f
}

// drawFault draws what happens to one call of p's.
func (p *simProc) drawFault(write, aborts bool) simFault {
	if p.h.chaosOver.Load() {
		return faultNone
	}
	return drawSimFault(p.draw, p.h.par.faultRate).forCall(write, aborts)
}

// simSpanner is a simulated database as spannerCall sees it: the Lock's
// simDB and the Mutex's simMutexDB.
type simSpanner interface {
	// track notes that a call of p starts (+1) or ends (-1).
	track(p *simProc, delta int)
	// forced is the fault a scripted schedule puts on p's call op, if
	// any (ok false leaves the draw).
	forced(p *simProc, op string) (f simFault, ok bool)
	// commit runs fn atomically under the database's lock at the commit
	// instant, then the checker; it applies nothing if p crashed.
	commit(p *simProc, f simFault, fn func() error) (applied bool, err error)
	// lostAnswer counts an answer lost.
	lostAnswer()
}

// spannerCall runs one Spanner call of p on db: the request's flight
// (latency), its fault (drawn, forced, or a partition's), fn applied by
// db.commit, the answer's flight, a pause as the answer arrives (in
// schedules with answer pauses), and the answer, or its loss. sent reports
// whether the request reached Spanner. aborts says whether the call may be
// aborted (a read-write transaction the client does not retry itself).
func (p *simProc) spannerCall(ctx context.Context, db simSpanner, who, op string, write, aborts bool, fn func() error) (sent bool, err error) {
	db.track(p, +1)
	defer db.track(p, -1)
	p.countCall()
	// The call's turns (sim_sched_test.go), keyed by who calls (the
	// contender or Run call its ctx serves, else the connection's owner),
	// its op and the instant it began: its request lands, its answer
	// arrives, a pause ends, each in the seed's order among what happens
	// at that instant.
	if w := simWhoOf(ctx); w != "" {
		who = w
	}
	start := simNow()
	key := func(what string) simKey { return simKey{p.name, who + " " + op + what, start, 0} }
	if err := p.gateTurn(key("/gate")); err != nil {
		return false, err
	}
	if err := p.sleepTurn(ctx, p.latency(), key("/apply")); err != nil {
		return false, err
	}
	f := p.drawFault(write, aborts)
	if ff, ok := db.forced(p, op); ok {
		f = ff
	}
	cut, lossy := p.partition()
	f = f.partitioned(cut, lossy, write)
	switch f {
	case faultBefore:
		p.h.event(p.name, "%s: unavailable (not applied)", op)
		return false, status.Error(codes.Unavailable, "sim: unavailable")
	case faultAbort:
		p.h.event(p.name, "%s: aborted", op)
		return true, status.Error(codes.Aborted, "sim: aborted")
	}
	applied, err := db.commit(p, f, fn)
	if !applied {
		return false, err
	}
	if ferr := p.sleepTurn(ctx, p.latency()+p.slowAnswers, key("/answer")); ferr != nil {
		return true, ferr
	}
	if p.h.answerPauses && !p.h.chaosOver.Load() && p.draw(drawAnswerPause).IntN(50) == 0 {
		// The process stops just as the answer arrives (a GC pause, say):
		// it acts on the answer only after it resumes.
		p.pause(time.Duration(p.draw(drawAnswerPause + 1).Int64N(int64(3 * p.lease))))
	}
	if gerr := p.gateTurn(key("/resumed")); gerr != nil {
		return true, gerr
	}
	if f == faultLost {
		db.lostAnswer()
		p.h.event(p.name, "%s: answer lost (applied, err=%v)", op, err)
		if p.draw(drawLost).IntN(2) == 0 {
			return true, status.Error(codes.DeadlineExceeded, "sim: answer lost")
		}
		return true, status.Error(codes.Unavailable, "sim: answer lost")
	}
	return true, err
}
