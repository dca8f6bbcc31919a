package spanmutex

import (
	"context"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A process that found the table without its Queued column checks again
// once that answer is queuedRecheck old: after `ddl --upgrade` adds the
// column while it runs, its joins set Queued, so an Unlock of a process
// started after the upgrade, which trusts the column, hands it the lock
// instead of freeing the lock past its live entry (claim 12; issue 41,
// read fault 5). Without the re-check its join left Queued FALSE and the
// Unlock freed the lock.
func TestQueuedColumnAddedWhileRunning(t *testing.T) {
	needEmulator(t)
	ctx := context.Background()
	db, err := emu.CreateDatabase(ctx, olderSchema(t)...)
	require.NoError(t, err)
	applyDDL(t, db, withoutQueued(t)...)
	const name = "upgraded"

	old, err := NewLock(newClient(t, db), name, WithScope(NewScope(WithoutWakeUps())), WithLease(time.Second), WithOwner("old"))
	require.NoError(t, err)
	_, err = old.Lock(ctx)
	require.NoError(t, err)
	require.NoError(t, old.Unlock(ctx))
	require.False(t, old.sp.marked(), "the table had no Queued column")

	applyDDL(t, db, "ALTER TABLE "+defaultTable+" ADD COLUMN Queued BOOL")
	old.sp.queuedRecheck = 0 // its answer is a minute old

	reader := newClient(t, db)
	up, err := NewLock(reader, name, WithScope(NewScope(WithoutWakeUps())), WithLease(time.Second), WithOwner("new"))
	require.NoError(t, err)
	lu, err := up.Lock(ctx)
	require.NoError(t, err)
	require.NoError(t, up.Unlock(ctx)) // the queue read empty: Queued FALSE
	lu, err = up.Lock(ctx)
	require.NoError(t, err)

	got := lockAsync(t, old)
	waitFor(t, time.Minute, "old's entry", func() bool { return len(queuedIDs(t, reader, name)) == 1 })
	var queued spanner.NullBool
	r, err := reader.Single().ReadRow(ctx, defaultTable, spanner.Key{name}, []string{"Queued"})
	require.NoError(t, err)
	require.NoError(t, r.Columns(&queued))
	assert.Equal(t, spanner.NullBool{Bool: true, Valid: true}, queued, "old's join set Queued")
	require.NoError(t, up.Unlock(ctx))
	lo := <-got
	require.NotNil(t, lo)
	assert.True(t, lo.HandedOff(), "the Unlock handed the lock to old's entry")
	assert.Equal(t, lu.Token()+1, lo.Token())
	require.NoError(t, old.Unlock(ctx))
}
