package spanmutex

import (
	"context"
	"os"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/stretchr/testify/require"

	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/emulator"
	"github.com/spanmutex/spanmutex/internal/cutoff"
	"github.com/spanmutex/spanmutex/internal/sqldialect"
	"github.com/spanmutex/spanmutex/internal/testutil"
)

// emu is the emulator shared by this package's integration tests; nil with
// -short.
var emu *emulator.Emulator

// TestMain starts the real Cloud Spanner emulator once for the package. If it
// cannot be found the run fails, saying how to install it; -short skips the
// integration tests instead.
// The testable examples attach to it (see testutil.RunTests).
func TestMain(m *testing.M) {
	os.Exit(testutil.RunTests(m, &emu))
}

// faultyEmulatorClients starts an emulator of the test's own with
// --enable_fault_injection and opens n clients of its database, all closed
// when the test ends.
func faultyEmulatorClients(t *testing.T, n int) []*spanner.Client {
	t.Helper()
	needEmulator(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	faulty, err := emulator.Start(ctx, emulator.WithFaultInjection())
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, faulty.Close()) })
	clients := make([]*spanner.Client, n)
	for i := range clients {
		c, err := faulty.NewClient(ctx, faulty.Database())
		require.NoError(t, err)
		t.Cleanup(c.Close)
		clients[i] = c
	}
	return clients
}

// needEmulator skips the test under -short.
func needEmulator(t *testing.T) {
	t.Helper()
	testutil.NeedEmulator(t, emu)
}

// freshDatabase creates a database of its own for the test, with the
// spanmutex schema and any extra statements, and returns its path: a
// GoogleSQL one, the dialect of the shared emulator's databases.
func freshDatabase(t *testing.T, extra ...string) string {
	t.Helper()
	return freshDatabaseIn(t, ddl.GoogleSQL, extra...)
}

// dialects are the SQL dialects of the databases that the integration
// tests run through eachDialect use: the Mutex, the Lock and the Fence are
// shown to behave the same on both.
var dialects = []ddl.Dialect{ddl.GoogleSQL, ddl.PostgreSQL}

// eachDialect runs test once per dialect, as a subtest named after it
// (googlesql, postgresql), with a fresh database of that dialect holding
// the spanmutex schema. Tests that exercise SQL statements run through it;
// the rest run on GoogleSQL only, so that the suite does not double.
func eachDialect(t *testing.T, test func(t *testing.T, db string)) {
	t.Helper()
	for _, d := range dialects {
		t.Run(d.String(), func(t *testing.T) {
			test(t, freshDatabaseIn(t, d))
		})
	}
}

// freshDatabaseIn is freshDatabase in dialect d (extra statements in d).
func freshDatabaseIn(t *testing.T, d ddl.Dialect, extra ...string) string {
	t.Helper()
	return testutil.NewDatabase(t, emu, d, extra...)
}

// statementFor returns the statement sql (GoogleSQL with our identifiers
// in backticks, as the library writes them; built for dialect d) in the
// dialect of c's database.
func statementFor(t *testing.T, c *spanner.Client, sql func(d ddl.Dialect) string, params map[string]any) spanner.Statement {
	t.Helper()
	d, err := sqldialect.Detect(context.Background(), c)
	require.NoError(t, err)
	return sqldialect.Statement(d, sql(d), params)
}

// newClient opens a client of db, as a separate service instance would, and
// closes it when the test ends.
func newClient(t *testing.T, db string) *spanner.Client {
	t.Helper()
	c, err := emu.NewClient(context.Background(), db)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// silenceableClient opens a client of db whose RPCs can be cut off, as if
// its process were paused or its network dropped: while silenced
// (Store(true)), every RPC fails with UNAVAILABLE before it reaches Spanner.
func silenceableClient(t *testing.T, db string) (*spanner.Client, *cutoff.Switch) {
	t.Helper()
	cut := &cutoff.Switch{Reason: "test: silenced"}
	c, err := emu.NewClient(context.Background(), db, cut.ClientOptions()...)
	require.NoError(t, err)
	t.Cleanup(func() { cut.Store(false); c.Close() })
	return c, cut
}

// inspectOne reads one row; it fails the test if the row is absent.
func inspectOne(t *testing.T, c *spanner.Client, name string) Record {
	t.Helper()
	rows, err := Inspect(context.Background(), c, name)
	require.NoError(t, err)
	require.Len(t, rows, 1, "row %q", name)
	return rows[0]
}

// waitFor polls cond until it holds or the deadline passes.
var waitFor = testutil.WaitFor
