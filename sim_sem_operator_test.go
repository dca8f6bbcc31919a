//go:build go1.25

package spanmutex

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// The operator in the Semaphore's simulation: in one schedule of a
// Semaphore in three that is not calm, it resizes the semaphore once to
// three times while the chaos lasts (Semaphore.Resize, as `spanmutex
// resize` does), to a size of 1 to 4 it draws, from a process of its own
// that is never paused or crashed (its calls do meet the schedule's
// faults). A contender whose Acquire then ends with a *SizeMismatchError
// is redeployed with the stored size, as a rolling update would do; a
// waiter that asks for more permits than the new size must end so (issue
// 41, fault 2), not wait for ever: the schedule's bound (stuck) and inv S8
// catch one that does. Its draws come from a stream of their own, so that
// schedules without an operator stay those their seeds named before it.

// semOperatorSalt seeds the operator's stream.
const semOperatorSalt = 0x0e7a70

// startOperator starts the operator if the schedule draws one.
func (h *semSim) startOperator() {
	r := rand.New(rand.NewPCG(h.seed, semOperatorSalt))
	if h.par.rw || h.par.calm || r.IntN(3) != 0 {
		return
	}
	p := &semProc{h: h, name: "OP", seed: r.Uint64(), simLife: newSimLife(), rate: 1, lease: h.par.lease}
	p.ctx, p.kill = context.WithCancel(context.Background())
	p.scope = NewScope(WithoutWakeUps())
	p.scope.id = fmt.Sprintf("op-%06x", r.IntN(1<<24))
	p.effort.bound = waitEffort + holdEffort
	resizes := 1 + r.IntN(3)
	at := make([]time.Duration, resizes)
	for i := range at {
		at[i] = time.Duration(r.Int64N(int64(h.par.bound / 3)))
	}
	sizes := make([]int64, resizes)
	for i := range sizes {
		sizes[i] = 1 + r.Int64N(4)
	}
	h.mu.Lock()
	h.eventLocked("OP", "will resize at %v to %v", at, sizes)
	h.mu.Unlock()
	h.running.Add(1)
	go func() {
		defer h.running.Done()
		p.operate(at, sizes)
	}()
}

// operate resizes to sizes[i] at virtual time at[i] from the schedule's
// start (at sorted).
func (p *semProc) operate(at []time.Duration, sizes []int64) {
	h := p.h
	slices.Sort(at)
	for i := range at {
		wait := at[i] - time.Since(h.start)
		if p.sleep(max(wait, 0), fmt.Sprintf("resize %d", i)) != nil {
			return
		}
		s := h.newSemaphore(p, 90+i, sizes[i])
		err := s.Resize(p.ctx)
		h.event("OP", "RESIZED to %d: %v", sizes[i], err)
	}
}

// redeploy returns the Semaphore a contender uses after its Acquire ended
// with err: one of the stored size if err is a *SizeMismatchError, else s.
func (h *semSim) redeploy(p *semProc, i int, s *Semaphore, err error) *Semaphore {
	var sme *SizeMismatchError
	if !errors.As(err, &sme) {
		return s
	}
	h.event(fmt.Sprintf("%s/c%d", p.name, i), "redeployed with size %d (was %d)", sme.Stored, s.size)
	return h.newSemaphore(p, i, sme.Stored)
}
