package migrations

import (
	"context"
	"os"
	"testing"

	"cloud.google.com/go/spanner"
	dbadmin "cloud.google.com/go/spanner/admin/database/apiv1"
	"github.com/golang-migrate/migrate/v4/source"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/stretchr/testify/require"

	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/emulator"
	"github.com/spanmutex/spanmutex/internal/testutil"
)

// emu is the emulator shared by this package's integration tests; nil with
// -short.
var emu *emulator.Emulator

func TestMain(m *testing.M) { os.Exit(testutil.RunTests(m, &emu)) }

// needEmulator skips the test under -short.
func needEmulator(t *testing.T) {
	t.Helper()
	testutil.NeedEmulator(t, emu)
}

// freshDatabase creates a database with the spanmutex schema and nothing
// else.
func freshDatabase(t *testing.T) string {
	t.Helper()
	return freshDatabaseIn(t, ddl.GoogleSQL)
}

// freshDatabaseIn is freshDatabase in dialect d.
func freshDatabaseIn(t *testing.T, d ddl.Dialect) string {
	t.Helper()
	return testutil.NewDatabase(t, emu, d)
}

// replica is one service instance: its own data and admin clients.
type replica struct {
	client *spanner.Client
	admin  *dbadmin.DatabaseAdminClient
}

func newReplica(t *testing.T, db string) replica {
	t.Helper()
	ctx := context.Background()
	c, err := emu.NewClient(ctx, db)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	a, err := dbadmin.NewDatabaseAdminClient(ctx, emu.ClientOptions()...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Close() })
	return replica{client: c, admin: a}
}

// release opens the migration files of testdata/dir.
func release(t *testing.T, dir string) source.Driver {
	t.Helper()
	src, err := iofs.New(os.DirFS("testdata"), dir)
	require.NoError(t, err)
	t.Cleanup(func() { _ = src.Close() })
	return src
}
