//go:build go1.25

package spanmutex

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Events of the Semaphore's simulation drawn from streams of their own, so
// that schedules without them stay those their seeds named before them.
//
// The operator: in one schedule of a Semaphore in three that is not calm,
// it resizes the semaphore one to three times while the chaos lasts
// (Semaphore.Resize, as `spanmutex resize` does), to a size of 1 to 4,
// from a process of its own that is never paused or crashed (its calls do
// meet the schedule's faults). A contender whose Acquire then ends with a
// *SizeMismatchError is redeployed with the stored size, as a rolling
// update would do; a waiter that asks for more permits than the new size
// must end so (issue 41, fault 2), not wait for ever: the schedule's bound
// (stuck) and inv S8 catch one that does.
//
// Outages: in one schedule in three that is not calm, processes are cut
// off from Spanner for a while (drawOutages).

// semOperatorSalt seeds the operator's stream.
const semOperatorSalt = 0x0e7a70

// startOperator starts the operator if the schedule draws one.
func (h *semSim) startOperator() {
	r := rand.New(rand.NewPCG(h.seed, semOperatorSalt))
	if h.par.rw || h.par.calm || r.IntN(3) != 0 {
		return
	}
	p := h.bareProc(-1)
	p.name, p.seed = "OP", r.Uint64()
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
	h.event(p.contender(i), "redeployed with size %d (was %d)", sme.Stored, s.size)
	return h.newSemaphore(p, i, sme.Stored)
}

// semOutage cuts the process in slot off from Spanner from from to to:
// each of its calls fails Unavailable before Spanner, as in a network
// partition; or, if denied, each of its writes fails PermissionDenied
// while its reads are served, as when a rollout takes the service
// account's write role away.
type semOutage struct {
	slot     int
	from, to time.Duration // since the schedule's start
	denied   bool
}

// semOutageSalt seeds the outages' stream.
const semOutageSalt = 0x0a7a6e

// drawOutages draws, in one schedule in three that is not calm, one to
// three outages while the chaos lasts, each of half a lease to four
// leases, half of them of writes only: long enough that a call that
// retries without pausing is seen (inv S8; issue 41, fault 3: a waiter
// whose entry renewals were denied retried at once, its reads served).
func (h *semSim) drawOutages() {
	r := rand.New(rand.NewPCG(h.seed, semOutageSalt))
	if h.par.calm || r.IntN(3) != 0 {
		return
	}
	for range 1 + r.IntN(3) {
		o := semOutage{slot: r.IntN(h.par.procs), from: time.Duration(r.Int64N(int64(h.par.bound / 3)))}
		o.to = o.from + h.par.lease/2 + time.Duration(r.Int64N(int64(7*h.par.lease/2)))
		o.denied = r.IntN(2) == 0
		h.outages = append(h.outages, o)
	}
	h.mu.Lock()
	h.eventLocked("sim", "outages %+v", h.outages)
	h.mu.Unlock()
}

// cutOff returns the error an outage makes p's call (a write if write)
// fail with at now, or nil.
func (h *semSim) cutOff(p *semProc, now time.Time, write bool) error {
	at := now.Sub(h.start)
	for _, o := range h.outages {
		switch {
		case o.slot != p.slot || at < o.from || at >= o.to:
		case !o.denied:
			return status.Error(codes.Unavailable, "sim: outage")
		case write:
			return status.Error(codes.PermissionDenied, "sim: writes denied")
		}
	}
	return nil
}
