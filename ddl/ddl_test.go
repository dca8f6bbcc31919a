package ddl

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMutexTableRenames(t *testing.T) {
	stmt, err := MutexTable("Locks_2")
	require.NoError(t, err)
	assert.Contains(t, stmt, "CREATE TABLE Locks_2 (")
	assert.NotContains(t, stmt, "CREATE TABLE Mutexes")
	for col, typ := range MutexColumns() {
		assert.Contains(t, stmt, col+" "+typ, "the DDL and MutexColumns agree")
	}
}

func TestQueueTableHasItsColumns(t *testing.T) {
	stmt, err := QueueTable("Locks")
	require.NoError(t, err)
	assert.Contains(t, stmt, "CREATE TABLE LocksQueue (")
	for col, typ := range QueueColumns() {
		assert.Contains(t, stmt, col+" "+typ, "the DDL and QueueColumns agree")
	}
}

// Upgrade adds every column that the current schema has and the first
// released one lacked, nullable, to both tables.
func TestUpgradeAddsTheDeclaredLease(t *testing.T) {
	stmts, err := Upgrade("Locks")
	require.NoError(t, err)
	assert.Equal(t, []string{
		"ALTER TABLE Locks ADD COLUMN LeaseMicros INT64",
		"ALTER TABLE Locks ADD COLUMN Version STRING(256)",
		"ALTER TABLE Locks ADD COLUMN Queued BOOL",
		"ALTER TABLE LocksQueue ADD COLUMN LeaseMicros INT64",
		"ALTER TABLE LocksQueue ADD COLUMN WakeAddr STRING(64)",
		"ALTER TABLE Locks ADD COLUMN Permits INT64",
		"ALTER TABLE LocksQueue ADD COLUMN Permits INT64",
		"ALTER TABLE LocksQueue ADD COLUMN Token INT64",
		"ALTER TABLE Locks ADD COLUMN Session STRING(36)",
		"ALTER TABLE LocksQueue ADD COLUMN Session STRING(36)",
	}, stmts[:len(stmts)-1])
	assert.True(t, strings.HasPrefix(stmts[len(stmts)-1], "CREATE TABLE LocksSessions ("), "and the sessions table")
	_, err = Upgrade("bad name")
	assert.ErrorContains(t, err, "invalid table name")
}

func TestStatementsHaveNoComments(t *testing.T) {
	stmts, err := Statements(DefaultMutexTable)
	require.NoError(t, err)
	require.Len(t, stmts, 4)
	for _, s := range stmts {
		assert.NotContains(t, s, "--")
	}
	assert.True(t, strings.HasPrefix(stmts[0], "CREATE TABLE Mutexes ("))
	assert.True(t, strings.HasPrefix(stmts[1], "CREATE TABLE MutexesQueue ("))
	assert.True(t, strings.HasPrefix(stmts[2], "CREATE TABLE Fences ("))
	assert.True(t, strings.HasPrefix(stmts[3], "CREATE TABLE MutexesSessions ("))
	renamed, err := Statements("Locks")
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(renamed[1], "CREATE TABLE LocksQueue ("))
	assert.True(t, strings.HasPrefix(renamed[3], "CREATE TABLE LocksSessions ("))
}

func TestValidateTableName(t *testing.T) {
	for _, ok := range []string{"Mutexes", "a", "A_1", strings.Repeat("x", 123)} {
		assert.NoError(t, ValidateTableName(ok), ok)
	}
	for _, bad := range []string{"", "1abc", "_x", "a-b", "a b", "a;DROP", "`a`", strings.Repeat("x", 124), "é"} {
		err := ValidateTableName(bad)
		assert.Error(t, err, bad)
		if err != nil {
			assert.Contains(t, err.Error(), "use a letter followed by")
		}
	}
	_, err := MutexTable("bad-name")
	assert.Error(t, err)
	_, err = Statements("bad-name")
	assert.Error(t, err)
}
