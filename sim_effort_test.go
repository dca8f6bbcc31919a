//go:build go1.25

package spanmutex

import (
	"fmt"
	"time"
)

// Effort (inv12): how hard a process works while it waits or holds. Every
// loop of the library that calls Spanner is paced (a poll, a renewal
// interval, a backoff: the constants of lock_poll.go and retry.go, and
// waitEffort, the bound they add up to); a call that goes round without a
// pause, as a waiter that returned to a spent hand-off every turn once did
// (issue 41), shows as a burst of Spanner calls in one virtual second,
// which no amount of chaos excuses.

// effortWindow is the span over which a process's Spanner calls are
// counted.
const effortWindow = time.Second

// holdEffort is what a process's held leases and detached calls add to
// its contenders' waitEffort in one effortWindow: renewals every third of
// a lease (at least 250ms in the simulation: 12 a second) for each of two
// leases, and an Unlock's or a leave's retries.
const holdEffort = 40

// runEffort is waitEffort's counterpart for one Run call of a Mutex:
// reads of a section held elsewhere paced by the backoff (at least half
// of defaultInitialBackOff apart: 20 a second), and retries of failed
// calls, as paced.
const runEffort = 40

// simEffort counts a process's Spanner calls in the current window.
type simEffort struct {
	win      int64 // the window's index since the schedule's start
	n, max   int
	maxWin   int64 // the busiest window so far
	reported bool
}

// add counts one call in window w and reports whether it is the first to
// go over bound (0: unchecked), and the window's count.
func (e *simEffort) add(w int64, bound int) (over bool, n int) {
	if w != e.win {
		e.win, e.n = w, 0
	}
	e.n++
	if e.n > e.max {
		e.max, e.maxWin = e.n, w
	}
	over = bound > 0 && e.n > bound && !e.reported
	e.reported = e.reported || over
	return over, e.n
}

// effortViolation is the message of a process that went over its bound.
func effortViolation(inv, name string, n int, w int64, bound int) string {
	return fmt.Sprintf("%s: %s made %d Spanner calls in the virtual second from %v (bound %d: waitEffort per contender, and holdEffort)",
		inv, name, n, time.Duration(w)*effortWindow, bound)
}

// countCall counts one Spanner call of p at the current virtual time and
// checks inv12.
func (p *simProc) countCall() {
	w := int64(time.Since(p.h.start) / effortWindow)
	p.mu.Lock()
	over, n := p.effort.add(w, p.effortBound)
	p.mu.Unlock()
	if over {
		p.h.mu.Lock()
		p.h.violateLocked("%s", effortViolation("inv12", p.name, n, w, p.effortBound))
		p.h.mu.Unlock()
	}
}

// busiest returns the most Spanner calls p made in one window.
func (p *simProc) busiest() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.effort.max
}
