package lockbench

import (
	"math"
	"slices"
	"time"

	"github.com/spanmutex/spanmutex/internal/bench"
)

// Result is what one run (one lock, one shape) measured, over every
// process's Lock calls merged on the shared CLOCK_MONOTONIC.
type Result struct {
	Kind     Kind
	Shape    Shape
	Hold     time.Duration
	Duration time.Duration

	// Acquisitions: Lock calls that returned holding the lock before the
	// drain ended; InWindow: those that returned within the window.
	Acquisitions, InWindow int
	Cancelled              int // Lock calls still waiting when the drain ended
	Errors                 int
	FirstError             string

	WaitP50, WaitP99 time.Duration // Lock called → Lock returned with the lock
	// Hand-offs: acquisitions whose Lock call was already waiting when the
	// previous holder called its release; the latency is from that release
	// call to this Lock returning. CrossProcess counts those whose previous
	// holder was another process.
	HandOffs, CrossProcess int
	HandOffP50, HandOffP99 time.Duration
	// LibHandedOff counts spanmutex leases whose Lease.HandedOff was set
	// (written in by the previous holder's Unlock).
	LibHandedOff int
	// UnlockP50: Unlock called → Unlock returned: for the Spanner locks,
	// the release's own commit.
	UnlockP50, UnlockP99 time.Duration
	// CommitLead is how far the run's last commit timestamps were ahead of
	// the local clock (the most of any process): on the emulator, how long
	// a strong read, or one as of the latest commit, waits at the window's end.
	CommitLead time.Duration
	// CycleP50: Lock call plus Unlock call, per acquisition.
	CycleP50 time.Duration

	// RPCs from the window's start until every process stopped.
	RPCs         int64
	RPCsByMethod map[string]int64
	// RPCsByOp counts them by the operation their Spanner tag names
	// (spanmutex tags every call), AbortedByOp those owed to aborts
	// (bench's AbortedAttempts).
	RPCsByOp, AbortedByOp map[string]int64

	FIFOViolations int
	// EntryOrderViolations (spanmutex): acquisitions granted before
	// another whose place in line (call.Entry) was fixed earlier by
	// Spanner's clock: the library's own FIFO order broken.
	EntryOrderViolations int
	// Mutual exclusion: Overlaps counts critical sections that found
	// another holder's marker; Lost, increments of the shared counter lost
	// (acquisitions − counter); ClockOverlaps, acquisitions that returned
	// before the previous holder (by the clock) had called its release;
	// TokenDisorder (Spanner locks), acquisitions whose token is not above
	// the previous one's.
	Overlaps, Lost, ClockOverlaps, TokenDisorder int
}

// PerSecond returns acquisitions within the window per second of it.
func (r Result) PerSecond() float64 { return float64(r.InWindow) / r.Duration.Seconds() }

// PerAcquisition returns n per acquisition (NaN if none).
func (r Result) PerAcquisition(n int64) float64 {
	if r.Acquisitions == 0 {
		return math.NaN()
	}
	return float64(n) / float64(r.Acquisitions)
}

// analyse merges the processes' results of one run.
func analyse(kind Kind, shape Shape, hold, window time.Duration, end int64, counter int64, results []lockResult) Result {
	r := Result{Kind: kind, Shape: shape, Hold: hold, Duration: window, RPCsByMethod: map[string]int64{},
		RPCsByOp: map[string]int64{}, AbortedByOp: map[string]int64{}}
	all := r.addProcesses(results)
	var acqs []call
	for _, c := range all {
		switch {
		case c.Acquired:
			acqs = append(acqs, c)
		case c.Cancelled:
			r.Cancelled++
		}
	}
	slices.SortFunc(acqs, func(a, b call) int { return cmpInt(a.Returned, b.Returned) })
	r.Acquisitions = len(acqs)
	l := r.addAcquisitions(kind, end, acqs)
	r.HandOffs = len(l.handOffs)
	r.Lost = r.Acquisitions - int(counter)
	r.WaitP50, _ = bench.Percentile(l.waits, 50)
	r.WaitP99, _ = bench.Percentile(l.waits, 99)
	r.HandOffP50, _ = bench.Percentile(l.handOffs, 50)
	r.HandOffP99, _ = bench.Percentile(l.handOffs, 99)
	r.UnlockP50, _ = bench.Percentile(l.unlocks, 50)
	r.UnlockP99, _ = bench.Percentile(l.unlocks, 99)
	r.CycleP50, _ = bench.Percentile(l.cycles, 50)
	r.FIFOViolations = fifoViolations(all, acqs)
	r.EntryOrderViolations = entryOrderViolations(acqs)
	return r
}

// addProcesses adds up into r the counts of every process's result (their
// operations, RPCs and errors, the first error, the longest commit lead)
// and returns the Lock calls of all of them.
func (r *Result) addProcesses(results []lockResult) []call {
	var all []call
	for _, pr := range results {
		all = append(all, pr.Calls...)
		for m, n := range pr.RPCs {
			r.RPCsByMethod[m] += n
			r.RPCs += n
		}
		for op, n := range pr.RPCsByOp {
			r.RPCsByOp[op] += n
		}
		for op, n := range pr.AbortedByOp {
			r.AbortedByOp[op] += n
		}
		r.Errors += pr.Errors
		r.CommitLead = max(r.CommitLead, pr.CommitLead)
		if r.FirstError == "" {
			r.FirstError = pr.FirstError
		}
	}
	return all
}

// latencies are the durations of a run's acquisitions, one per
// acquisition but for handOffs, one per hand-off.
type latencies struct {
	waits, unlocks, cycles, handOffs []time.Duration
}

// addAcquisitions goes through acqs, the run's acquisitions in the order
// their Lock calls returned: it counts into r those within the window
// (returned by end), the overlaps, hand-offs and disorders between each
// and the one before, and returns their latencies.
func (r *Result) addAcquisitions(kind Kind, end int64, acqs []call) latencies {
	var l latencies
	for i, a := range acqs {
		if a.Returned <= end {
			r.InWindow++
		}
		l.waits = append(l.waits, time.Duration(a.Returned-a.Called))
		l.unlocks = append(l.unlocks, time.Duration(a.Unlocked-a.Released))
		l.cycles = append(l.cycles, time.Duration(a.Returned-a.Called+a.Unlocked-a.Released))
		if a.Overlap {
			r.Overlaps++
		}
		if a.HandedOff {
			r.LibHandedOff++
		}
		if i == 0 {
			continue
		}
		prev := acqs[i-1]
		if a.Returned < prev.Released {
			r.ClockOverlaps++
		}
		if kind != Etcd && a.Token <= prev.Token {
			r.TokenDisorder++
		}
		if a.Called < prev.Released {
			l.handOffs = append(l.handOffs, time.Duration(a.Returned-prev.Released))
			if a.Proc != prev.Proc {
				r.CrossProcess++
			}
		}
	}
	return l
}

// fifoViolations counts the acquisitions made while another Lock call that
// began at least FIFOTolerance earlier was still waiting (it had neither
// returned nor been cancelled), across all processes.
func fifoViolations(all, acqs []call) int {
	byCalled := slices.Clone(all)
	slices.SortFunc(byCalled, func(a, b call) int { return cmpInt(a.Called, b.Called) })
	n := 0
	for _, a := range acqs {
		limit := a.Called - int64(FIFOTolerance)
		for _, b := range byCalled {
			if b.Called > limit {
				break
			}
			if b.Returned > a.Returned {
				n++
				break
			}
		}
	}
	return n
}

// entryOrderViolations counts the acquisitions granted (by token) before
// another acquisition whose Entry is strictly earlier: by Spanner's clock,
// that one was in line first. Acquisitions without an Entry are left out.
func entryOrderViolations(acqs []call) int {
	n := 0
	for _, a := range acqs {
		if a.Entry == 0 {
			continue
		}
		for _, b := range acqs {
			if b.Entry != 0 && b.Entry < a.Entry && b.Token > a.Token {
				n++
				break
			}
		}
	}
	return n
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
