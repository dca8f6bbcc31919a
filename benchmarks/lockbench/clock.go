package lockbench

import (
	"context"
	"time"

	"golang.org/x/sys/unix"
)

// Every time the harness records is a reading of CLOCK_MONOTONIC, in
// nanoseconds. All contender processes run on one machine, where
// CLOCK_MONOTONIC is one clock shared by every process (it counts from boot,
// does not jump when the wall clock is set, and is read by all processes
// from the same kernel source), so a release read in one process and an
// acquisition read in another can be subtracted. Go's own monotonic
// readings (time.Now's) are offsets from a per-process base and cannot be
// compared across processes, hence this.

// mono returns CLOCK_MONOTONIC in nanoseconds.
func mono() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		// CLOCK_MONOTONIC is always available on Linux; a failure here
		// would make every figure meaningless.
		panic("lockbench: clock_gettime(CLOCK_MONOTONIC): " + err.Error())
	}
	return ts.Nano()
}

// sleepUntil waits until CLOCK_MONOTONIC reads at least at, or ctx ends.
func sleepUntil(ctx context.Context, at int64) error {
	for {
		d := time.Duration(at - mono())
		if d <= 0 {
			return nil
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}
