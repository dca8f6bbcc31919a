package ddl

import (
	_ "embed"
	"fmt"
	"strings"
)

// SessionsSuffix is appended to the mutex table's name to name the table of
// the sessions of Scopes, whose renewals keep the locks that name them live.
const SessionsSuffix = "Sessions"

// maxSessionsTable is the longest mutex table name whose sessions table
// (name+SessionsSuffix) fits Spanner's 128 characters. ValidateTableName
// leaves room for QueueSuffix only, which is shorter.
const maxSessionsTable = 128 - len(SessionsSuffix)

//go:embed sessions.sql
var sessionsSQL string

//go:embed sessions.pg.sql
var sessionsPG string

// validateSessionsTable is ValidateTableName for a mutex table that has a
// sessions table: its name must leave room for SessionsSuffix.
func validateSessionsTable(table string) error {
	if err := ValidateTableName(table); err != nil {
		return err
	}
	if len(table) > maxSessionsTable {
		return fmt.Errorf("ddl: table name %q has %d characters: use at most %d, so that its sessions table (the name followed by %q) fits Spanner's 128",
			table, len(table), maxSessionsTable, SessionsSuffix)
	}
	return nil
}

// SessionsTable returns the CREATE TABLE statement, with comments, of the
// sessions table of the mutex table named table (the sessions table is
// named table+SessionsSuffix): one row per session of a Scope, with a row
// deletion policy that deletes the sessions not renewed for a day. It
// returns an error if table is not a valid name or is longer than 120
// characters.
func SessionsTable(table string) (string, error) {
	return GoogleSQL.SessionsTable(table)
}

// SessionsColumns returns the columns spanmutex reads and writes in the
// sessions table (the mutex table's name followed by SessionsSuffix) with
// their Spanner types, so that a table created by other means can be
// checked against them.
func SessionsColumns() map[string]string {
	return map[string]string{
		"SessionID":   "STRING(36)",
		"Owner":       "STRING(256)",
		"CreatedAt":   "TIMESTAMP",
		"RenewedAt":   "TIMESTAMP",
		"LeaseMicros": "INT64",
	}
}

// SessionsTable is the package-level SessionsTable, in d (in PostgreSQL,
// the row deletion policy is TTL INTERVAL '1 day' ON "RenewedAt").
func (d Dialect) SessionsTable(table string) (string, error) {
	if err := validateSessionsTable(table); err != nil {
		return "", err
	}
	if d == PostgreSQL {
		return renamePG(sessionsPG, DefaultMutexTable+SessionsSuffix, table+SessionsSuffix), nil
	}
	old := "CREATE TABLE " + DefaultMutexTable + SessionsSuffix + " ("
	return strings.Replace(sessionsSQL, old, "CREATE TABLE "+table+SessionsSuffix+" (", 1), nil
}

// SessionsColumns is the package-level SessionsColumns, typed in d.
func (d Dialect) SessionsColumns() map[string]string { return inDialect(d, SessionsColumns()) }
