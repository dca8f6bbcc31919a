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

// createDatabaseIn creates a database of dialect d holding exactly stmts,
// dropped when the test ends (the emulator allows 100 per instance).
func createDatabaseIn(t *testing.T, d ddl.Dialect, stmts ...string) string {
	t.Helper()
	needEmulator(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, err := emu.CreateDatabaseIn(ctx, d, stmts...)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := emu.DropDatabase(ctx, db); err != nil {
			t.Logf("drop %s: %v", db, err)
		}
	})
	return db
}

// checkedStore returns a store of the default table of db, of a Mutex, and
// what its checkSchema returned.
func checkedStore(t *testing.T, db string) (*spannerStore, error) {
	t.Helper()
	s := newSpannerStore(newClient(t, db), defaultTable, time.Minute)
	return s, s.checkSchema(context.Background())
}

// sessionsStatement returns the CREATE TABLE of the sessions table of the
// default table, in d, comments stripped, as Statements gives it.
func sessionsStatement(t *testing.T, d ddl.Dialect) string {
	t.Helper()
	stmts, err := d.Statements(defaultTable)
	require.NoError(t, err)
	last := stmts[len(stmts)-1]
	require.Contains(t, last, defaultTable+ddl.SessionsSuffix)
	return last
}

// Statements apply in both dialects: the sessions table comes with its row
// deletion policy (Spanner validates it: on a column that is not a
// timestamp it is refused), and checkSchema finds the sessions.
func TestSessionsSchemaApplies(t *testing.T) {
	eachDialect(t, func(t *testing.T, db string) {
		s, err := checkedStore(t, db)
		require.NoError(t, err)
		assert.True(t, s.hasSessions.Load())
		d, err := s.dialect.Get(context.Background())
		require.NoError(t, err)

		var policy spanner.NullString
		stmt := spanner.Statement{SQL: "SELECT row_deletion_policy_expression FROM information_schema.tables WHERE table_name = '" + defaultTable + ddl.SessionsSuffix + "'"}
		err = s.client.Single().Query(context.Background(), stmt).Do(func(r *spanner.Row) error { return r.Columns(&policy) })
		require.NoError(t, err)
		want := map[ddl.Dialect]string{ // as the emulator reports them
			ddl.GoogleSQL:  "OLDER_THAN(RenewedAt, INTERVAL 1 DAY)",
			ddl.PostgreSQL: `INTERVAL '24 HOURS' ON "RenewedAt"`,
		}[d]
		assert.Equal(t, want, policy.StringVal, "the row deletion policy")
	})
}

// A database made before sessions (without the Session column and the
// sessions table) is upgraded by ddl.Upgrade, in both dialects: with every
// statement but the sessions table, checkSchema accepts it without
// sessions; with the sessions table too, with sessions.
func TestUpgradeAddsSessions(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.String(), func(t *testing.T) {
			db := createDatabaseIn(t, d, olderSchemaIn(t, d)...)
			s, err := checkedStore(t, db)
			require.ErrorIs(t, err, ErrSchema, "LeaseMicros is missing")
			assert.False(t, s.hasSessions.Load())

			up, err := d.Upgrade(defaultTable)
			require.NoError(t, err)
			applyDDL(t, db, up[:len(up)-1]...)
			s, err = checkedStore(t, db)
			require.NoError(t, err)
			assert.False(t, s.hasSessions.Load(), "the Session column alone is not sessions")

			applyDDL(t, db, up[len(up)-1])
			s, err = checkedStore(t, db)
			require.NoError(t, err)
			assert.True(t, s.hasSessions.Load())
		})
	}
}

// Without the sessions table, a table works without sessions: no error,
// hasSessions false, whether or not the mutex table has the Session
// column, even one of another type.
func TestNoSessionsTable(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.String(), func(t *testing.T) {
			stmts, err := d.Statements(defaultTable)
			require.NoError(t, err)
			s, err := checkedStore(t, freshDatabaseIn(t, d))
			require.NoError(t, err)
			require.True(t, s.hasSessions.Load(), "the current schema has sessions")

			db := createDatabaseIn(t, d, stmts[:len(stmts)-1]...)
			s, err = checkedStore(t, db)
			require.NoError(t, err)
			assert.False(t, s.hasSessions.Load())

			other := map[ddl.Dialect][2]string{
				ddl.GoogleSQL:  {"Session STRING(36),", "Session STRING(MAX),"},
				ddl.PostgreSQL: {`"Session" varchar(36),`, `"Session" varchar,`},
			}[d]
			mutex := strings.Replace(stmts[0], other[0], other[1], 1)
			require.NotEqual(t, stmts[0], mutex)
			s, err = checkedStore(t, createDatabaseIn(t, d, mutex, stmts[1]))
			require.NoError(t, err, "a Session column of the user's own, without a sessions table")
			assert.False(t, s.hasSessions.Load())
		})
	}
}

// A sessions table that lacks a column or has one of another type, or a
// Session column of another type beside a sessions table, is an error
// matching ErrSchema that names them, in both dialects.
func TestSessionsTableWithWrongColumns(t *testing.T) {
	for _, c := range []struct {
		d ddl.Dialect
		// in the sessions table: the Owner column, the LeaseMicros column
		// and another type for it; in the mutex table: the Session column
		// and another type for it
		owner, lease, otherLease, session, otherSession string
		want                                            []string
		wantSession                                     string
	}{
		{ddl.GoogleSQL, "Owner STRING(256),", "LeaseMicros INT64 NOT NULL", "LeaseMicros STRING(10)", "Session STRING(36),", "Session STRING(MAX),",
			[]string{"MutexesSessions.LeaseMicros is STRING(10), want INT64", "MutexesSessions.Owner STRING(256) missing"},
			"Session is STRING(MAX), want STRING(36)"},
		{ddl.PostgreSQL, `"Owner" varchar(256),`, `"LeaseMicros" bigint NOT NULL`, `"LeaseMicros" varchar(10)`, `"Session" varchar(36),`, `"Session" varchar,`,
			[]string{"MutexesSessions.LeaseMicros is character varying(10), want bigint", "MutexesSessions.Owner character varying(256) missing"},
			"Session is character varying, want character varying(36)"},
	} {
		t.Run(c.d.String(), func(t *testing.T) {
			stmts, err := c.d.Statements(defaultTable)
			require.NoError(t, err)
			sessions := sessionsStatement(t, c.d)
			broken := strings.Replace(strings.Replace(sessions, c.owner, "", 1), c.lease, c.otherLease, 1)
			require.NotContains(t, broken, c.owner)
			require.Contains(t, broken, c.otherLease)
			s, err := checkedStore(t, createDatabaseIn(t, c.d, stmts[0], stmts[1], broken))
			require.ErrorIs(t, err, ErrSchema)
			for _, w := range c.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.Contains(t, err.Error(), "table Mutexes: has a sessions table, MutexesSessions, but not as spanmutex's sessions need it")
			assert.Contains(t, err.Error(), "sessions are optional")
			assert.NotContains(t, err.Error(), "\n")
			assert.False(t, s.hasSessions.Load())

			mutex := strings.Replace(stmts[0], c.session, c.otherSession, 1)
			require.NotEqual(t, stmts[0], mutex)
			s, err = checkedStore(t, createDatabaseIn(t, c.d, mutex, stmts[1], sessions))
			require.ErrorIs(t, err, ErrSchema)
			assert.Contains(t, err.Error(), c.wantSession)
			assert.False(t, s.hasSessions.Load())
		})
	}
}
