package spanmutex

import (
	"context"
	"errors"
	"testing"

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
