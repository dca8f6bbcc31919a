//go:build go1.25

package spanmutex

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// slowCommits is a memStore whose acquisitions and renewals each take
// delay of (virtual) time, as commits do on a slow link.
type slowCommits struct {
	*memStore
	delay time.Duration
}

func (s *slowCommits) acquire(ctx context.Context, name string, p policy, c claim) (decision, *Lease, error) {
	time.Sleep(s.delay)
	return s.memStore.acquire(ctx, name, p, c)
}

func (s *slowCommits) renew(ctx context.Context, l *Lease) error {
	time.Sleep(s.delay)
	return s.memStore.renew(ctx, l)
}

// When every lease Run obtains fails the grant rule (its commits take
// longer than a renewal interval, so freshen can never make it fresh), Run
// gives each back, backs off, and ends with ErrOutage after
// WithMaxFailures of them: it once acquired and gave back in a loop until
// its ctx ended, never running the section (issue 41, fault 7).
func TestRunCountsFailedGrants(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := &memStore{now: time.Unix(1000, 0)}
		st := &slowCommits{memStore: mem, delay: 400 * time.Millisecond}
		m := newTestMutex(t, st, WithLease(time.Second), WithMaxFailures(3))
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		began := time.Now()
		_, err := m.Run(ctx, func(context.Context, *Lease) error {
			t.Error("the section ran on a lease that was never fresh")
			return nil
		})
		require.ErrorIs(t, err, ErrOutage)
		assert.NotErrorIs(t, err, ErrNotObtained, "ended by the failure limit, not by the ctx")
		assert.Equal(t, 3, mem.acquires, "one acquisition per counted failure")
		assert.Less(t, time.Since(began), 10*time.Second)
		assert.Equal(t, StateNeeded, mem.r.State, "each lease was given back")
	})
}
