package migrations

import (
	"context"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/spanmutex/spanmutex"
)

// New refuses, without I/O, a lock option that does not apply to a Lock,
// naming it.
func TestNewRejectsLockOptionsThatDoNotApply(t *testing.T) {
	client := &spanner.Client{} // never used: New does no I/O
	needed := spanmutex.WithNeeded(func(context.Context) (bool, error) { return true, nil })
	for _, opt := range []spanmutex.Option{spanmutex.WithStaleness(time.Hour), needed, spanmutex.WithVersion("v1")} {
		t.Run(opt.Name(), func(t *testing.T) {
			m, err := New(client, release(t, "release1"), WithLockOptions(opt))
			assert.Nil(t, m)
			require.ErrorIs(t, err, ErrInvalidConfig)
			assert.Contains(t, err.Error(), opt.Name()+" does not apply to a Lock")
		})
	}
	_, err := New(client, release(t, "release1"), WithLockOptions(spanmutex.WithOwner("replica-1")))
	assert.NoError(t, err)
}
