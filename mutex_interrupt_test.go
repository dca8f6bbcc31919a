package spanmutex

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A section that returns Interrupt gives the row back: NEEDED, the attempt
// not counted, the reason recorded; interruptions never use up the attempts.
func TestInterruptedSectionGivesTheRowBack(t *testing.T) {
	db := freshDatabase(t)
	c := newClient(t, db)
	ctx := context.Background()
	m, err := New(c, "interrupted", WithMaxAttempts(1))
	require.NoError(t, err)
	stopped := errors.New("stopped by SIGTERM")
	for i := range 3 {
		out, err := m.Run(ctx, func(context.Context, *Lease) error { return Interrupt("pod evicted", stopped) })
		assert.Equal(t, Executed, out)
		require.ErrorIs(t, err, ErrInterrupted)
		assert.ErrorIs(t, err, stopped)
		var ie *InterruptedError
		require.ErrorAs(t, err, &ie)
		assert.Equal(t, int64(i+1), ie.Token)
		assert.Equal(t, "interrupted", ie.Name)
		st := inspectOne(t, c, "interrupted")
		assert.Equal(t, StateNeeded, st.State)
		assert.Equal(t, int64(0), st.Attempts)
		assert.Equal(t, "interrupted: pod evicted: stopped by SIGTERM", st.LastError)
	}
	var token int64
	out, err := m.Run(ctx, func(_ context.Context, l *Lease) error { token = l.Token(); return nil })
	require.NoError(t, err)
	assert.Equal(t, Executed, out)
	assert.Equal(t, int64(4), token)
	st := inspectOne(t, c, "interrupted")
	assert.Equal(t, StateDone, st.State)
	assert.Equal(t, int64(1), st.Attempts)
}
