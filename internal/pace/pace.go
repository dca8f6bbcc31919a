// Package pace waits, once for every package of spanmutex: a wait that a
// context cuts short.
package pace

import (
	"context"
	"time"
)

// Sleep waits d, or until ctx ends, and then returns ctx.Err().
func Sleep(ctx context.Context, d time.Duration) error {
	return SleepOn(ctx, realTimer, d)
}

// SleepOn is Sleep on a timer that newTimer makes (a simulated clock's, in
// the simulation): newTimer returns the timer's channel and its stop.
func SleepOn(ctx context.Context, newTimer func(time.Duration) (<-chan time.Time, func() bool), d time.Duration) error {
	c, stop := newTimer(d)
	defer stop()
	select {
	case <-c:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// realTimer is a timer of the real clock.
func realTimer(d time.Duration) (<-chan time.Time, func() bool) {
	t := time.NewTimer(d)
	return t.C, t.Stop
}
