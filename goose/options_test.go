package spangoose_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	spangoose "github.com/spanmutex/spanmutex/goose"
)

func TestNewLockerRejectsBadInput(t *testing.T) {
	_, err := spangoose.NewLocker(nil)
	require.ErrorIs(t, err, spangoose.ErrInvalidConfig)
	if emu == nil {
		t.Skip("the rest needs a client: integration test")
	}
	for name, opt := range map[string]spangoose.Option{
		"nil option":       nil,
		"bad lock name":    spangoose.WithLockName(""),
		"short lease":      spangoose.WithLease(time.Millisecond),
		"negative timeout": spangoose.WithLockTimeout(-time.Second),
		"nil logger":       spangoose.WithLogger(nil),
		"nil scope":        spangoose.WithScope(nil),
		"nil lock option":  spangoose.WithLockOptions(nil),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := spangoose.NewLocker(emu.Client(), opt)
			assert.ErrorIs(t, err, spangoose.ErrInvalidConfig)
		})
	}
}

// Lock refuses a ctx that the Locker's Context did not make, since a lost
// lease could not stop goose then, and a second Lock while it holds.
func TestLockNeedsItsContext(t *testing.T) {
	if emu == nil {
		t.Skip("integration test: needs the emulator (skipped with -short)")
	}
	locker, err := spangoose.NewLocker(emu.Client(), spangoose.WithLockName("needs-its-context"))
	require.NoError(t, err)
	ctx := withDeadline(t)
	err = locker.Lock(ctx, nil)
	require.ErrorIs(t, err, spangoose.ErrInvalidConfig)
	assert.Contains(t, err.Error(), "locker.Context(ctx)")
	other, err := spangoose.NewLocker(emu.Client())
	require.NoError(t, err)
	octx, cancel := other.Context(ctx)
	defer cancel()
	require.ErrorIs(t, locker.Lock(octx, nil), spangoose.ErrInvalidConfig, "another Locker's ctx")

	gctx, cancel := locker.Context(ctx)
	defer cancel()
	require.NoError(t, locker.Lock(gctx, nil))
	require.ErrorIs(t, locker.Lock(gctx, nil), spangoose.ErrInvalidConfig, "Lock while held")
	assert.NotNil(t, locker.Lease())
	require.NoError(t, locker.Unlock(context.WithoutCancel(gctx), nil))
	require.NoError(t, gctx.Err(), "a released lease does not cancel the ctx")
	require.ErrorIs(t, locker.Unlock(ctx, nil), spangoose.ErrInvalidConfig, "Unlock without Lock")
}
