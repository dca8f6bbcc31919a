package spangoose_test

import (
	"database/sql"
	"testing"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/spanmutex/spanmutex/ddl"
	spangoose "github.com/spanmutex/spanmutex/goose"
	"github.com/spanmutex/spanmutex/internal/testutil"
)

// On a PostgreSQL-dialect database the Locker works, but goose does not:
// its spanner dialect writes GoogleSQL (INT64, BOOL) for its version table,
// and its postgres dialect asks pg_tables, which Spanner lacks. Both fail
// before goose calls the Locker, so nothing is locked or applied.
func TestPostgreSQLDatabase(t *testing.T) {
	dbPath := testutil.NewDatabase(t, emu, ddl.PostgreSQL)
	ctx := withDeadline(t)
	client, err := emu.NewClient(ctx, dbPath)
	require.NoError(t, err)
	t.Cleanup(client.Close)
	locker, err := spangoose.NewLocker(client)
	require.NoError(t, err)
	gctx, cancel := locker.Context(ctx)
	defer cancel()
	require.NoError(t, locker.Lock(gctx, nil), "the Locker on a PostgreSQL database")
	require.NoError(t, locker.Unlock(gctx, nil))

	db, err := sql.Open("spanner", dbPath)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	for _, c := range []struct {
		dialect database.Dialect
		want    string
	}{
		{database.DialectSpanner, "syntax error"},
		{database.DialectPostgres, `pg_tables`},
	} {
		p, err := goose.NewProvider(c.dialect, db, nil, goose.WithLocker(locker), goose.WithIsolateDDL(true),
			goose.WithGoMigrations(goose.NewGoMigration(1, &goose.GoFunc{Mode: goose.TransactionDisabled}, nil)),
			goose.WithDisableGlobalRegistry(true))
		require.NoError(t, err)
		_, err = p.Up(gctx)
		require.Error(t, err, "goose's %s dialect on a PostgreSQL database", c.dialect)
		assert.Contains(t, err.Error(), c.want)
	}
	assertLockFree(t, client, spangoose.DefaultLockName)
}
