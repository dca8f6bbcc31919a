package spanmutex

import (
	"context"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/spanmutex/spanmutex/ddl"
)

// olderSchema returns the schema as spanmutex created it before leases were
// declared: without the columns ddl.Upgrade adds, nor the sessions table.
func olderSchema(t *testing.T) []string {
	t.Helper()
	return olderSchemaIn(t, ddl.GoogleSQL)
}

// olderSchemaIn is olderSchema in dialect d.
func olderSchemaIn(t *testing.T, d ddl.Dialect) []string {
	t.Helper()
	stmts, err := d.Statements(defaultTable)
	require.NoError(t, err)
	var out []string
	for _, s := range stmts {
		if create, _, _ := strings.Cut(s, "("); strings.Contains(create, defaultTable+ddl.SessionsSuffix) {
			continue
		}
		var keep []string
		for _, line := range strings.Split(s, "\n") {
			trimmed := strings.TrimSpace(line)
			if !strings.Contains(line, "LeaseMicros") && !strings.Contains(line, "WakeAddr") && !strings.Contains(line, "Version") && !strings.Contains(line, "Queued") &&
				!strings.Contains(line, "Permits") && trimmed != "Token INT64," && trimmed != `"Token" bigint,` &&
				trimmed != "Session STRING(36)," && trimmed != `"Session" varchar(36),` {
				keep = append(keep, line)
			}
		}
		out = append(out, strings.Join(keep, "\n"))
	}
	require.Len(t, out, len(stmts)-1, "the sessions table left out")
	return out
}

// applyDDL runs statements on db.
func applyDDL(t *testing.T, db string, stmts ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, emu.UpdateDDL(ctx, db, stmts...))
}

// A table made by an earlier spanmutex is reported with the statement that
// upgrades it; once upgraded, a row written without a declared lease is
// judged by each contender's own lease, as before.
func TestUpgradeFromTablesWithoutDeclaredLeases(t *testing.T) {
	needEmulator(t)
	ctx := context.Background()
	db, err := emu.CreateDatabase(ctx, olderSchema(t)...)
	require.NoError(t, err)
	c := newClient(t, db)

	l, err := NewLock(c, "legacy")
	require.NoError(t, err)
	_, err = l.TryLock(ctx)
	require.ErrorIs(t, err, ErrSchema)
	assert.Contains(t, err.Error(), "LeaseMicros INT64 missing")
	assert.Contains(t, err.Error(), "spanmutex ddl --upgrade --table Mutexes")
	m, err := New(c, "legacy-run")
	require.NoError(t, err)
	_, err = m.Run(ctx, func(context.Context, *Lease) error { t.Error("ran on an old schema"); return nil })
	require.ErrorIs(t, err, ErrSchema)

	upgrade, err := ddl.Upgrade(defaultTable)
	require.NoError(t, err)
	applyDDL(t, db, upgrade...)

	// A holder of the earlier version: STARTED, renewed 5 s ago, no lease.
	renewed := time.Now().Add(-5 * time.Second)
	_, err = c.Apply(ctx, []*spanner.Mutation{spanner.Insert(defaultTable,
		[]string{"Name", "State", "Owner", "LeaseID", "Token", "Attempts", "CreatedAt", "StartedAt", "RenewedAt", "UpdatedAt"},
		[]any{"legacy", "STARTED", "old", "old-lease", int64(7), int64(0), renewed, renewed, renewed, renewed})})
	require.NoError(t, err)
	patient, err := NewLock(c, "legacy", WithLease(time.Minute))
	require.NoError(t, err)
	_, err = patient.TryLock(ctx)
	require.ErrorIs(t, err, ErrHeld, "5 s of silence is within a minute")
	hasty, err := NewLock(c, "legacy", WithLease(time.Second), WithJitter(0))
	require.NoError(t, err)
	lease, err := hasty.TryLock(ctx)
	require.NoError(t, err, "5 s of silence is past a second")
	assert.True(t, lease.TookOver())
	assert.Equal(t, int64(8), lease.Token())
	row, err := c.Single().ReadRow(ctx, defaultTable, spanner.Key{"legacy"}, []string{"LeaseMicros"})
	require.NoError(t, err)
	var us int64
	require.NoError(t, row.Columns(&us))
	assert.Equal(t, time.Second.Microseconds(), us, "the new holder declares its lease")
	require.NoError(t, hasty.Unlock(ctx))
}

// A table upgraded before the Semaphore's columns existed serves Locks, and
// refuses a Semaphore with the statement that adds them, writing nothing;
// once upgraded, the Semaphore works.
func TestUpgradeForTheSemaphore(t *testing.T) {
	needEmulator(t)
	ctx := context.Background()
	upgrade, err := ddl.Upgrade(defaultTable)
	require.NoError(t, err)
	var before, after []string
	for _, s := range upgrade {
		if strings.Contains(s, "Permits") || strings.Contains(s, "Token") {
			after = append(after, s)
		} else {
			before = append(before, s)
		}
	}
	db, err := emu.CreateDatabase(ctx, olderSchema(t)...)
	require.NoError(t, err)
	applyDDL(t, db, before...)
	c := newClient(t, db)
	l, err := NewLock(c, "a-lock")
	require.NoError(t, err)
	_, err = l.TryLock(ctx)
	require.NoError(t, err, "a Lock needs no Semaphore column")
	require.NoError(t, l.Unlock(ctx))

	s, err := NewSemaphore(c, "a-semaphore", 2)
	require.NoError(t, err)
	_, err = s.TryAcquire(ctx, 1)
	require.ErrorIs(t, err, ErrSchema)
	assert.Contains(t, err.Error(), "Permits INT64 missing")
	assert.Contains(t, err.Error(), "spanmutex ddl --upgrade --table Mutexes")
	assert.Empty(t, queuedIDs(t, c, "a-semaphore"), "nothing written")
	recs, err := Inspect(ctx, c, "")
	require.NoError(t, err, "Inspect reads a table without the Semaphore's columns")
	require.Len(t, recs, 1)
	assert.Equal(t, "a-lock", recs[0].Name)

	applyDDL(t, db, after...)
	lease, err := s.TryAcquire(ctx, 1)
	require.NoError(t, err)
	assert.Equal(t, int64(1), lease.Token())
	require.NoError(t, s.Release(ctx))
}
