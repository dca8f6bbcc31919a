package spanmutex

import (
	"context"
	"errors"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// guardIn runs lease.Guard in a read-write transaction of c and returns its
// error.
func guardIn(t *testing.T, c *spanner.Client, lease *Lease) error {
	t.Helper()
	_, err := c.ReadWriteTransaction(context.Background(), func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
		return lease.Guard(ctx, tx)
	})
	return err
}

// Once its holder lets go of a lease (Unlock, or Run's section returned),
// Done is closed, Err says released, and Guard refuses saying so, not that
// the lease was taken over.
func TestLeaseEndsWhenReleased(t *testing.T) {
	needEmulator(t)
	c := newClient(t, freshDatabase(t))
	ctx := context.Background()
	cases := []struct {
		name string
		hold func(t *testing.T) *Lease // returns the lease after its release
	}{
		{"Unlock", func(t *testing.T) *Lease {
			l, err := NewLock(c, "released-lock")
			require.NoError(t, err)
			lease, err := l.Lock(ctx)
			require.NoError(t, err)
			require.NoError(t, guardIn(t, c, lease), "held")
			require.NoError(t, l.Unlock(ctx))
			return lease
		}},
		{"Run done", func(t *testing.T) *Lease { return runAndKeep(t, c, "released-done", nil) }},
		{"Run failed", func(t *testing.T) *Lease { return runAndKeep(t, c, "released-failed", errors.New("boom")) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			lease := tc.hold(t)
			select {
			case <-lease.Done():
			default:
				t.Fatal("Done is open after the release")
			}
			assert.ErrorIs(t, lease.Err(), ErrReleased)
			assert.NotErrorIs(t, lease.Err(), ErrLeaseLost)
			err := guardIn(t, c, lease)
			assert.ErrorIs(t, err, ErrReleased)
			assert.NotContains(t, err.Error(), "takeover")
			assert.Contains(t, err.Error(), "released")
		})
	}
}

// runAndKeep runs a section of name that returns fnErr, checks that its
// lease was held while it ran, and returns the lease.
func runAndKeep(t *testing.T, c *spanner.Client, name string, fnErr error) *Lease {
	t.Helper()
	m, err := New(c, name)
	require.NoError(t, err)
	var kept *Lease
	_, err = m.Run(context.Background(), func(ctx context.Context, lease *Lease) error {
		kept = lease
		assert.NoError(t, lease.Err())
		assert.NoError(t, guardIn(t, c, lease), "held")
		return fnErr
	})
	if fnErr == nil {
		require.NoError(t, err)
	} else {
		require.ErrorIs(t, err, fnErr)
	}
	return kept
}

// A call whose own ctx ended returns an error matching ctx.Err(), not an
// *UnreachableError: Spanner was reachable (the emulator), or the caller
// cancelled before anything could be said about it.
func TestEndedContextIsNotUnreachable(t *testing.T) {
	needEmulator(t)
	calls := []struct {
		name string
		call func(ctx context.Context, c *spanner.Client) error
	}{
		{"Ping", Ping},
		{"Inspect", func(ctx context.Context, c *spanner.Client) error { _, err := Inspect(ctx, c, ""); return err }},
		{"Reset", func(ctx context.Context, c *spanner.Client) error {
			m, err := New(c, "ended-reset")
			if err != nil {
				return err
			}
			_, err = m.Reset(ctx)
			return err
		}},
		{"Run", func(ctx context.Context, c *spanner.Client) error {
			m, err := New(c, "ended-run")
			if err != nil {
				return err
			}
			_, err = m.Run(ctx, func(context.Context, *Lease) error { return nil })
			return err
		}},
		{"Lock", func(ctx context.Context, c *spanner.Client) error {
			l, err := NewLock(c, "ended-lock")
			if err != nil {
				return err
			}
			_, err = l.Lock(ctx)
			return err
		}},
	}
	ends := []struct {
		name string
		ctx  func() context.Context
		want error
	}{
		{"cancelled", func() context.Context {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx
		}, context.Canceled},
		{"deadline passed", func() context.Context {
			ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
			t.Cleanup(cancel)
			return ctx
		}, context.DeadlineExceeded},
	}
	db := freshDatabase(t)
	for _, call := range calls {
		for _, end := range ends {
			t.Run(call.name+"/"+end.name, func(t *testing.T) {
				err := call.call(end.ctx(), newClient(t, db)) // a new client: no call of it has succeeded yet
				require.ErrorIs(t, err, end.want)
				require.NotErrorIs(t, err, ErrUnreachable)
				requireOneLine(t, err)
			})
		}
	}
}

// A cancelled ctx is not reported as unreachable even where nothing
// listens: the caller stopped waiting.
func TestCancelledContextOnUnreachableEndpoint(t *testing.T) {
	c := unreachableClient(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := Ping(ctx, c)
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, ErrUnreachable)
	_, err = Inspect(ctx, c, "")
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, ErrUnreachable)
}
