package ddl

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseDialect(t *testing.T) {
	for in, want := range map[string]Dialect{"googlesql": GoogleSQL, "GoogleSQL": GoogleSQL, "postgresql": PostgreSQL, "pg": PostgreSQL} {
		d, err := ParseDialect(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, d, in)
	}
	_, err := ParseDialect("mysql")
	assert.ErrorContains(t, err, "use googlesql or postgresql")
	assert.Equal(t, "postgresql", PostgreSQL.String())
	assert.False(t, Dialect(7).Valid())
}

// The GoogleSQL methods are the package-level functions.
func TestGoogleSQLIsThePackageLevelSchema(t *testing.T) {
	a, err := GoogleSQL.Statements("Locks")
	require.NoError(t, err)
	b, err := Statements("Locks")
	require.NoError(t, err)
	assert.Equal(t, b, a)
	assert.Equal(t, MutexColumns(), GoogleSQL.MutexColumns())
}

// The PostgreSQL schema quotes every identifier, so that the tables keep
// the GoogleSQL names, and has every column the column lists name, with
// the type the database's INFORMATION_SCHEMA reports.
func TestPostgreSQLSchema(t *testing.T) {
	stmts, err := PostgreSQL.Statements("Locks")
	require.NoError(t, err)
	require.Len(t, stmts, 4)
	assert.True(t, strings.HasPrefix(stmts[0], `CREATE TABLE "Locks" (`), stmts[0])
	assert.True(t, strings.HasPrefix(stmts[1], `CREATE TABLE "LocksQueue" (`), stmts[1])
	assert.True(t, strings.HasPrefix(stmts[2], `CREATE TABLE "Fences" (`), stmts[2])
	assert.True(t, strings.HasPrefix(stmts[3], `CREATE TABLE "LocksSessions" (`), stmts[3])
	ddlType := func(infoType string) string {
		return strings.ReplaceAll(infoType, "character varying", "varchar")
	}
	for col, typ := range PostgreSQL.MutexColumns() {
		assert.Contains(t, stmts[0], `"`+col+`" `+ddlType(typ), "the DDL and MutexColumns agree")
	}
	for col, typ := range PostgreSQL.QueueColumns() {
		assert.Contains(t, stmts[1], `"`+col+`" `+ddlType(typ), "the DDL and QueueColumns agree")
	}
	for _, s := range stmts {
		assert.NotContains(t, s, "--")
	}
	up, err := PostgreSQL.Upgrade("Locks")
	require.NoError(t, err)
	assert.Equal(t, `ALTER TABLE "LocksQueue" ADD COLUMN "WakeAddr" varchar(64)`, up[4])
	assert.Equal(t, `ALTER TABLE "LocksQueue" ADD COLUMN "Token" bigint`, up[7])
	reqs, err := PostgreSQL.RequestsTable("SheetJobs")
	require.NoError(t, err)
	require.Len(t, reqs, 4)
	assert.Contains(t, reqs[0], `CREATE TABLE "SheetJobs" (`)
	assert.Contains(t, reqs[0], `CONSTRAINT "SheetJobsStatusIsKnown"`)
	assert.Contains(t, reqs[1], `CREATE UNIQUE INDEX "SheetJobsOneCreatePerResource" ON "SheetJobs" ("CreateOf") WHERE "CreateOf" IS NOT NULL`)
	ret, err := PostgreSQL.RequestsRetention("SheetJobs", 30)
	require.NoError(t, err)
	assert.Equal(t, `ALTER TABLE "SheetJobs" ADD TTL INTERVAL '30 days' ON "ExpiresFrom"`, ret)
	_, err = PostgreSQL.MutexTable(`x"; DROP`)
	assert.Error(t, err)
}
