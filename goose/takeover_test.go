package spangoose_test

import (
	"context"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/spanmutex/spanmutex"
	"github.com/spanmutex/spanmutex/ddl"
	spangoose "github.com/spanmutex/spanmutex/goose"
	"github.com/spanmutex/spanmutex/internal/cutoff"
	"github.com/spanmutex/spanmutex/internal/testutil"
)

// A replica SIGKILLed in the middle of a migration (the Go migration 5,
// after its DDL, before its fenced backfill): its lock is taken over once
// its lease passes, with a higher token, by the next replica, which runs
// migration 5 again (its DDL is IF NOT EXISTS) and finishes the run; the
// backfill ran once.
func TestKilledReplicaIsTakenOver(t *testing.T) {
	db := testutil.NewDatabase(t, emu, ddl.GoogleSQL)
	const lease = 2 * time.Second
	a := startReplica(t, replicaSpec{Database: db, Dir: "testdata/release1", Lease: lease, Pause: true})
	a.await(t, "ready", time.Minute)
	a.begin(t)
	paused := a.await(t, "paused", time.Minute)
	require.NoError(t, a.cmd.Process.Kill())
	_ = a.cmd.Wait()
	assert.True(t, tableExists(t, db, "Refunds"), "the killed replica's DDL of migration 5 was applied")
	assert.Equal(t, []int64{0, 1, 2, 3, 4}, versionRows(t, db), "migration 5 not recorded")

	b := startReplica(t, replicaSpec{Database: db, Dir: "testdata/release1", Lease: lease})
	b.await(t, "ready", time.Minute)
	b.begin(t)
	res := b.await(t, "done", time.Minute)
	require.Empty(t, res.Err)
	assert.Equal(t, []int64{refundsVersion}, res.Applied)
	assert.True(t, res.TookOver, "took the lock over from the killed replica")
	assert.Greater(t, res.Token, paused.Token)
	assert.GreaterOrEqual(t, res.Waited, lease.Seconds()/2, "waited for the killed replica's lease")
	assertMigrated(t, db, refundsVersion)
}

// A migration that fails (a DDL batch whose second statement fails after
// the first was applied) leaves the lock free and returns goose's error;
// its version is not recorded, and what the batch applied stays.
func TestFailedMigrationLeavesTheLockFree(t *testing.T) {
	db := testutil.NewDatabase(t, emu, ddl.GoogleSQL)
	ctx := withDeadline(t)
	r, err := openReplica(ctx, db, "testdata/failing", nil)
	require.NoError(t, err)
	t.Cleanup(r.close)
	res, err := r.up(ctx)
	var partial *goose.PartialError
	require.ErrorAs(t, err, &partial)
	assert.Equal(t, int64(3), partial.Failed.Source.Version)
	assert.Contains(t, err.Error(), "uniqueness violation")
	assert.Equal(t, []int64{1, 2}, res.Applied)
	assert.Equal(t, []int64{0, 1, 2}, versionRows(t, db))
	assert.True(t, tableExists(t, db, "Refunds"), "the batch's first statement stays applied")
	assertLockFree(t, r.client, spangoose.DefaultLockName)

	// Running the file again fails on what the batch applied, until a
	// person fixes the schema (or the file uses IF NOT EXISTS).
	_, err = r.up(ctx)
	require.ErrorAs(t, err, &partial)
	assert.Contains(t, err.Error(), "Duplicate name in schema: Refunds")
	assertLockFree(t, r.client, spangoose.DefaultLockName)
}

// assertLockFree checks that a new contender takes the lock at once.
func assertLockFree(t *testing.T, client *spanner.Client, name string) {
	t.Helper()
	l, err := spanmutex.NewLock(client, name)
	require.NoError(t, err)
	ctx := withDeadline(t)
	_, err = l.TryLock(ctx)
	require.NoError(t, err, "the lock is free")
	require.NoError(t, l.Unlock(ctx))
}

// A replica cut off from Spanner in the middle of a migration loses its
// lease: goose is stopped (its ctx cancelled), the Provider's error says
// so (ErrStopped, spanmutex.ErrLeaseLost), and the next replica takes over
// with a higher token and finishes.
func TestLostLeaseStopsGoose(t *testing.T) {
	db := testutil.NewDatabase(t, emu, ddl.GoogleSQL)
	ctx := withDeadline(t)
	cut := &cutoff.Switch{Reason: "test: cut off"}
	client, err := emu.NewClient(ctx, db, cut.ClientOptions()...)
	require.NoError(t, err)
	t.Cleanup(client.Close)
	const lease = time.Second
	r, err := openReplica(ctx, db, "testdata/release1", nil)
	require.NoError(t, err)
	t.Cleanup(r.close)
	// The Locker's client is one the test can cut off from Spanner, as if
	// the replica froze; goose's own connections still work.
	r.locker, err = spangoose.NewLocker(client, spangoose.WithLease(lease),
		spangoose.WithLockOptions(spanmutex.WithFinishTimeout(2*time.Second))) // Unlock's write cannot pass the cut
	require.NoError(t, err)
	r.provider, err = newProvider(r.db, "testdata/release1", r.locker, refundsMigration(client, r.locker, func(ctx context.Context) {
		cut.Store(true)
		<-ctx.Done()
	}))
	require.NoError(t, err)
	began := time.Now()
	res, err := r.up(ctx)
	t.Logf("stopped after %v: %v", time.Since(began), err)
	require.ErrorIs(t, err, spanmutex.ErrLeaseLost)
	require.ErrorIs(t, err, spangoose.ErrStopped)
	assert.Contains(t, err.Error(), "goose was stopped")
	assert.Equal(t, []int64{1, 2, 3, 4}, res.Applied)
	cut.Store(false)

	next, err := openReplica(ctx, db, "testdata/release1", nil)
	require.NoError(t, err)
	t.Cleanup(next.close)
	began = time.Now()
	res2, err := next.up(ctx)
	require.NoError(t, err)
	t.Logf("next replica: %+v in %v", res2, time.Since(began))
	assert.Equal(t, []int64{refundsVersion}, res2.Applied)
	assert.Greater(t, res2.Token, res.Token)
	assertMigrated(t, db, refundsVersion)
}
