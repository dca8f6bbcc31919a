package migrations

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/spanmutex/spanmutex"
)

// New validates the lock's options without I/O, as spanmutex.NewLock does;
// the options that apply pass (those of a Mutex alone do not compile).
func TestNewValidatesLockOptions(t *testing.T) {
	needEmulator(t)
	client := newReplica(t, freshDatabase(t)).client // New does no I/O, but makes a Lock: a real client
	for _, tt := range []struct {
		name string
		opt  spanmutex.LockOption
		want string
	}{
		{"bad lease", spanmutex.WithLease(time.Millisecond), "WithLease(1ms)"},
		{"bad owner", spanmutex.WithOwner("a\nb"), "WithOwner"},
		{"nil", nil, "is nil"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m, err := New(client, release(t, "release1"), WithLockOptions(tt.opt))
			assert.Nil(t, m)
			require.ErrorIs(t, err, ErrInvalidConfig)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	_, err := New(client, release(t, "release1"), WithLockOptions(spanmutex.WithOwner("replica-1")))
	assert.NoError(t, err)
}
