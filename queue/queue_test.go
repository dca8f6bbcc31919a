package queue

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/spanmutex/spanmutex"
)

// New validates its workers' lock options without I/O, as
// spanmutex.NewLock does; the options that apply pass. Those of a Mutex
// alone, WithOwner and WithScope (which each Worker sets) do not compile:
// WithLockOptions takes spanmutex.LeaseOptions.
func TestNewValidatesLockOptions(t *testing.T) {
	needEmulator(t)
	client := newClient(t, freshDatabase(t)) // New does no I/O, but makes a Lock: a real client
	for _, tt := range []struct {
		name string
		opt  spanmutex.LeaseOption
		want string
	}{
		{"bad lease", spanmutex.WithLease(time.Millisecond), "WithLease(1ms)"},
		{"bad table", spanmutex.WithTable("my-locks"), "WithTable"},
		{"nil", nil, "option 0 is nil"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			q, err := New(client, WithLockOptions(tt.opt))
			assert.Nil(t, q)
			require.ErrorIs(t, err, ErrInvalidConfig)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	q, err := New(client, WithLockOptions(spanmutex.WithTable("Locks"), spanmutex.WithLease(time.Second)))
	require.NoError(t, err)
	assert.NotNil(t, q)
}
