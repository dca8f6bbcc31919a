package spanmutex

import (
	"context"
	"errors"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// renewEvery is how often a held lease is renewed: the configured
// interval, or a third of the lease, so that two renewals in a row may
// fail before the lease is at risk.
func (c *config) renewEvery() time.Duration {
	if c.renewInterval > 0 {
		return c.renewInterval
	}
	return c.lease / 3
}

// keepAlive renews l in the background until the returned stop is called or
// the lease is lost; onLost is called at most once, with an error matching ErrLeaseLost.
//
// anchor is the local time just before the request whose commit last set
// RenewedAt was sent. Spanner's commit timestamp of that request is later
// than anchor, so the time since anchor, measured on the local monotonic
// clock, bounds from above how long Spanner has seen the row unrenewed. A
// contender may take over once that reaches the lease (plus its jitter,
// which may be zero); so when renewals have failed until the local time since
// anchor reaches the lease, it is declared lost no later than the
// earliest moment another holder could start. This measures a duration on the
// local clock, never compares its wall time with Spanner's.
func keepAlive(st renewer, cfg *config, l *Lease, anchor time.Time, onLost func(error)) (stop func()) {
	onLost = cfg.tel.lost(l, onLost) // telemetry.go
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		renewLoop(ctx, st, cfg, l, anchor, onLost)
	}()
	return func() {
		cancel()
		wg.Wait()
	}
}

func renewLoop(ctx context.Context, st renewer, cfg *config, l *Lease, anchor time.Time, onLost func(error)) {
	clk, lease, interval := cfg.clock, cfg.lease, cfg.renewEvery()
	log := cfg.logger.With("token", l.token)
	expired := func() bool {
		if clk.Now().Sub(anchor) < lease {
			return false
		}
		onLost(&leaseLostError{Name: l.name, Token: l.token,
			Reason: "renewals failed for a whole lease (" + lease.String() + "); another holder may take over"})
		return true
	}
	// The first renewal is due interval after anchor, not after this loop
	// starts: a Lock that returned late (a slow acquisition, a hand-off
	// learnt late) renews at once instead of letting its lease lapse.
	next := max(interval-clk.Now().Sub(anchor), 0)
	for {
		left := lease - clk.Now().Sub(anchor)
		if expired() {
			return
		}
		c, stopTimer := clk.NewTimer(min(next, left))
		select {
		case <-ctx.Done():
			stopTimer()
			return
		case <-c:
		}
		if expired() {
			return
		}
		sent := clk.Now()
		rctx, cancel := context.WithTimeout(ctx, lease-sent.Sub(anchor))
		err := st.renew(rctx, l)
		cancel()
		switch {
		case err == nil:
			anchor, next = sent, interval
			l.setAnchor(sent)
			log.Debug("lease renewed")
		case errors.Is(err, ErrLeaseLost):
			log.Warn("lease lost: the row was taken over", "err", err)
			onLost(err)
			return
		case errors.Is(err, errJoinedSession):
			log.Debug("lease renewed into the Scope's session, which renews it from now on")
			return
		case ctx.Err() != nil:
			return
		default:
			// A renewal of unknown outcome keeps the old anchor: only an
			// acknowledged renewal moves it.
			log.Warn("lease renewal failed; retrying", "err", err)
			cfg.tel.renewFailed(l, err) // telemetry.go
			next = max(interval/4, time.Millisecond)
		}
	}
}

// freshen is the last step of every grant (CORRECTNESS_DISCLAIMER.md, claim
// 11): a lease found ours, whose anchor our own clock counts older than a
// renewal interval (the process was paused, or the read or commit that
// found it was slow), is renewed, fenced, before the caller gets it, and
// the renewal's send time becomes its anchor; the clock is read again after
// each renewal, which may itself have been slow. So no caller gets a lease
// its own clock counts as lapsed, or about to lapse before its first
// renewal. It returns an error matching ErrLeaseLost if the lease was taken over
// meanwhile, and any other error of a renewal, or errSlowRenewals after
// maxFreshen renewals that each came back too late.
func freshen(ctx context.Context, st renewer, cfg *config, lease *Lease) error {
	for range maxFreshen {
		if cfg.clock.Now().Sub(lease.lastAnchor()) < cfg.renewEvery() {
			return nil
		}
		sent := cfg.clock.Now()
		octx, cancel := detached(ctx, cfg.finishTimeout)
		err := st.renew(octx, lease)
		cancel()
		if err != nil {
			return err
		}
		cfg.logger.Debug("lease renewed before it was granted", "token", lease.token)
		lease.setAnchor(sent)
	}
	if cfg.clock.Now().Sub(lease.lastAnchor()) < cfg.renewEvery() {
		return nil
	}
	return errSlowRenewals
}

// maxFreshen bounds the renewals of one freshen.
const maxFreshen = 3

// errSlowRenewals: freshen's renewals each took longer than a renewal
// interval. Transient: the caller reads the lock again.
var errSlowRenewals = status.Error(codes.Unavailable, "spanmutex: renewals before the grant each took longer than a renewal interval")
