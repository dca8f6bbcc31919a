package spangoose_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/iterator"

	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/internal/testutil"
)

// Eight replica processes start at once and each runs goose up through the
// Provider on one database, first on release 1 (testdata/release1 and the Go
// migration 5), then, as a rollout, eight more on release 2 (migration 6
// added): the first replica to take the lock applies the pending
// migrations, each once; the others wait their turn (or, in the first
// round, find nothing pending once goose's version table exists) and end
// at the latest version.
func TestReplicaProcessesRaceToMigrate(t *testing.T) {
	db := testutil.NewDatabase(t, emu, ddl.GoogleSQL)
	applied := raceReplicas(t, db, "testdata/release1", 5)
	assert.Equal(t, []int64{1, 2, 3, 4, 5}, applied, "release 1: each migration applied by exactly one replica")
	assertMigrated(t, db, 5)
	applied = raceReplicas(t, db, "testdata/release2", 6)
	assert.Equal(t, []int64{6}, applied, "release 2: migration 6 applied by exactly one replica")
	assertMigrated(t, db, 6)
}

// raceReplicas starts eight replica processes of dir on db, lets them run
// goose up at once, checks that each ends at version latest with tokens of
// its own, and returns the versions they applied, sorted.
func raceReplicas(t *testing.T, db, dir string, latest int64) []int64 {
	t.Helper()
	const n = 8
	procs := make([]*replicaProc, n)
	for i := range procs {
		procs[i] = startReplica(t, replicaSpec{Database: db, Dir: dir, Lease: 10 * time.Second})
	}
	for _, p := range procs {
		p.await(t, "ready", time.Minute)
	}
	for _, p := range procs {
		p.begin(t)
	}
	var applied []int64
	tokens := map[int64]bool{}
	for i, p := range procs {
		res := p.await(t, "done", 2*time.Minute)
		t.Logf("%s, replica %d: applied %v, version %d, token %d, waited %.2fs, retries %d, err %q", dir, i, res.Applied, res.Version, res.Token, res.Waited, res.Retries, res.Err)
		assert.Empty(t, res.Err, "replica %d", i)
		assert.Equal(t, latest, res.Version, "replica %d ends at the latest version", i)
		if res.Token != 0 { // 0: Up found nothing pending and took no lock
			assert.False(t, tokens[res.Token], "token %d given twice", res.Token)
			tokens[res.Token] = true
		}
		applied = append(applied, res.Applied...)
	}
	slices.Sort(applied)
	return applied
}

// assertMigrated checks db after goose up of a release: goose's version
// table holds 0..latest once each, all applied, and each backfill
// ran once.
func assertMigrated(t *testing.T, db string, latest int64) {
	t.Helper()
	want := []int64{0}
	for v := int64(1); v <= latest; v++ {
		want = append(want, v)
	}
	assert.Equal(t, want, versionRows(t, db), "goose_db_version")
	assert.Equal(t, map[string]int64{"status": 1, "refunds": 1}, backfillRuns(t, db), "runs of each backfill")
}

// versionRows returns the version_id of every row of goose's version
// table, in order, and checks that each is applied.
func versionRows(t *testing.T, db string) []int64 {
	t.Helper()
	var versions []int64
	query(t, db, `SELECT version_id, is_applied FROM goose_db_version ORDER BY version_id`, func(r *spanner.Row) {
		var v int64
		var ok bool
		require.NoError(t, r.Columns(&v, &ok))
		assert.True(t, ok, "version %d is_applied", v)
		versions = append(versions, v)
	})
	return versions
}

// backfillRuns returns how many times each backfill ran.
func backfillRuns(t *testing.T, db string) map[string]int64 {
	t.Helper()
	runs := map[string]int64{}
	query(t, db, `SELECT Name, Runs FROM Backfills`, func(r *spanner.Row) {
		var name string
		var n int64
		require.NoError(t, r.Columns(&name, &n))
		runs[name] = n
	})
	return runs
}

// query runs sql on db with a client of the test's own.
func query(t *testing.T, db, sql string, row func(*spanner.Row)) {
	t.Helper()
	ctx := withDeadline(t)
	c, err := emu.NewClient(ctx, db)
	require.NoError(t, err)
	defer c.Close()
	it := c.Single().Query(ctx, spanner.Statement{SQL: sql})
	defer it.Stop()
	for {
		r, err := it.Next()
		if err == iterator.Done {
			return
		}
		require.NoError(t, err)
		row(r)
	}
}

// tableExists reports whether db has a table named name.
func tableExists(t *testing.T, db, name string) bool {
	t.Helper()
	found := false
	query(t, db, `SELECT table_name FROM information_schema.tables WHERE table_schema = '' AND table_name = '`+name+`'`,
		func(*spanner.Row) { found = true })
	return found
}

var _ = context.Background
