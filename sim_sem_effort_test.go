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
	over, n := p.effort.add(w, p.effort.bound)
	p.mu.Unlock()
	if over {
		p.h.mu.Lock()
		p.h.violateLocked("%s", effortViolation("inv S8", p.name, n, w, p.effort.bound))
		p.h.mu.Unlock()
	}
}
