package spanmutex_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/spanmutex/spanmutex"
	"github.com/spanmutex/spanmutex/emulator"
)

// A section that gave up after its last attempt is re-armed by Reset once
// its cause is fixed; the next Run starts it again, with a higher token.
func ExampleMutex_Reset() {
	ctx := context.Background()
	emu, err := emulator.Start(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer emu.Close()

	m, err := spanmutex.New(emu.Client(), "backfill", spanmutex.WithMaxAttempts(1))
	if err != nil {
		log.Fatal(err)
	}
	_, err = m.Run(ctx, func(context.Context, *spanmutex.Lease) error { return errors.New("quota exceeded") })
	fmt.Println(err)
	_, err = m.Run(ctx, func(context.Context, *spanmutex.Lease) error { return nil })
	fmt.Println(errors.Is(err, spanmutex.ErrAttemptsExhausted))

	res, err := m.Reset(ctx)
	fmt.Println(res.Before, res.Attempts, err)
	out, err := m.Run(ctx, func(_ context.Context, l *spanmutex.Lease) error {
		fmt.Println("runs again with token", l.Token())
		return nil
	})
	fmt.Println(out, err)
	// Output:
	// spanmutex: section "backfill" (token 1) failed: quota exceeded
	// true
	// FAILED 1 <nil>
	// runs again with token 2
	// Executed <nil>
}

// A holder that died with a long lease blocks its name until the lease
// runs out: Reset refuses it, ForceReset evicts it and bumps the token, so
// the next holder's token is above every write the dead one could fence.
func ExampleMutex_ForceReset() {
	ctx := context.Background()
	emu, err := emulator.Start(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer emu.Close()

	dead, err := spanmutex.NewLock(emu.Client(), "nightly", spanmutex.WithOwner("worker-7"), spanmutex.WithLease(time.Hour))
	if err != nil {
		log.Fatal(err)
	}
	if _, err := dead.Lock(ctx); err != nil { // and its process dies, holding
		log.Fatal(err)
	}
	m, err := spanmutex.New(emu.Client(), "nightly")
	if err != nil {
		log.Fatal(err)
	}
	_, err = m.Reset(ctx)
	fmt.Println(errors.Is(err, spanmutex.ErrResetRefused))
	res, err := m.ForceReset(ctx)
	fmt.Println(res.Evicted, res.Token, res.Forced, err)
	next, err := spanmutex.NewLock(emu.Client(), "nightly")
	if err != nil {
		log.Fatal(err)
	}
	lease, err := next.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("next token", lease.Token())
	_ = next.Unlock(ctx)
	// Output:
	// true
	// worker-7 1 true <nil>
	// next token 3
}

// With a version (a release), a section runs once per version: the same
// version stays done, a new one runs it again.
func ExampleWithVersion() {
	ctx := context.Background()
	emu, err := emulator.Start(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer emu.Close()

	for _, release := range []string{"v1.4.0", "v1.4.0", "v1.5.0"} {
		m, err := spanmutex.New(emu.Client(), "warm-caches", spanmutex.WithVersion(release))
		if err != nil {
			log.Fatal(err)
		}
		out, err := m.Run(ctx, func(context.Context, *spanmutex.Lease) error { return nil })
		fmt.Println(release, out, err)
	}
	// Output:
	// v1.4.0 Executed <nil>
	// v1.4.0 AlreadyDone <nil>
	// v1.5.0 Executed <nil>
}

// A section stopped from outside (here, as if by a pod's SIGTERM) returns
// Interrupt: the row is given back, NEEDED with the attempt not counted, and
// the next Run starts it again.
func ExampleInterrupt() {
	ctx := context.Background()
	emu, err := emulator.Start(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer emu.Close()

	m, err := spanmutex.New(emu.Client(), "reindex", spanmutex.WithMaxAttempts(1))
	if err != nil {
		log.Fatal(err)
	}
	out, err := m.Run(ctx, func(context.Context, *spanmutex.Lease) error {
		return spanmutex.Interrupt("SIGTERM: the pod is being evicted", nil)
	})
	fmt.Println(out, errors.Is(err, spanmutex.ErrInterrupted))
	rows, err := spanmutex.Inspect(ctx, emu.Client(), "reindex")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(rows[0].State, rows[0].Attempts, rows[0].LastError)
	out, err = m.Run(ctx, func(context.Context, *spanmutex.Lease) error { return nil })
	fmt.Println(out, err)
	// Output:
	// Executed true
	// NEEDED 0 interrupted: SIGTERM: the pod is being evicted
	// Executed <nil>
}
