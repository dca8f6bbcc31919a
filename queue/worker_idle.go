package queue

import (
	"context"
	"time"
)

// poller paces an idle worker's scans: min after work or a wake-up, then
// doubling up to max while scans find nothing. It reads the local clock
// only to pace reads; no ownership decision depends on it.
type poller struct {
	min, max, next time.Duration
}

func newPoller(min, max time.Duration) *poller { return &poller{min: min, max: max, next: min} }

// reset goes back to the shortest wait.
func (p *poller) reset() { p.next = p.min }

// wait returns the wait before the next scan, and doubles the one after.
func (p *poller) wait() time.Duration {
	d := p.next
	p.next = min(2*p.next, p.max)
	return d
}

// idle waits until the Queue is notified (woken closes), the poll interval
// passes, or ctx ends, and reports whether it was notified. A notification
// resets the poll interval.
func (w *Worker) idle(ctx context.Context, woken <-chan struct{}, p *poller) (notified bool) {
	t := time.NewTimer(p.wait())
	defer t.Stop()
	select {
	case <-woken:
		p.reset()
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}
