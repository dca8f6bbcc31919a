package ddl

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The sessions table is named after the mutex table, has the columns
// SessionsColumns names with their types in both dialects, and a row
// deletion policy on RenewedAt; Statements and Schema end with it.
func TestSessionsTable(t *testing.T) {
	ddlType := func(infoType string) string { // as the PostgreSQL DDL spells the types
		return strings.ReplaceAll(infoType, "character varying", "varchar")
	}
	for _, c := range []struct {
		d                  Dialect
		create, col, trail string
	}{
		{GoogleSQL, "CREATE TABLE LocksSessions (", "%s %s", ") PRIMARY KEY (SessionID),\n  ROW DELETION POLICY (OLDER_THAN(RenewedAt, INTERVAL 1 DAY))"},
		{PostgreSQL, `CREATE TABLE "LocksSessions" (`, `"%s" %s`, `  PRIMARY KEY ("SessionID")` + "\n" + `) TTL INTERVAL '1 day' ON "RenewedAt"`},
	} {
		t.Run(c.d.String(), func(t *testing.T) {
			stmt, err := c.d.SessionsTable("Locks")
			require.NoError(t, err)
			assert.Contains(t, stmt, c.create)
			assert.NotContains(t, stmt, "MutexesSessions")
			assert.True(t, strings.HasSuffix(strings.TrimSpace(stmt), c.trail), stmt)
			cols := c.d.SessionsColumns()
			assert.Len(t, cols, 5)
			for col, typ := range cols {
				assert.Contains(t, stmt, fmt.Sprintf(c.col, col, ddlType(typ)), "the DDL and SessionsColumns agree")
			}

			stmts, err := c.d.Statements("Locks")
			require.NoError(t, err)
			require.Len(t, stmts, 4)
			assert.True(t, strings.HasPrefix(stmts[3], c.create), stmts[3])
			assert.NotContains(t, stmts[3], "--")
			schema, err := c.d.Schema("Locks", DefaultFenceTable)
			require.NoError(t, err)
			require.Len(t, schema, 4)
			assert.Equal(t, stmt, schema[3])
		})
	}
	a, err := SessionsTable("Locks")
	require.NoError(t, err)
	b, err := GoogleSQL.SessionsTable("Locks")
	require.NoError(t, err)
	assert.Equal(t, a, b, "the package-level function is GoogleSQL's")
	assert.Equal(t, SessionsColumns(), GoogleSQL.SessionsColumns())
	assert.Equal(t, "character varying(36)", PostgreSQL.SessionsColumns()["SessionID"])
	assert.Equal(t, "spanner.commit_timestamp", PostgreSQL.SessionsColumns()["RenewedAt"])
}

// The mutex table and its queue have the nullable Session column, an
// optional one that Upgrade adds, followed by the sessions table's CREATE
// TABLE.
func TestSessionColumn(t *testing.T) {
	assert.Equal(t, "STRING(36)", MutexColumns()["Session"])
	assert.Equal(t, "STRING(36)", AddedMutexColumns()["Session"])
	assert.Equal(t, "character varying(36)", PostgreSQL.MutexColumns()["Session"])
	assert.Equal(t, "character varying(36)", PostgreSQL.AddedMutexColumns()["Session"])
	assert.Equal(t, "STRING(36)", AddedQueueColumns()["Session"])
	assert.Equal(t, "character varying(36)", PostgreSQL.QueueColumns()["Session"])
	for _, c := range []struct {
		d                         Dialect
		column, alter, alterQueue string
		createSessions            string
	}{
		{GoogleSQL, "  Session STRING(36),\n) PRIMARY KEY (Name)", "ALTER TABLE Locks ADD COLUMN Session STRING(36)",
			"ALTER TABLE LocksQueue ADD COLUMN Session STRING(36)", "CREATE TABLE LocksSessions ("},
		{PostgreSQL, `  "Session" varchar(36),` + "\n" + `  PRIMARY KEY ("Name")`, `ALTER TABLE "Locks" ADD COLUMN "Session" varchar(36)`,
			`ALTER TABLE "LocksQueue" ADD COLUMN "Session" varchar(36)`, `CREATE TABLE "LocksSessions" (`},
	} {
		t.Run(c.d.String(), func(t *testing.T) {
			stmts, err := c.d.Statements("Locks")
			require.NoError(t, err)
			assert.Contains(t, stmts[0], c.column, "nullable, last")
			up, err := c.d.Upgrade("Locks")
			require.NoError(t, err)
			require.Len(t, up, 11)
			assert.Equal(t, c.alter, up[8])
			assert.Equal(t, c.alterQueue, up[9])
			sessions, err := c.d.SessionsTable("Locks")
			require.NoError(t, err)
			assert.Equal(t, stripComments(sessions), up[10], "the whole table, comments stripped")
			assert.True(t, strings.HasPrefix(up[10], c.createSessions), up[10])
		})
	}
}

// ValidateTableName accepts names up to 123 characters (room for
// QueueSuffix); the sessions table needs the name to leave room for
// SessionsSuffix, so the functions that name it refuse longer names in one
// line, and those that do not name it still accept them.
func TestSessionsTableNameLength(t *testing.T) {
	fits, long := strings.Repeat("x", 120), strings.Repeat("x", 121)
	require.NoError(t, ValidateTableName(strings.Repeat("x", 123)), "ValidateTableName's accepted set is unchanged")
	for _, d := range []Dialect{GoogleSQL, PostgreSQL} {
		stmt, err := d.SessionsTable(fits)
		require.NoError(t, err)
		assert.Contains(t, stmt, fits+SessionsSuffix)
		_, err = d.Statements(fits)
		assert.NoError(t, err)
		for name, f := range map[string]func(string) error{
			"SessionsTable": func(n string) error { _, err := d.SessionsTable(n); return err },
			"Statements":    func(n string) error { _, err := d.Statements(n); return err },
			"Schema":        func(n string) error { _, err := d.Schema(n, DefaultFenceTable); return err },
			"Upgrade":       func(n string) error { _, err := d.Upgrade(n); return err },
		} {
			for _, n := range []string{long, strings.Repeat("x", 123)} {
				err := f(n)
				require.Error(t, err, "%s %s of %d characters", d, name, len(n))
				assert.Contains(t, err.Error(), "use at most 120")
				assert.NotContains(t, err.Error(), "\n")
			}
			err := f("bad name")
			assert.ErrorContains(t, err, "invalid table name", "%s %s", d, name)
		}
		_, err = d.MutexTable(strings.Repeat("x", 123))
		assert.NoError(t, err, "the mutex table alone still takes 123")
		_, err = d.QueueTable(strings.Repeat("x", 123))
		assert.NoError(t, err)
	}
	_, err := SessionsTable(strings.Repeat("x", 121))
	assert.EqualError(t, err, `ddl: table name "`+strings.Repeat("x", 121)+`" has 121 characters: use at most 120, so that its sessions table (the name followed by "Sessions") fits Spanner's 128`)
}
