//go:build go1.25

package spanmutex

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// The operator in the Mutex's simulation: in one schedule in three that
// is not calm, it calls Reset (`spanmutex reset`) one to three times
// while the chaos lasts, from a process of its own that is never paused,
// crashed or partitioned (its calls do meet the schedule's faults). Reset
// decides on Spanner's clock in its transaction: it refuses a live holder
// (inv1 catches one it cut off: "a reset took the row from a section that
// runs with an unlapsed lease"), a DONE row and a missing one, and
// re-arms a FAILED or NEEDED row, or a STARTED one whose holder went
// silent past its lease, whose Runs may then run the section again and
// whose watchers it wakes. In half the schedules with an operator, it also
// calls ForceReset once, at a time of its own: that resets a STARTED row
// whatever its holder's lease, and the checker then holds it to
// ForceReset's contract instead of inv1's: the token written is past the
// evicted holder's, and no write of the evicted lease commits after it
// (the evicted section may run on until its next renewal fails, and is no
// longer counted by inv1). The operator's draws come from streams of
// their own, so that schedules without it stay those their seeds named
// before it, and those with Reset alone stay those they were before
// ForceReset was drawn.

// simResetSalt seeds the operator's stream; simForceSalt its ForceReset's.
const (
	simResetSalt = 0x0e5e7
	simForceSalt = 0x0f5e7
)

// startOperator starts the operator if the schedule draws one.
func (mh *simMutexHarness) startOperator() {
	r := rand.New(rand.NewPCG(mh.seed, simResetSalt))
	if mh.par.calm || r.IntN(3) != 0 {
		return
	}
	mh.resets = true
	h := mh.h
	p := &simProc{h: h, name: "OP", slot: -1, simLife: newSimLife(), seed: r.Uint64(), lease: mh.par.lease}
	p.ctx, p.kill = context.WithCancel(context.Background())
	p.clk = &simClock{p: p, rate: 1, start: h.start}
	p.scope = NewScope(WithoutWakeUps())
	p.scope.id = fmt.Sprintf("op-%06x", r.IntN(1<<24))
	at := make([]time.Duration, 1+r.IntN(3))
	for i := range at {
		at[i] = time.Duration(r.Int64N(int64(mh.par.chaos)))
	}
	slices.Sort(at)
	h.event("OP", "will reset at %v", at)
	m := mh.newMutex(p, "")
	mh.operate(p, "reset", at, "Reset", m.Reset)
	f := rand.New(rand.NewPCG(mh.seed, simForceSalt))
	if f.IntN(2) != 0 {
		return
	}
	force := time.Duration(f.Int64N(int64(mh.par.chaos)))
	h.event("OP", "will force a reset at %v", force)
	mh.operate(p, "forcereset", []time.Duration{force}, "ForceReset", m.ForceReset)
}

// operate makes the operator's process p call reset (named what) at each
// virtual time of at in turn, the i-th in the turn keyed {"OP", key, i},
// each within the finish timeout, and records what each returned.
func (mh *simMutexHarness) operate(p *simProc, key string, at []time.Duration, what string, reset func(context.Context) (ResetResult, error)) {
	h := mh.h
	mh.running.Add(1)
	go func() {
		defer mh.running.Done()
		for i, t := range at {
			time.Sleep(time.Until(h.start.Add(t)))
			h.sched.turn(simKey{"OP", key, int64(i), 0})
			ctx, cancel := context.WithTimeout(p.ctx, mh.par.finish)
			res, err := reset(ctx)
			cancel()
			h.event("OP", "%s: %+v, %s", what, res, errShort(err))
		}
	}()
}
