//go:build go1.25

package queue

import (
	"math/rand/v2"
	"time"
)

// Effort in the capture's simulation: no goroutine of a Capture's Run (its
// loop that starts, lists and claims partitions, "run", or one partition's
// reader) makes more Spanner calls in one virtual second than its pace
// allows (Capture.Run's doc, capture_retry.go): the loop lists every poll
// interval and at once when a partition it read finished, and claims what
// it lists; a reader queries once per query window and checkpoints once
// per batch, per window with records, or per quarter lease; failing calls
// back off from captureInitialBackOff. A loop that retried a failing call
// without a pause (issue 41, fault 9) breaks it at once.

// capEffortWindow is the span over which a goroutine's calls are counted.
const capEffortWindow = time.Second

// capEffort counts one goroutine's calls in the current window.
type capEffort struct {
	win      int64
	n        int
	reported bool
}

// capEffortBound bounds the calls of goroutine of a Run in a window:
// for the loop, a listing each poll interval, one more after each of the
// (at most 5) partitions finishing, and a claim of each of them; for a
// reader, two queries each query window (one cut short by a failure, and
// its retry), a checkpoint for each record (batch 1) and each window, and
// the backoff's first retries; twice over, for calls that straddle.
func (c *Capture) capEffortBound(goroutine string, records int) int {
	perWindow := int(capEffortWindow / c.cfg.poll)
	retries := int(capEffortWindow / (captureInitialBackOff / 2))
	if goroutine == "run" {
		return 2 * (perWindow + 5 + 5 + retries)
	}
	queries := int(capEffortWindow / c.cfg.window)
	return 2 * (2*queries + queries + records + retries)
}

// countCall counts a call of goroutine now and checks its bound (w.mu
// held). It reports whether the goroutine went over it in this window:
// the call is then held back to the window's end (throttled), so that a
// loop spinning at one virtual instant lets time, and the schedule, go on.
func (s *simCapStore) countCall(goroutine string) (over bool) {
	w := s.w
	win := int64(time.Since(w.start) / capEffortWindow)
	e := s.effort[goroutine]
	if e == nil {
		e = &capEffort{}
		s.effort[goroutine] = e
	}
	if e.win != win {
		e.win, e.n = win, 0
	}
	e.n++
	if e.n > w.counts.maxEffort {
		w.counts.maxEffort = e.n
	}
	records := 0
	if p := w.parts[goroutine]; p != nil {
		records = len(p.records)
	}
	bound := s.c.capEffortBound(goroutine, records)
	if e.n > bound && !e.reported {
		e.reported = true
		w.violate("effort: %s/%d's %s made %d Spanner calls in the virtual second from %v (bound %d)",
			s.c.cfg.owner, s.life, goroutine, e.n, time.Duration(win)*capEffortWindow, bound)
	}
	return e.n > bound
}

// reaches counts a call of goroutine (throttled if over its bound) and
// reports whether it reaches Spanner: not while an outage cuts the instance
// off (w.mu held, and held again on return).
func (s *simCapStore) reaches(goroutine string) bool {
	if s.countCall(goroutine) {
		s.w.mu.Unlock()
		s.throttle(goroutine)
		s.w.mu.Lock()
	}
	return !s.cutOff()
}

// throttle holds a call of goroutine that went over its bound back to the
// end of the window, then takes a turn.
func (s *simCapStore) throttle(goroutine string) {
	w := s.w
	end := w.start.Add((time.Since(w.start)/capEffortWindow + 1) * capEffortWindow)
	time.Sleep(time.Until(end))
	w.sched.turn(s.key(goroutine, "throttled", end.UnixNano()))
}

// capOutage cuts an instance off from Spanner from from to to (since the
// schedule's start): each of its calls fails Unavailable, so that a loop
// that retried a failing call without a pause is seen.
type capOutage struct {
	instance string
	from, to time.Duration
}

// capOutageSalt seeds the outages' stream: schedules without outages stay
// those their seeds named before them.
const capOutageSalt = 0x0a7a6e

// drawOutages draws, in one schedule in three, an outage of half a second
// to two and a half before the horizon: shorter than the
// DefaultCaptureMaxFailures failures in a row that end a Run, which the
// backoff spreads over 4.1 s at the least. Faults drawn per call may add
// to an outage's failures until a reader meets the limit; the checker
// then accepts the Run's ErrOutage (simCapStore.mayGiveUp), and only
// then.
func (w *simCapWorld) drawOutages(ids []string) {
	r := rand.New(rand.NewPCG(w.seed, capOutageSalt))
	if r.IntN(3) != 0 {
		return
	}
	o := capOutage{instance: ids[r.IntN(len(ids))], from: time.Duration(r.Int64N(int64(w.horizon.Sub(w.start))))}
	o.to = o.from + 500*time.Millisecond + time.Duration(r.Int64N(int64(2*time.Second)))
	w.outages = append(w.outages, o)
	w.logf("outage of %s from %v to %v", o.instance, o.from, o.to)
}

// cutOff reports whether the instance is cut off now (w.mu held).
func (s *simCapStore) cutOff() bool {
	at := time.Since(s.w.start)
	for _, o := range s.w.outages {
		if o.instance == s.c.cfg.owner && at >= o.from && at < o.to {
			return true
		}
	}
	return false
}
