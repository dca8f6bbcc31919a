package queue

import (
	"context"
	"os"
	"testing"

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
func TestMain(m *testing.M) { os.Exit(testutil.RunTests(m, &emu)) }

// needEmulator skips the test under -short.
func needEmulator(t *testing.T) {
	t.Helper()
	testutil.NeedEmulator(t, emu)
}

// freshDatabase creates a database of the test's own holding the spanmutex
// schema, the requests table and any extra statements, and returns its path.
func freshDatabase(t *testing.T, extra ...string) string {
	t.Helper()
	return freshDatabaseIn(t, ddl.GoogleSQL, extra...)
}

// dialects are the SQL dialects of the databases that the integration
// tests run through eachDialect use.
var dialects = []ddl.Dialect{ddl.GoogleSQL, ddl.PostgreSQL}

// eachDialect runs test once per dialect, as a subtest named after it
// (googlesql, postgresql). The tests of enqueueing, reading and handling
// requests, and the capture's end-to-end test, run through it; the rest
// run on GoogleSQL only, so that the suite does not double.
func eachDialect(t *testing.T, test func(t *testing.T, d ddl.Dialect)) {
	t.Helper()
	for _, d := range dialects {
		t.Run(d.String(), func(t *testing.T) { test(t, d) })
	}
}

// freshDatabaseIn is freshDatabase in dialect d (extra statements in d).
func freshDatabaseIn(t *testing.T, d ddl.Dialect, extra ...string) string {
	t.Helper()
	reqs, err := d.RequestsStatements(ddl.DefaultRequestsTable)
	require.NoError(t, err)
	return testutil.NewDatabase(t, emu, d, append(reqs, extra...)...)
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
