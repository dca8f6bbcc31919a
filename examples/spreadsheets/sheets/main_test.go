package sheets_test

import (
	"context"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/emulator"
	"github.com/spanmutex/spanmutex/examples/spreadsheets/sheets"
	"github.com/spanmutex/spanmutex/queue"
)

// emu is the emulator shared by this package's integration tests; nil with
// -short, which runs only the store's tests.
var emu *emulator.Emulator

// TestMain starts the real Cloud Spanner emulator once for the package.
func TestMain(m *testing.M) {
	os.Exit(emulator.RunTests(m, func(e *emulator.Emulator) { emu = e }))
}

// needEmulator skips the test under -short.
func needEmulator(t *testing.T) {
	t.Helper()
	if emu == nil {
		t.Skip("integration test: needs the emulator (skipped with -short)")
	}
}

// freshQueue returns a queue in a database of the test's own, holding the
// spanmutex schema and the requests table, and the database's path.
func freshQueue(t *testing.T, opts ...queue.Option) (*queue.Queue, string) {
	t.Helper()
	needEmulator(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reqs, err := ddl.RequestsStatements(ddl.DefaultRequestsTable)
	require.NoError(t, err)
	db, err := emu.NewDatabase(ctx, reqs...)
	require.NoError(t, err)
	c, err := emu.NewClient(ctx, db)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	q, err := queue.New(c, opts...)
	require.NoError(t, err)
	return q, db
}

// serve runs the front end of q and store on a test HTTP server and returns
// a client of it.
func serve(t *testing.T, q *queue.Queue, store *sheets.Store, opts ...sheets.ServerOption) (*sheets.Client, *httptest.Server) {
	t.Helper()
	srv, err := sheets.NewServer(q, store, opts...)
	require.NoError(t, err)
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	c, err := sheets.NewClient(ts.URL, ts.Client())
	require.NoError(t, err)
	return c, ts
}
