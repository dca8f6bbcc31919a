package spanmutex

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// LeaderCallbacks are what Election.Run calls, in the style of client-go's
// leaderelection.
type LeaderCallbacks struct {
	// OnStartedLeading runs, on Run's goroutine, once this instance leads.
	// Its ctx is cancelled when leadership is lost or Run's ctx ends; it
	// should return then. Required.
	OnStartedLeading func(ctx context.Context)
	// OnStoppedLeading, if set, is called once leadership has ended (lost,
	// or resigned after OnStartedLeading returned), before Run returns. It
	// is not called if this instance never led.
	OnStoppedLeading func()
	// OnNewLeader, if set, is called on its own goroutine with every term,
	// this instance's included, in order, while Run runs (see Observe).
	OnNewLeader func(LeaderInfo)
}

// Run campaigns with value, runs cb.OnStartedLeading while this instance
// leads, then resigns, handing over to the next candidate at once. It
// returns nil after OnStartedLeading returned and the term was handed over;
// an error matching ErrLeaseLost if leadership was lost meanwhile; the error of Resign if
// handing over failed; or the error of Campaign (matching ErrNotObtained if
// ctx ended) if this instance never led. When ctx ends while this instance
// leads, OnStartedLeading's ctx is cancelled and Run resigns once it
// returns.
func (e *Election) Run(ctx context.Context, value string, cb LeaderCallbacks) error {
	if ctx == nil {
		return errNilContext
	}
	if err := e.made(); err != nil {
		return err
	}
	if cb.OnStartedLeading == nil {
		return fmt.Errorf("%w: Election.Run: LeaderCallbacks.OnStartedLeading is nil; give the function to run while leading", ErrInvalidConfig)
	}
	if cb.OnNewLeader != nil {
		stop := e.observeInto(ctx, cb.OnNewLeader)
		defer stop()
	}
	ld, err := e.Campaign(ctx, value)
	if err != nil {
		return err
	}
	leadCtx, cancel := context.WithCancelCause(ld.Context())
	defer cancel(nil)
	stopAfter := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	defer stopAfter()
	cb.OnStartedLeading(leadCtx)

	lost := context.Cause(ld.Context())
	rctx, stopResign := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.finishTimeout)
	defer stopResign()
	resignErr := ld.Resign(rctx)
	if cb.OnStoppedLeading != nil {
		cb.OnStoppedLeading()
	}
	if errors.Is(lost, ErrLeaseLost) {
		return lost
	}
	return resignErr
}

// observeInto calls f with every term Observe reports until the returned
// stop is called; stop waits for f's last call to return.
func (e *Election) observeInto(ctx context.Context, f func(LeaderInfo)) (stop func()) {
	octx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for info := range e.Observe(octx) {
			f(info)
		}
	}()
	return func() {
		cancel()
		wg.Wait()
	}
}
