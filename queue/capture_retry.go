package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/spanmutex/spanmutex"
	"github.com/spanmutex/spanmutex/internal/defaults"
)

// DefaultCaptureMaxFailures is how many Spanner calls of one loop of a Run
// (starting, listing and claiming partitions, reading one partition) may
// fail in a row before Run gives up with an error matching
// spanmutex.ErrOutage.
const DefaultCaptureMaxFailures = 10

// The pace of a capture's failed calls: each loop of a Run backs off
// exponentially, from captureInitialBackOff to captureMaxBackOff (the
// library's defaults, randomised by half), and starts again from the
// shortest after a call that succeeds. With the defaults, DefaultCapture-
// MaxFailures failures in a row take about 10 s, and a failing loop makes
// at most 1/captureInitialBackOff = 10 calls a second, about 1 a
// second once it has failed six times; Run's listing never more often than
// its poll interval.
const (
	captureInitialBackOff = defaults.InitialBackOff
	captureMaxBackOff     = defaults.MaxBackOff
)

// captureAttempts counts and paces the failed Spanner calls of one loop of
// a Run: Run's start, its listing and claiming, or one partition's read.
// Not safe for concurrent use: each loop has its own.
type captureAttempts struct {
	what string // the loop, for errors
	max  int
	bo   backoff.BackOff
	n    int // failures in a row
}

// newAttempts returns the counters of one loop of a Run.
func (c *Capture) newAttempts(what string) *captureAttempts {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = captureInitialBackOff
	b.MaxInterval = captureMaxBackOff
	b.RandomizationFactor = 0.5
	b.Multiplier = 1.6
	b.MaxElapsedTime = 0 // the count bounds the retries
	b.Reset()            // NewExponentialBackOff reset to its own 500 ms first interval
	n := c.cfg.maxFails
	if n <= 0 { // a Capture not made by NewCapture (the simulation's)
		n = DefaultCaptureMaxFailures
	}
	if c.cfg.backOff != nil { // the simulation's: its draws from the seed
		return &captureAttempts{what: what, max: n, bo: c.cfg.backOff(what)}
	}
	return &captureAttempts{what: what, max: n, bo: b}
}

// ok records a call that succeeded: the count and the backoff start again.
func (a *captureAttempts) ok() {
	a.n = 0
	a.bo.Reset()
}

// count records a call that failed with err, and returns the wait before
// the next try, or the error the loop ends with: err itself if it is not
// worth another try (captureRetryable), or an error matching
// spanmutex.ErrOutage and wrapping err once max calls failed in a row.
func (a *captureAttempts) count(ctx context.Context, err error) (time.Duration, error) {
	if ctx.Err() != nil {
		return 0, ctx.Err()
	}
	if !captureRetryable(ctx, err) {
		return 0, err
	}
	if a.n++; a.n >= a.max {
		return 0, &captureOutageError{what: a.what, failures: a.n, err: err}
	}
	return a.bo.NextBackOff(), nil
}

// failed is count, then the wait: it returns nil to try again, ctx's error
// if ctx ended while waiting, or count's error.
func (a *captureAttempts) failed(ctx context.Context, err error) error {
	wait, err := a.count(ctx, err)
	if err != nil {
		return err
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// captureOutageError ends a Run whose loop failed max times in a row. It
// matches spanmutex.ErrOutage and unwraps to the last failure.
type captureOutageError struct {
	what     string
	failures int
	err      error
}

func (e *captureOutageError) Error() string {
	return fmt.Sprintf("queue: capture: %s: %d Spanner calls in a row failed; giving up (the checkpoints hold where each partition stands): %v",
		e.what, e.failures, e.err)
}

// Unwrap returns spanmutex.ErrOutage and the last failure.
func (e *captureOutageError) Unwrap() []error { return []error{spanmutex.ErrOutage, e.err} }

// isOutage reports whether err ends a Run for too many failures in a row.
func isOutage(err error) bool {
	var o *captureOutageError
	return errors.As(err, &o)
}
