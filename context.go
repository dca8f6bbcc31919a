package spanmutex

import (
	"context"
	"errors"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/spanmutex/spanmutex/internal/pace"
)

// detached returns a ctx for one Spanner call of a Lock or Run call whose
// own ctx is ctx: it ends detachGrace after ctx does, or after timeout,
// whichever is first. A request that the client gives up on may still run
// in Spanner after the client has put its session back in the pool; on the
// emulator it then ends whatever transaction the session's next user began
// ("Transaction not found", "Cannot read or query using a transaction after
// it has been committed or rolledback"). So calls are not abandoned the
// moment ctx ends: the caller's ctx is checked between them, and a call
// overruns it by one Spanner round trip, and by detachGrace at most.
func detached(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	octx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	stop := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(detachGrace, cancel)
		context.AfterFunc(octx, func() { t.Stop() })
	})
	return octx, func() { stop(); cancel() }
}

// finishWindow is how long a write that must not be lost (an Unlock, a
// Release) keeps trying: the finish timeout, or the rest of ctx's deadline
// if that is longer, or the lease if ctx has neither a deadline nor ended.
func (c *config) finishWindow(ctx context.Context) time.Duration {
	timeout := c.finishTimeout
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) > timeout {
		timeout = time.Until(dl)
	} else if !ok && ctx.Err() == nil {
		timeout = max(timeout, c.lease)
	}
	return timeout
}

// finishTries paces the tries of a write that must not be lost (an
// Unlock, a Release) within its finish window (finishWindow), and ends them
// with an outage once the window has passed.
type finishTries struct {
	name     string
	window   time.Duration
	clock    clock
	bo       backoff.BackOff
	failures int
}

// finishing returns the ctx the tries of such a write of name run under,
// which ends with the finish window even if ctx has ended already, and
// the tries' pacing.
func (c *config) finishing(ctx context.Context, name string) (context.Context, context.CancelFunc, *finishTries) {
	window := c.finishWindow(ctx)
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), window)
	return fctx, cancel, &finishTries{name: name, window: window, clock: c.clock, bo: c.newBackOff()}
}

// failed counts a try that failed with err, worth another try, and waits
// before the next; once the window (fctx, from finishing) has passed, or
// the backoff policy stops, it returns an outageError wrapping err: the
// write's outcome is then unknown.
func (f *finishTries) failed(fctx context.Context, err error) error {
	f.failures++
	perr := pauseWith(fctx, f.clock, f.bo, 0, nil)
	switch {
	case perr == nil:
		return nil
	case errors.Is(perr, errBackOffStopped):
		return &outageError{Name: f.name, Failures: f.failures, BackOffStopped: true, Err: err}
	}
	return &outageError{Name: f.name, Failures: f.failures, Window: f.window, Err: err}
}

// detachGrace bounds how long a Spanner call goes on after the ctx of the
// Lock or Run call that made it ended.
const detachGrace = 2 * time.Second

// errBackOffStopped is returned by pause when the backoff policy says Stop.
var errBackOffStopped = errors.New("spanmutex: the backoff policy stopped")

// pauseWith waits on clk for bo's next interval, capped at limit when limit >
// 0, or until ctx ends; with wait (not nil), wait does the waiting, and may
// end it early. It uses the local clock only to pace reads; it decides
// nothing.
func pauseWith(ctx context.Context, clk clock, bo backoff.BackOff, limit time.Duration, wait func(context.Context, time.Duration) error) error {
	d := bo.NextBackOff()
	if d == backoff.Stop {
		return errBackOffStopped
	}
	if limit > 0 && d > limit {
		d = limit
	}
	if wait != nil {
		return wait(ctx, d)
	}
	return pace.SleepOn(ctx, clk.NewTimer, d)
}
