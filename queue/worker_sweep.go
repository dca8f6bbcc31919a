package queue

import (
	"time"

	"github.com/spanmutex/spanmutex/internal/defaults"
)

// maxSweepEvery caps the sweep interval learned from the holders' leases,
// so that one holder with a long lease does not delay the recovery of the
// claims of others: a quarter of spanmutex's default lease.
const maxSweepEvery = defaults.Lease / 4

// sweepEvery is how long Run lets pass between sweeps: a quarter of the
// longest lease the holders of the resources this worker was refused had
// still to run (HeldError.LeaseLeft: the lease they declare, less at most
// a third, as they renew every third of it), at most maxSweepEvery, and
// at least the maximum poll interval (also before any refusal). A dead
// worker's claim can be taken over only once its lease has run; a sweep a
// quarter lease apart finds it at most that late, while an idle worker
// reads the whole pending index a few times a lease rather than every
// poll. It is safe to call while Run runs.
func (w *Worker) sweepEvery() time.Duration {
	return max(w.cfg.maxPoll, min(time.Duration(w.leaseSeen.Load())/4, maxSweepEvery))
}

// noteLease records the lease a refused TryLock reported its holder had
// still to run.
func (w *Worker) noteLease(left time.Duration) {
	if left > time.Duration(w.leaseSeen.Load()) {
		w.leaseSeen.Store(int64(left))
	}
}

// skipLine is where a pass between sweeps starts to read the pending index:
// every entry before at is of a resource that the passes since the last
// one from the start passed over (in progress, or refused until later), and
// count is how many entries lie before at. The zero skipLine is the start
// of the queue. A resource with entries on both sides of the line is tried
// again if its first entry after it calls for it: its requests before the
// line may be done by now, its holder gone.
type skipLine struct {
	at    line
	count int
}

// passState is what a pass knows of the resources it met.
type passState struct {
	sweep bool
	// tried holds the resources the pass tried or passed over; passed
	// those of them it passed over: in progress between sweeps, or refused
	// until later (refusedUntil).
	tried, passed map[string]bool
	// line is how far every entry from the pass's start, and before it,
	// was passed over; clear reports that no entry the pass met so far
	// stopped it.
	line  skipLine
	clear bool
}

// newPassState starts a pass at the worker's skip line, or at the start of
// the queue if sweep.
func (w *Worker) newPassState(sweep bool) *passState {
	if sweep {
		w.behind = skipLine{}
	}
	return &passState{sweep: sweep, tried: map[string]bool{}, passed: map[string]bool{}, line: w.behind, clear: true}
}

// pass marks resource passed over.
func (s *passState) pass(resource string) { s.tried[resource], s.passed[resource] = true, true }

// advance moves the line over the entries of page, in order, as long as
// each is of a resource the pass passed over. A page read again (tryPage's
// reread) is walked again harmlessly: a reread follows a held resource,
// which stopped the line.
func (s *passState) advance(page []pendingEntry) {
	for _, e := range page {
		if !s.clear || !s.passed[e.resource] {
			s.clear = false
			return
		}
		s.line = skipLine{at: line{since: e.since, id: e.id}, count: s.line.count + 1}
	}
}

// endPass keeps where the next pass between sweeps starts: the line the
// pass reached, or the start of the queue if it did any work (what it did
// may have freed what others passed over).
func (w *Worker) endPass(s *passState, worked bool) {
	if worked {
		w.behind = skipLine{}
		return
	}
	w.behind = s.line
}
