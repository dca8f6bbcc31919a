package migrations

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/spanmutex/spanmutex"
	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/internal/testutil"
)

// raceRounds is how many rounds TestReplicasRaceToMigrate plays; the
// environment variable MIGRATIONS_RACE_ROUNDS changes it.
func raceRounds(t *testing.T) int {
	if s := os.Getenv("MIGRATIONS_RACE_ROUNDS"); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(t, err)
		return n
	}
	return testutil.Scale(4, 20)
}

// upResult is how one replica's Up ended.
type upResult struct {
	res Result
	err error
}

// raceUp has n replicas, each with its own clients and source, call Up at
// the same moment, and returns how each ended.
func raceUp(t *testing.T, replicas []replica, dir string) []upResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out := make([]upResult, len(replicas))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, r := range replicas {
		m, err := New(r.client, release(t, dir), WithAdminClient(r.admin),
			WithLockOptions(spanmutex.WithOwner(fmt.Sprintf("replica-%d", i)), spanmutex.WithLease(10*time.Second)))
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res, err := m.Up(ctx)
			out[i] = upResult{res, err}
		}()
	}
	close(start)
	wg.Wait()
	return out
}

// state reads golang-migrate's version and the backfill counters.
func state(t *testing.T, c *spanner.Client) (version int64, dirty bool, runs map[string]int64) {
	t.Helper()
	ctx := context.Background()
	it := c.Single().Query(ctx, spanner.Statement{SQL: "SELECT Version, Dirty FROM " + DefaultMigrationsTable})
	defer it.Stop()
	row, err := it.Next()
	require.NoError(t, err)
	require.NoError(t, row.Columns(&version, &dirty))
	runs = map[string]int64{}
	err = c.Single().Query(ctx, spanner.Statement{SQL: "SELECT Name, Runs FROM Backfills"}).Do(func(r *spanner.Row) error {
		var name string
		var n int64
		if err := r.Columns(&name, &n); err != nil {
			return err
		}
		runs[name] = n
		return nil
	})
	require.NoError(t, err)
	return version, dirty, runs
}

// TestReplicasRaceToMigrate is the mission's first user: 8 replicas start at
// once and each runs the migrations (DDL and DML backfills) with
// golang-migrate; then a second release adds a DDL and a backfill and its 8
// replicas race again. Over every round: exactly one replica applies each
// release, the 7 others wait and succeed with nothing to apply, the
// database ends at the release's version and not dirty, and each backfill
// ran exactly once.
func TestReplicasRaceToMigrate(t *testing.T) {
	needEmulator(t)
	rounds := raceRounds(t)
	var dirtyRounds, doubleBackfills, gaveUp, retries int
	began := time.Now()
	for round := range rounds {
		db := freshDatabase(t)
		replicas := make([]replica, 8)
		for i := range replicas {
			replicas[i] = newReplica(t, db)
		}
		for _, rel := range []struct {
			dir     string
			version int64
			applied int
			runs    map[string]int64
		}{
			{"release1", 4, 4, map[string]int64{"status": 1, "priority": 0}},
			{"release2", 6, 2, map[string]int64{"status": 1, "priority": 1}},
		} {
			results := raceUp(t, replicas, rel.dir)
			appliers := 0
			for i, r := range results {
				retries += r.res.DDLRetries
				if r.err != nil {
					gaveUp++
					t.Errorf("round %d %s: replica %d: %v", round, rel.dir, i, r.err)
					continue
				}
				switch len(r.res.Applied) {
				case rel.applied:
					appliers++
				case 0:
					assert.Equal(t, int(rel.version), r.res.Before, "round %d %s: replica %d found nothing to do, so it came after the applier", round, rel.dir, i)
				default:
					t.Errorf("round %d %s: replica %d applied %v", round, rel.dir, i, r.res.Applied)
				}
			}
			assert.Equal(t, 1, appliers, "round %d %s: replicas that applied the release", round, rel.dir)
			version, dirty, runs := state(t, replicas[0].client)
			if dirty {
				dirtyRounds++
			}
			for name, n := range runs {
				if n > 1 {
					doubleBackfills++
				}
				assert.Equal(t, rel.runs[name], n, "round %d %s: backfill %s ran %d times", round, rel.dir, name, n)
			}
			assert.Equal(t, rel.version, version, "round %d %s", round, rel.dir)
			assert.False(t, dirty, "round %d %s", round, rel.dir)
		}
	}
	t.Logf("%d rounds of 8 replicas x 2 releases in %v: %d dirty, %d double backfills, %d gave up; %d DDL sends retried after a concurrent-schema-change rejection",
		rounds, time.Since(began).Round(time.Second), dirtyRounds, doubleBackfills, gaveUp, retries)
}

// openTransactionOnLock is a slog handler that, when the Migrator logs that
// it holds the lock, opens a read-write transaction on c and keeps it open
// for hold, as another replica's or the service's transaction would be when
// the migration's DDL starts.
type openTransactionOnLock struct {
	slog.Handler
	on     string // the start of the log message that opens it
	c      *spanner.Client
	hold   time.Duration
	opened chan struct{}
	done   chan error
}

func (h *openTransactionOnLock) Enabled(context.Context, slog.Level) bool { return true }

func (h *openTransactionOnLock) Handle(_ context.Context, r slog.Record) error {
	if !strings.HasPrefix(r.Message, h.on) {
		return nil
	}
	select {
	case <-h.opened:
		return nil // once
	default:
	}
	opening := make(chan struct{})
	go func() {
		_, err := h.c.ReadWriteTransaction(context.Background(), func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
			if _, err := tx.Update(ctx, spanner.NewStatement("UPDATE Fences SET Token = Token + 1 WHERE TRUE")); err != nil {
				return err
			}
			select {
			case <-opening:
			default:
				close(opening)
			}
			// The transaction stays open: this is the load, not a wait for anything.
			time.Sleep(h.hold)
			return nil
		})
		h.done <- err
	}()
	<-opening
	close(h.opened)
	return nil
}

func (h *openTransactionOnLock) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *openTransactionOnLock) WithGroup(string) slog.Handler      { return h }

// The emulator rejects DDL while a read-write transaction is open ("Schema
// change operation rejected because a concurrent schema change operation or
// read-write transaction is already in progress"): Up sends it again, and
// the migrations apply with the version clean. The transaction is opened as
// the lock is taken, so it is the version table's creation that is
// rejected. (Opened later, before a migration's DDL, it holds up the
// version's dirty mark instead, whose transaction waits for it: the DDL that
// follows then goes through; the same retry covers both.)
func TestDDLRejectedByConcurrentTransactionsIsRetried(t *testing.T) {
	needEmulator(t)
	// Whether the emulator rejects the DDL or makes it wait depends on the
	// moment the transaction is aborted or retried; rounds go on (each on a
	// new database, each checked) until one saw a rejection.
	const maxRounds = 5
	for round := 1; ; round++ {
		db := freshDatabase(t)
		r := newReplica(t, db)
		h := &openTransactionOnLock{on: "holding the migrations lock", c: newReplica(t, db).client, hold: time.Second,
			opened: make(chan struct{}), done: make(chan error, 1)}
		m, err := New(r.client, release(t, "release2"), WithAdminClient(r.admin), WithLogger(slog.New(h)))
		require.NoError(t, err)
		res, err := m.Up(context.Background())
		require.NoError(t, err)
		require.NoError(t, <-h.done)
		assert.Equal(t, []int{1, 2, 3, 4, 5, 6}, res.Applied)
		version, dirty, runs := state(t, r.client)
		assert.Equal(t, int64(6), version)
		assert.False(t, dirty)
		assert.Equal(t, map[string]int64{"status": 1, "priority": 1}, runs)
		t.Logf("round %d: DDL sent again %d times after concurrent-schema-change rejections", round, res.DDLRetries)
		if res.DDLRetries > 0 {
			return
		}
		if round == maxRounds {
			t.Fatalf("the emulator rejected no DDL in %d rounds: the retry was not exercised", maxRounds)
		}
	}
}

// A DML file whose transaction fails leaves nothing applied and the version
// clean at the last good migration; Up reports the error. On both dialects:
// on PostgreSQL, Up creates the version table itself (golang-migrate's
// driver would create it in GoogleSQL) and reads it by key.
func TestFailedDMLLeavesTheVersionClean(t *testing.T) {
	for _, d := range []ddl.Dialect{ddl.GoogleSQL, ddl.PostgreSQL} {
		t.Run(d.String(), func(t *testing.T) { testFailedDMLLeavesTheVersionClean(t, d) })
	}
}

func testFailedDMLLeavesTheVersionClean(t *testing.T, d ddl.Dialect) {
	db := freshDatabaseIn(t, d)
	r := newReplica(t, db)
	dir := t.TempDir()
	create := "CREATE TABLE T (Id INT64 NOT NULL, N INT64) PRIMARY KEY (Id)"
	if d == ddl.PostgreSQL {
		create = "CREATE TABLE t (id bigint NOT NULL, n bigint, PRIMARY KEY (id))" // the DML below folds to these names
	}
	for name, body := range map[string]string{
		"1_t.up.sql":   create,
		"2_bad.up.sql": DMLMarker + "\nINSERT INTO T (Id, N) VALUES (1, 1);\nINSERT INTO T (Id, N) VALUES (1, 2);",
	} {
		require.NoError(t, os.WriteFile(dir+"/"+name, []byte(body), 0o644))
	}
	src, err := iofs.New(os.DirFS(dir), ".")
	require.NoError(t, err)
	m, err := New(r.client, src, WithAdminClient(r.admin))
	require.NoError(t, err)
	res, err := m.Up(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "DML migration failed; its transaction rolled back")
	assert.Equal(t, []int{1}, res.Applied)
	assert.Equal(t, 1, res.After)
	version, dirty := readVersion(t, r.client)
	assert.Equal(t, int64(1), version)
	assert.False(t, dirty, "the failed DML applied nothing, so the version is clean")
	var n int64
	require.NoError(t, r.client.Single().Query(context.Background(), spanner.Statement{SQL: "SELECT COUNT(*) FROM T"}).Do(func(row *spanner.Row) error { return row.Columns(&n) }))
	assert.Equal(t, int64(0), n, "the first INSERT of the failed file rolled back")
}

func readVersion(t *testing.T, c *spanner.Client) (version int64, dirty bool) {
	t.Helper()
	it := c.Single().Read(context.Background(), DefaultMigrationsTable, spanner.AllKeys(), []string{"Version", "Dirty"}) // either dialect
	defer it.Stop()
	row, err := it.Next()
	require.NoError(t, err)
	require.NoError(t, row.Columns(&version, &dirty))
	return version, dirty
}
