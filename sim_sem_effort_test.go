//go:build go1.25

package spanmutex

import "time"

// Effort in the Semaphore's simulation (inv S8): as inv12 in the Lock's
// (sim_effort_test.go), no process makes more Spanner calls in one
// virtual second than waitEffort per contender plus holdEffort. A waiter
// that retried failed renewals of its entry without a pause, as one once
// did (issue 41, fault 3), breaks it.

// semEffort is a process's count of Spanner calls per effortWindow, and
// its bound, under the process's mu.
type semEffort struct {
	simEffort
	bound int
}

// countCall counts one Spanner call of p now and checks inv S8.
func (p *semProc) countCall() {
	w := int64(time.Since(p.h.start) / effortWindow)
	p.mu.Lock()
	e := &p.effort
	if w != e.win {
		e.win, e.n = w, 0
	}
	e.n++
	e.max = max(e.max, e.n)
	over := e.bound > 0 && e.n > e.bound && !e.reported
	e.reported = e.reported || over
	n := e.n
	p.mu.Unlock()
	if over {
		p.h.mu.Lock()
		p.h.violateLocked("inv S8: %s made %d Spanner calls in the virtual second from %v (bound %d: waitEffort per contender, and holdEffort)",
			p.name, n, time.Duration(w)*effortWindow, e.bound)
		p.h.mu.Unlock()
	}
}
