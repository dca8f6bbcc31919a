package history_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/spanmutex/spanmutex"
	"github.com/spanmutex/spanmutex/internal/history"
)

// Client records what Run did: a failed attempt (Fail), a retry that
// completes (Complete), and a caller that finds it done (SeeDone), with the
// tokens and commit timestamps of the acquisitions; and the history checks
// clean against the table.
func TestClientRecordsRun(t *testing.T) {
	needEmulator(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, err := emu.NewDatabase(ctx, history.WritesDDL(writesTable))
	require.NoError(t, err)
	rec := history.NewRecorder()
	a, b := openClient(t, db, rec, "A", nil), openClient(t, db, rec, "B", nil)
	mutex := func(c *history.Client) *spanmutex.Mutex {
		m, err := spanmutex.New(c.Spanner, "S", spanmutex.WithOwner(c.ID), spanmutex.WithLease(lease))
		require.NoError(t, err)
		return m
	}
	failed := errors.New("failed on purpose")
	section := func(c *history.Client, err error) func(context.Context, *spanmutex.Lease) error {
		return func(ctx context.Context, l *spanmutex.Lease) error {
			if werr := c.Write(ctx, l, "S", l.Guard); werr != nil {
				return werr
			}
			return err
		}
	}
	out, err := a.Run(ctx, "S", mutex(a), section(a, failed))
	assert.Equal(t, spanmutex.Executed, out)
	assert.ErrorIs(t, err, failed)
	out, err = b.Run(ctx, "S", mutex(b), section(b, nil))
	assert.Equal(t, spanmutex.Executed, out)
	require.NoError(t, err)
	out, err = a.Run(ctx, "S", mutex(a), section(a, nil))
	assert.Equal(t, spanmutex.AlreadyDone, out)
	require.NoError(t, err)

	ops := rec.Ops()
	var kinds []history.Kind
	for _, o := range ops {
		if o.Kind != history.Renew {
			kinds = append(kinds, o.Kind)
		}
	}
	assert.Equal(t, []history.Kind{
		history.Acquire, history.SectionStart, history.Write, history.SectionEnd, history.Fail,
		history.Acquire, history.SectionStart, history.Write, history.SectionEnd, history.Complete,
		history.SeeDone,
	}, kinds)
	for _, o := range ops {
		assert.Equal(t, history.OK, o.Outcome, "%v", o)
		if o.Kind == history.Acquire {
			assert.True(t, o.RunOnce)
			assert.False(t, o.Commit.IsZero())
		}
	}
	rb, err := history.ReadBack(ctx, a.Spanner, writesTable, "", ops)
	require.NoError(t, err)
	assert.Equal(t, history.FinalRow{State: "DONE", Token: 2, Owner: "B"}, rb.Rows["S"])
	assert.Len(t, rb.Writes, 2)
	rep := history.Check(ops, history.Config{Lease: lease, Readback: rb, VisualizeDir: t.TempDir()})
	assert.True(t, rep.OK())
	assert.Equal(t, 1, rep.RanTwice)
}

// Client records what Lock calls did: the lease each holder declared, a
// Lock that gave up (ErrNotObtained) and a refused TryLock, with what their
// errors matched; the read-back finds the lock free, and the history
// checks clean.
func TestClientRecordsLock(t *testing.T) {
	needEmulator(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, err := emu.NewDatabase(ctx, history.WritesDDL(writesTable))
	require.NoError(t, err)
	rec := history.NewRecorder()
	a, b := openClient(t, db, rec, "A", nil), openClient(t, db, rec, "B", nil)
	a.Lease, b.Lease = lease, 3*lease
	lock := func(c *history.Client) *spanmutex.Lock {
		l, err := spanmutex.NewLock(c.Spanner, "L", spanmutex.WithOwner(c.ID), spanmutex.WithLease(c.Lease),
			spanmutex.WithScope(spanmutex.NewScope()))
		require.NoError(t, err)
		return l
	}
	la, lb := lock(a), lock(b)
	held, err := a.Lock(ctx, "L", la, false)
	require.NoError(t, err)
	impatient, stop := context.WithTimeout(ctx, 30*time.Millisecond)
	_, err = b.Lock(impatient, "L", lb, false)
	stop()
	require.ErrorIs(t, err, spanmutex.ErrNotObtained)
	_, err = b.Lock(ctx, "L", lb, true)
	require.ErrorIs(t, err, spanmutex.ErrHeld)
	require.NoError(t, a.Unlock(ctx, la, held))
	held, err = b.Lock(ctx, "L", lb, false)
	require.NoError(t, err)
	require.NoError(t, b.Unlock(ctx, lb, held))

	ops := rec.Ops()
	var leases []time.Duration
	var refusals []history.Refusal
	for _, o := range ops {
		if o.Kind != history.Acquire {
			continue
		}
		if o.Outcome == history.OK {
			leases = append(leases, o.Lease)
		} else {
			refusals = append(refusals, o.Refusal)
		}
	}
	assert.Equal(t, []time.Duration{lease, 3 * lease}, leases)
	assert.Equal(t, []history.Refusal{history.RefusedNotObtained, history.RefusedHeld}, refusals)
	rb, err := history.ReadBack(ctx, a.Spanner, writesTable, "", ops)
	require.NoError(t, err)
	assert.Equal(t, history.FinalRow{State: "NEEDED", Token: 2, Owner: "B"}, rb.Locks["L"])
	rep := history.Check(ops, history.Config{Lease: lease, Readback: rb, VisualizeDir: t.TempDir()})
	assert.True(t, rep.OK())
	assert.Equal(t, 1, rep.GaveUp)
	assert.Equal(t, 2, rep.Checked[history.CheckLockErrors])
	assert.Equal(t, 1, rep.Checked[history.CheckLeftHeld])
	assert.Equal(t, history.StallBound(3*lease), rep.StallBound)
}
