package spanmutex

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDecideReset(t *testing.T) {
	now := time.Unix(1000, 0)
	const wm = 10 * time.Second
	cases := []struct {
		name string
		r    row
		ok   bool
	}{
		{"no row", row{Now: now}, false},
		{"done", row{Exists: true, State: StateDone, Now: now}, false},
		{"failed", row{Exists: true, State: StateFailed, Attempts: 3, Now: now}, true},
		{"needed, exhausted", row{Exists: true, State: StateNeeded, Attempts: 3, Now: now}, true},
		{"started, live", row{Exists: true, State: StateStarted, RenewedAt: now.Add(-wm + time.Millisecond), Now: now}, false},
		{"started, silent past the lease", row{Exists: true, State: StateStarted, RenewedAt: now.Add(-wm), Now: now}, true},
		{"unknown state", row{Exists: true, State: "WEIRD", Now: now}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ok, why := decideReset(tc.r, wm, false)
			assert.Equal(t, tc.ok, ok, why)
			assert.Equal(t, ok, why == "")
		})
	}
}

// An exhausted section is re-armed by Reset and then runs again, with fresh
// attempts and a higher token.
func TestResetReArmsAnExhaustedSection(t *testing.T) {
	eachDialect(t, testResetReArmsAnExhaustedSection)
}

func testResetReArmsAnExhaustedSection(t *testing.T, db string) {
	c := newClient(t, db)
	ctx := context.Background()
	m, err := New(c, "exhausted", WithMaxAttempts(1))
	require.NoError(t, err)

	_, err = m.Reset(ctx)
	var refused *resetRefusedError
	require.ErrorAs(t, err, &refused, "no row yet")

	boom := errors.New("boom")
	_, err = m.Run(ctx, func(context.Context, *Lease) error { return boom })
	require.ErrorIs(t, err, boom)
	_, err = m.Run(ctx, func(context.Context, *Lease) error { t.Error("ran while exhausted"); return nil })
	require.ErrorIs(t, err, ErrAttemptsExhausted)

	res, err := m.Reset(ctx)
	require.NoError(t, err)
	assert.Equal(t, StateFailed, res.Before)
	assert.Equal(t, int64(1), res.Attempts)
	assert.Equal(t, "boom", res.LastError)
	st := inspectOne(t, c, "exhausted")
	assert.Equal(t, StateNeeded, st.State)
	assert.Equal(t, int64(0), st.Attempts)
	assert.Contains(t, st.LastError, "reset from FAILED after 1 attempt(s); last error: boom")

	var token int64
	out, err := m.Run(ctx, func(_ context.Context, l *Lease) error { token = l.Token(); return nil })
	require.NoError(t, err)
	assert.Equal(t, Executed, out)
	assert.Equal(t, int64(2), token, "tokens go on increasing across a reset")
	st = inspectOne(t, c, "exhausted")
	assert.Equal(t, StateDone, st.State)
	assert.Equal(t, int64(1), st.Attempts)

	_, err = m.Reset(ctx)
	require.ErrorIs(t, err, ErrResetRefused, "a DONE row is not re-armed")
	assert.Contains(t, err.Error(), "it is DONE")
}

// Reset refuses a live holder and says so; once the holder has gone silent
// past the lease, it resets the row, and the old holder's late DONE is
// rejected.
func TestResetIsFencedOnALiveHolder(t *testing.T) {
	t.Parallel() // waits out leases beside the other tests that do (own database)
	db := freshDatabase(t)
	const lease = 2 * time.Second
	ca, silence := silenceableClient(t, db)
	holderM, err := New(ca, "held", WithOwner("holder"), WithLease(lease))
	require.NoError(t, err)
	h := startHolder(t, holderM)
	l := h.acquired(t)

	resetter, err := New(newClient(t, db), "held", WithLease(lease))
	require.NoError(t, err)
	_, err = resetter.Reset(context.Background())
	var refused *resetRefusedError
	require.ErrorAs(t, err, &refused)
	assert.Equal(t, StateStarted, refused.State)
	assert.Equal(t, "holder", refused.Owner)
	assert.Contains(t, err.Error(), "a live holder")

	silence.Store(true) // the holder can no longer renew
	var res ResetResult
	waitFor(t, time.Minute, "the reset of the silent holder", func() bool {
		res, err = resetter.Reset(context.Background())
		return err == nil
	})
	assert.Equal(t, StateStarted, res.Before)
	assert.Equal(t, l.Token(), res.Token)

	silence.Store(false)
	h.stop()
	r := h.result(t)
	assert.ErrorIs(t, r.err, ErrLeaseLost, "the silent holder's late DONE is rejected")
	st := inspectOne(t, newClient(t, db), "held")
	assert.Equal(t, StateNeeded, st.State)
}
