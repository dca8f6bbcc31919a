package spanmutex

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mutexRunRPCs are the RPCs of the first uncontended Run of a Mutex whose
// section returns at once, as spanmutex made them before sessions (main at
// 7c2af87, measured by this test): the schema check (the dialect and
// INFORMATION_SCHEMA, two queries), the key read, the acquisition (a query
// and its Commit) and the finish (two reads and its Commit).
var mutexRunRPCs = []string{"ExecuteStreamingSql", "ExecuteStreamingSql", "StreamingRead",
	"ExecuteStreamingSql", "Commit", "StreamingRead", "StreamingRead", "Commit"}

// runRPCs makes one uncontended Run of m, whose section returns at once,
// and returns the RPCs it made (but the client's own session pool's).
func runRPCs(t *testing.T, log *rpcLog, m *Mutex) []string {
	t.Helper()
	n := log.len()
	out, err := m.Run(context.Background(), func(context.Context, *Lease) error { return nil })
	require.NoError(t, err)
	require.Equal(t, Executed, out)
	return withoutPoolRPCs(log.since(n))
}

// withoutPoolRPCs returns calls without the client's own session pool's
// RPCs, which depend on when the pool grows, not on spanmutex.
func withoutPoolRPCs(calls []string) []string {
	return slices.DeleteFunc(calls, func(c string) bool { return c == "BatchCreateSessions" || c == "CreateSession" })
}

// A Mutex without sessions costs what it did before sessions: its first
// uncontended Run, on a table that has sessions, makes the same RPCs (the
// schema check, a key read, the acquisition, the finish). Through its
// Scope's session, started by that Run, it makes the same RPCs: the
// acquisition's Commit inserts the session's row (session.next).
func TestMutexRunRPCsWithAndWithoutSessions(t *testing.T) {
	needEmulator(t)
	t.Parallel()
	db := freshDatabase(t)
	var log rpcLog
	c := countingClient(t, db, &log)
	const lease = 900 * time.Millisecond
	plain, err := New(c, "cost-plain", WithLease(lease), WithScope(NewScope(WithoutWakeUps())))
	require.NoError(t, err)
	calls := runRPCs(t, &log, plain)
	t.Logf("a Run without sessions: %d RPCs %v", len(calls), calls)
	assert.Equal(t, mutexRunRPCs, calls, "as before sessions")

	sessioned, err := New(c, "cost-session", WithLease(lease), WithScope(NewScope(WithoutWakeUps(), WithSessions())))
	require.NoError(t, err)
	calls = runRPCs(t, &log, sessioned)
	t.Logf("a Run through a session it starts: %d RPCs %v", len(calls), calls)
	assert.Equal(t, mutexRunRPCs, calls, "as without sessions: the acquisition starts the session")
	assert.Len(t, sessionIDs(t, c), 1, "the session's row, written by the acquisition")
}
