package queue

import (
	"context"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/spanmutex/spanmutex"
)

// New refuses, without I/O, a lock option that does not apply to a Lock
// or that each Worker sets itself, naming it; the options that apply pass.
func TestNewRejectsLockOptionsThatDoNotApply(t *testing.T) {
	client := &spanner.Client{} // never used: New does no I/O
	needed := spanmutex.WithNeeded(func(context.Context) (bool, error) { return true, nil })
	for _, tt := range []struct {
		name string
		opt  spanmutex.Option
		want string
	}{
		{"staleness", spanmutex.WithStaleness(time.Hour), "WithStaleness does not apply to a Lock"},
		{"needed", needed, "WithNeeded does not apply to a Lock"},
		{"version", spanmutex.WithVersion("v1"), "WithVersion does not apply to a Lock"},
		{"owner", spanmutex.WithOwner("me"), "set it with WithWorkerID"},
		{"scope", spanmutex.WithScope(spanmutex.NewScope()), "each Worker gives its resource locks a Scope of its own"},
		{"bad watermark", spanmutex.WithWatermark(time.Millisecond), "WithWatermark(1ms)"},
		{"nil", nil, "option 0 is nil"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			q, err := New(client, WithLockOptions(tt.opt))
			assert.Nil(t, q)
			require.ErrorIs(t, err, ErrInvalidConfig)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	q, err := New(client, WithLockOptions(spanmutex.WithTable("Locks"), spanmutex.WithWatermark(time.Second)))
	require.NoError(t, err)
	assert.NotNil(t, q)
}
