package spanmutex

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// WithVersion runs a section once per version: the same version stays DONE,
// another version runs it again as a new generation with fresh attempts and
// a higher token.
func TestVersionRunsOncePerVersion(t *testing.T) {
	db := freshDatabase(t)
	c := newClient(t, db)
	ctx := context.Background()
	runs := map[string]int{}
	run := func(version string) (Outcome, error) {
		t.Helper()
		m, err := New(c, "migrate", WithVersion(version), WithMaxAttempts(1))
		require.NoError(t, err)
		return m.Run(ctx, func(context.Context, *Lease) error { runs[version]++; return nil })
	}
	for _, step := range []struct {
		version string
		want    Outcome
	}{
		{"v1", Executed}, {"v1", AlreadyDone}, {"v2", Executed}, {"v2", AlreadyDone}, {"v3", Executed},
	} {
		out, err := run(step.version)
		require.NoError(t, err)
		assert.Equal(t, step.want, out, "version %s", step.version)
	}
	assert.Equal(t, map[string]int{"v1": 1, "v2": 1, "v3": 1}, runs)
	st := inspectOne(t, c, "migrate")
	assert.Equal(t, StateDone, st.State)
	assert.Equal(t, int64(3), st.Token)
	assert.Equal(t, int64(1), st.Attempts, "each version is a generation of its own")

	// A Mutex without a version keeps today's behaviour on the same row.
	m, err := New(c, "migrate")
	require.NoError(t, err)
	out, err := m.Run(ctx, func(context.Context, *Lease) error { t.Error("ran"); return nil })
	require.NoError(t, err)
	assert.Equal(t, AlreadyDone, out)
}

// A table created before the Version column existed (but with the
// declared lease, which every Mutex needs) keeps working without
// WithVersion; with it, the schema check names the missing column and how
// to add it.
func TestVersionNeedsTheColumnOnlyWhenUsed(t *testing.T) {
	needEmulator(t)
	ctx := context.Background()
	old := `CREATE TABLE Mutexes (
  Name STRING(256) NOT NULL, State STRING(16) NOT NULL, Owner STRING(256), LeaseID STRING(36),
  Token INT64 NOT NULL, Attempts INT64 NOT NULL, LastError STRING(MAX),
  CreatedAt TIMESTAMP NOT NULL OPTIONS (allow_commit_timestamp = true),
  StartedAt TIMESTAMP OPTIONS (allow_commit_timestamp = true),
  RenewedAt TIMESTAMP OPTIONS (allow_commit_timestamp = true),
  FinishedAt TIMESTAMP OPTIONS (allow_commit_timestamp = true),
  UpdatedAt TIMESTAMP NOT NULL OPTIONS (allow_commit_timestamp = true),
  LeaseMicros INT64,
) PRIMARY KEY (Name)`
	db, err := emu.CreateDatabase(ctx, old)
	require.NoError(t, err)
	c := newClient(t, db)
	m, err := New(c, "plain")
	require.NoError(t, err)
	out, err := m.Run(ctx, func(context.Context, *Lease) error { return nil })
	require.NoError(t, err)
	assert.Equal(t, Executed, out)
	rows, err := Inspect(ctx, c, "plain")
	require.NoError(t, err)
	require.Len(t, rows, 1)
	assert.Equal(t, "", rows[0].Version, "Inspect works on a table without the column")

	v, err := New(c, "versioned", WithVersion("v1"))
	require.NoError(t, err)
	_, err = v.Run(ctx, func(context.Context, *Lease) error { t.Error("ran"); return nil })
	require.ErrorIs(t, err, ErrSchema)
	assert.Contains(t, err.Error(), "Version STRING(256) missing")
	assert.Contains(t, err.Error(), "spanmutex ddl --upgrade --table Mutexes")
}
