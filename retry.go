// Retrying: the limits on retries (WithMaxAttempts for a section's starts,
// WithMaxFailures for failed Spanner calls in a row), the backoff between
// tries (WithBackOff) and the jitter before a takeover (WithJitter), and the
// counters that apply them to one call. Which errors are worth another try
// is internal/spanerr's.

package spanmutex

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/spanmutex/spanmutex/internal/spanerr"
)

// attempts counts the Spanner calls of one kind (reads, or writes) that
// failed in a row during one Run, Lock or TryLock call, and paces their
// retries with the call's backoff; MaxFailures bounds the count. The Mutex
// and the Lock share it, so that both give up the same way.
type attempts struct {
	name string
	max  int
	clk  clock
	bo   backoff.BackOff // shared by the kinds of one call
	log  *slog.Logger
	n    int
	// sleep, if set, waits out a pause in place of the clock alone: a
	// Lock's waiter ends it early when the lock is handed to it, so that
	// it never backs off holding a lease.
	sleep func(ctx context.Context, d time.Duration) error
}

// newAttempts returns counters for the calls of one Run, Lock or TryLock
// call, one per kind, sharing one backoff.
func (c *config) newAttempts(name string, kinds int) []*attempts {
	bo := c.newBackOff()
	out := make([]*attempts, kinds)
	for i := range out {
		out[i] = &attempts{name: name, max: c.maxFailures, clk: c.clock, bo: bo, log: c.logger}
	}
	return out
}

// ok records a call that succeeded: the count starts again.
func (a *attempts) ok() { a.n = 0 }

// failed records that a call failed with err and, if another try is worth
// it, waits before it (at most limit, when limit > 0). It returns nil to go
// on, or the error the caller ends with: errors.Join(ErrNotObtained,
// ctx.Err()) once ctx has ended; err itself when it is not worth another
// try (see spanerr.Retryable); an error matching ErrOutage once max calls in a row
// failed or the backoff policy stopped their retries.
func (a *attempts) failed(ctx context.Context, err error, limit time.Duration) error {
	if ctx.Err() != nil {
		return notObtained(ctx, err)
	}
	if !spanerr.Retryable(err) {
		return err
	}
	if a.n++; a.n >= a.max {
		return &outageError{Name: a.name, Failures: a.n, MaxFailures: a.max, Err: err}
	}
	a.log.Warn("Spanner call failed; backing off", "err", err, "failures", a.n)
	perr := pauseWith(ctx, a.clk, a.bo, limit, a.sleep)
	if errors.Is(perr, errBackOffStopped) {
		return &outageError{Name: a.name, Failures: a.n, MaxFailures: a.max, BackOffStopped: true, Err: err}
	}
	return a.settled(ctx, perr)
}

// pause waits for the backoff's next interval (at most limit, when limit >
// 0), between reads of a section or lock held elsewhere. It returns nil to
// go on, errors.Join(ErrNotObtained, ctx.Err()) once ctx has ended, or an
// error matching ErrAttemptsExhausted if the backoff policy stopped.
func (a *attempts) pause(ctx context.Context, limit time.Duration) error {
	err := pauseWith(ctx, a.clk, a.bo, limit, a.sleep)
	if errors.Is(err, errBackOffStopped) {
		return &exhaustedError{Name: a.name, Attempts: int64(a.n), MaxAttempts: a.max, LastError: "the backoff policy stopped", Err: err}
	}
	return a.settled(ctx, err)
}

// settled turns the error of a wait into the one the caller ends with.
func (a *attempts) settled(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	return notObtained(ctx, err)
}

// WithMaxAttempts sets how many times the section may be started across all
// processes in one generation of the row (a generation starts when the row
// is created or goes stale; default 3, at least 1). Failed
// Spanner calls are bounded by WithMaxFailures.
func WithMaxAttempts(n int) MutexOption {
	return mutexOption(func(c *config) { c.maxAttempts = n })
}

// WithMaxFailures sets how many Spanner calls of one kind (reads, or
// writes) may fail in a row, each retried after a backoff (WithBackOff),
// before Run, Lock or TryLock gives up with an error matching ErrOutage (default
// 3, at least 1). Each failed call takes up to its
// timeout (WithFinishTimeout) when Spanner does not answer, and each retry
// waits up to the backoff's maximum (WithBackOff), so a wait notices an
// outage within about MaxFailures times their sum. Errors that another try cannot mend,
// such as a missing table, end the call at once.
func WithMaxFailures(n int) LeaseOption {
	return leaseOption(func(c *config) { c.maxFailures = n })
}

// WithJitter sets the fraction of the lease, in [0, 1), from which each
// Run, Lock or TryLock call draws the extra wait it adds before taking over
// from a silent holder (default 0.2).
func WithJitter(fraction float64) LeaseOption {
	return leaseOption(func(c *config) { c.jitter = fraction })
}

// WithBackOff sets how the waits grow between retries of a failed Spanner
// call, and between a Mutex's reads while another process runs the
// section; newBackOff is called once per Run, Lock, TryLock, Unlock or
// Observe call (default: exponential from 100ms to
// 2s, randomised by half). A backoff.Stop from it ends the
// call with ErrAttemptsExhausted.
func WithBackOff(newBackOff func() backoff.BackOff) LeaseOption {
	return leaseOption(func(c *config) { c.newBackOff = newBackOff })
}

func defaultBackOff() backoff.BackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = defaultInitialBackOff
	b.MaxInterval = defaultMaxBackOff
	b.Multiplier = 1.6
	b.RandomizationFactor = 0.5
	b.MaxElapsedTime = 0 // Run's ctx and MaxAttempts bound the waiting
	b.Reset()            // NewExponentialBackOff reset to its own 500 ms first interval
	return b
}
