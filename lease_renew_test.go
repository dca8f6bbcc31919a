package spanmutex

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// renewFunc is a renewer made of a function.
type renewFunc func(ctx context.Context, l *Lease) error

func (f renewFunc) renew(ctx context.Context, l *Lease) error { return f(ctx, l) }

// A lease whose acquisition was acknowledged late (its anchor 70% of a
// lease in the past when the Lock returns) is renewed at once: its first
// renewal is due a renewal interval after the anchor, not after keepAlive
// starts. Otherwise it would lapse before its first renewal.
func TestKeepAliveRenewsALateLeaseAtOnce(t *testing.T) {
	cfg := defaultConfig()
	cfg.lease = time.Second // renewals every 333ms
	anchor := time.Now().Add(-700 * time.Millisecond)
	renewed := make(chan time.Time, 1)
	lost := make(chan error, 1)
	stop := keepAlive(renewFunc(func(context.Context, *Lease) error {
		select {
		case renewed <- time.Now():
		default:
		}
		return nil
	}), &cfg, newLease("late", "me", "id", 1, false, defaultTable), anchor, func(err error) { lost <- err })
	defer stop()
	select {
	case at := <-renewed:
		require.Less(t, at.Sub(anchor), cfg.lease, "the first renewal came after the lease had run out")
	case err := <-lost:
		t.Fatalf("the lease lapsed before its first renewal: %v", err)
	}
}
