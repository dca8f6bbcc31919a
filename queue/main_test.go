package queue

import (
	"context"
	"os"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/stretchr/testify/require"

	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/emulator"
	"github.com/spanmutex/spanmutex/internal/testutil"
)

// emu is the emulator shared by this package's integration tests; nil with
// -short.
var emu *emulator.Emulator

// TestMain starts the real Cloud Spanner emulator once for the package; the
// run fails, saying how to install it, if it cannot be found. -short skips
// the integration tests instead.
func TestMain(m *testing.M) {
	os.Exit(emulator.RunTests(m, func(e *emulator.Emulator) {
		emu = e
		if os.Getenv(emulator.HostEnv) == "" {
			os.Setenv(emulator.HostEnv, e.Host())
		}
	}))
}

// needEmulator skips the test under -short.
func needEmulator(t *testing.T) {
	t.Helper()
	if emu == nil {
		t.Skip("integration test: needs the emulator (skipped with -short)")
	}
}

// freshDatabase creates a database of the test's own holding the spanmutex
// schema, the requests table and any extra statements, and returns its path.
func freshDatabase(t *testing.T, extra ...string) string {
	t.Helper()
	needEmulator(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reqs, err := ddl.RequestsStatements(ddl.DefaultRequestsTable)
	require.NoError(t, err)
	db, err := emu.NewDatabase(ctx, append(reqs, extra...)...)
	require.NoError(t, err)
	return db
}

// dialects are the SQL dialects of the databases that the integration
// tests run through eachDialect use.
var dialects = []ddl.Dialect{ddl.GoogleSQL, ddl.PostgreSQL}

// eachDialect runs test once per dialect, as a subtest named after it
// (googlesql, postgresql). The tests of enqueueing, reading and handling
// requests run through it; the rest run on GoogleSQL only, so that the
// suite does not double (the capture refuses PostgreSQL: see DialectError).
func eachDialect(t *testing.T, test func(t *testing.T, d ddl.Dialect)) {
	t.Helper()
	for _, d := range dialects {
		t.Run(d.String(), func(t *testing.T) { test(t, d) })
	}
}

// freshDatabaseIn is freshDatabase in dialect d (extra statements in d).
func freshDatabaseIn(t *testing.T, d ddl.Dialect, extra ...string) string {
	t.Helper()
	needEmulator(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reqs, err := d.RequestsStatements(ddl.DefaultRequestsTable)
	require.NoError(t, err)
	db, err := emu.NewDatabaseIn(ctx, d, append(reqs, extra...)...)
	require.NoError(t, err)
	return db
}

// newClient opens a client of db, as a separate process would, and closes it
// when the test ends.
func newClient(t *testing.T, db string) *spanner.Client {
	t.Helper()
	c, err := emu.NewClient(context.Background(), db)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// waitFor polls cond until it holds or the deadline passes.
var waitFor = testutil.WaitFor
