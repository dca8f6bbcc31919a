// Package ddl holds the Cloud Spanner schema (GoogleSQL) that spanmutex and
// its packages need, as the .sql files it was written in, embedded into the
// binary, with the table names substituted.
//
//   - Statements returns everything package spanmutex needs: the mutex table
//     (MutexTable: one row per Mutex or Lock name), its waiters' queue
//     (QueueTable, named table+QueueSuffix), the fence table (FenceTable)
//     and the sessions of Scopes (SessionsTable, named
//     table+SessionsSuffix), comments stripped. Schema returns the same
//     with comments.
//   - Upgrade returns the statements that bring a table made by an earlier
//     spanmutex up to this schema; every added column is nullable, and rows
//     written without it keep working; the last creates the sessions table.
//   - MutexColumns and AddedMutexColumns say which columns and types the
//     library checks for, so that a table made by other means can be checked.
//   - RequestsStatements and RequestsRetention are package queue's table, its
//     indexes and an optional row deletion policy; CaptureStatements and
//     ChangeStream are its change-stream capture's checkpoint table and stream.
//
// Every function that takes a name validates it (ValidateTableName) and
// returns an error rather than a statement with a bad name. Apply the
// statements with your migration tool, with `spanmutex ddl | gcloud spanner
// databases ddl update DB --instance=INST --ddl-file=/dev/stdin`, or in tests
// with package emulator, which applies them for you.
package ddl

import (
	_ "embed"
	"fmt"
	"regexp"
	"strings"
)

// DefaultMutexTable is the table name used when none is configured.
const DefaultMutexTable = "Mutexes"

// DefaultFenceTable is the table of spanmutex.Fence when none is configured.
const DefaultFenceTable = "Fences"

// QueueSuffix is appended to the mutex table's name to name the table of
// the waiters of reusable locks.
const QueueSuffix = "Queue"

//go:embed mutexes.sql
var mutexesSQL string

//go:embed queue.sql
var queueSQL string

//go:embed fences.sql
var fencesSQL string

// identifierPattern is what Spanner (GoogleSQL) accepts as an unquoted table
// name, less room for QueueSuffix.
var identifierPattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,122}$`)

// ValidateTableName reports whether name can be used as a spanmutex table
// name: a letter followed by up to 122 letters, digits or underscores (so
// that name+QueueSuffix fits Spanner's 128).
func ValidateTableName(name string) error {
	if !identifierPattern.MatchString(name) {
		return fmt.Errorf("ddl: invalid table name %q: use a letter followed by up to 122 letters, digits or underscores", name)
	}
	return nil
}

// QueueTable returns the CREATE TABLE statement for the waiters' queue of
// the mutex table named table (the queue is named table+QueueSuffix).
func QueueTable(table string) (string, error) {
	if err := ValidateTableName(table); err != nil {
		return "", err
	}
	return strings.Replace(queueSQL, "CREATE TABLE "+DefaultMutexTable+QueueSuffix+" (", "CREATE TABLE "+table+QueueSuffix+" (", 1), nil
}

// FenceTable returns the CREATE TABLE statement for the fence table named table.
func FenceTable(table string) (string, error) {
	if err := ValidateTableName(table); err != nil {
		return "", err
	}
	return strings.Replace(fencesSQL, "CREATE TABLE "+DefaultFenceTable+" (", "CREATE TABLE "+table+" (", 1), nil
}

// Schema returns every statement of the schema, with comments, for a mutex
// table named table (its queue and its sessions table) and a fence table
// named fenceTable: the mutex table, the queue, the fence table and the
// sessions table, in that order. Names longer than 120 characters are
// refused: the sessions table's name would not fit.
func Schema(table, fenceTable string) ([]string, error) {
	return GoogleSQL.Schema(table, fenceTable)
}

// MutexTable returns the CREATE TABLE statement for the mutex table, named
// table, with its comments. It returns an error if table is not a valid name.
func MutexTable(table string) (string, error) {
	if err := ValidateTableName(table); err != nil {
		return "", err
	}
	return strings.Replace(mutexesSQL, "CREATE TABLE "+DefaultMutexTable+" (", "CREATE TABLE "+table+" (", 1), nil
}

// Statements returns the statements that create everything spanmutex needs,
// with the mutex table named table (its queue named table+QueueSuffix, its
// sessions table table+SessionsSuffix) and the fence table named
// DefaultFenceTable, in Schema's order, ready for UpdateDatabaseDdl or
// CreateDatabase's ExtraStatements. Comments are stripped.
func Statements(table string) ([]string, error) {
	return GoogleSQL.Statements(table)
}

// stripComments removes "--" comment lines, which the admin API rejects.
func stripComments(sql string) string {
	var b strings.Builder
	for _, line := range strings.Split(sql, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "--") {
			continue
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return strings.TrimSpace(b.String())
}

// MutexColumns returns the columns spanmutex reads and writes in the mutex
// table with their Spanner types, so that a table created by other means can
// be checked against them.
func MutexColumns() map[string]string {
	return map[string]string{
		"Name":        "STRING(256)",
		"State":       "STRING(16)",
		"Owner":       "STRING(256)",
		"LeaseID":     "STRING(36)",
		"Token":       "INT64",
		"Attempts":    "INT64",
		"LastError":   "STRING(MAX)",
		"CreatedAt":   "TIMESTAMP",
		"StartedAt":   "TIMESTAMP",
		"RenewedAt":   "TIMESTAMP",
		"FinishedAt":  "TIMESTAMP",
		"UpdatedAt":   "TIMESTAMP",
		"LeaseMicros": "INT64",
		"Version":     "STRING(256)",
		"Queued":      "BOOL",
		"Permits":     "INT64",
		"Session":     "STRING(36)",
	}
}

// AddedMutexColumns returns the columns of MutexColumns that a mutex table
// may lack and still work, with their types: they serve only the features
// that need them (Version: spanmutex.WithVersion; Queued: a Lock's
// uncontended Lock and Unlock without a read of its queue; Permits: a
// Semaphore's size; Session: the sessions of Scopes, with the sessions
// table). Upgrade adds them.
func AddedMutexColumns() map[string]string {
	return map[string]string{
		"Version": "STRING(256)",
		"Queued":  "BOOL",
		"Permits": "INT64",
		"Session": "STRING(36)",
	}
}

// QueueColumns returns the columns spanmutex reads and writes in the
// waiters' queue table (the mutex table's name followed by QueueSuffix).
func QueueColumns() map[string]string {
	return map[string]string{
		"Name":        "STRING(256)",
		"EnqueuedAt":  "TIMESTAMP",
		"WaiterID":    "STRING(36)",
		"Owner":       "STRING(256)",
		"RenewedAt":   "TIMESTAMP",
		"LeaseMicros": "INT64",
		"WakeAddr":    "STRING(64)",
		"Permits":     "INT64",
		"Token":       "INT64",
		"Session":     "STRING(36)",
	}
}

// AddedQueueColumns returns the columns of QueueColumns that a queue table
// may lack and still serve a Lock, with their types: only a Semaphore or
// RWLock needs Permits and Token; Session serves the sessions of Scopes,
// with the mutex table's Session column. Upgrade adds them.
func AddedQueueColumns() map[string]string {
	return map[string]string{
		"Permits": "INT64",
		"Token":   "INT64",
		"Session": "STRING(36)",
	}
}

// Upgrade returns the statements that bring a mutex table named table, and
// its queue, created by an earlier spanmutex up to this schema: the columns
// added since, all nullable, so that rows already there keep working (a row
// without a declared lease is judged by each contender's own lease, as
// before; an entry without a wake-up address is found by polling; a row
// without a version is of no version; a row without a session is kept live
// by its own renewals alone), and last the CREATE TABLE of the sessions
// table (comments stripped). Apply those whose column the table lacks
// (Spanner rejects adding a column twice), and the CREATE TABLE if the
// sessions table does not exist, before or while the new version rolls
// out. Names longer than 120 characters are refused, as by Schema.
func Upgrade(table string) ([]string, error) {
	return GoogleSQL.Upgrade(table)
}

// upgradeGoogleSQL is Upgrade's ALTER TABLE statements in GoogleSQL.
func upgradeGoogleSQL(table string) []string {
	return []string{
		"ALTER TABLE " + table + " ADD COLUMN LeaseMicros INT64",
		"ALTER TABLE " + table + " ADD COLUMN Version STRING(256)",
		"ALTER TABLE " + table + " ADD COLUMN Queued BOOL",
		"ALTER TABLE " + table + QueueSuffix + " ADD COLUMN LeaseMicros INT64",
		"ALTER TABLE " + table + QueueSuffix + " ADD COLUMN WakeAddr STRING(64)",
		"ALTER TABLE " + table + " ADD COLUMN Permits INT64",
		"ALTER TABLE " + table + QueueSuffix + " ADD COLUMN Permits INT64",
		"ALTER TABLE " + table + QueueSuffix + " ADD COLUMN Token INT64",
		"ALTER TABLE " + table + " ADD COLUMN Session STRING(36)",
		"ALTER TABLE " + table + QueueSuffix + " ADD COLUMN Session STRING(36)",
	}
}

// DefaultRequestsTable is the table of package queue when none is configured.
const DefaultRequestsTable = "Requests"

//go:embed requests.sql
var requestsSQL string

// RequestsTable returns the statements that create the request queue of
// package queue, named table, with comments: the table, its unique index
// that allows one create per resource (named table+"OneCreatePerResource"),
// the index of pending requests that workers scan (table+"Pending") and the
// index by resource (table+"ByResource"). Requests are kept as a history;
// RequestsRetention adds a row deletion policy that expires them.
func RequestsTable(table string) ([]string, error) {
	if err := ValidateTableName(table); err != nil {
		return nil, err
	}
	create := requestsSQL
	for _, old := range []string{"CREATE TABLE " + DefaultRequestsTable + " (", "CONSTRAINT " + DefaultRequestsTable + "StatusIsKnown", "CONSTRAINT " + DefaultRequestsTable + "KindIsKnown"} {
		create = strings.Replace(create, old, strings.Replace(old, DefaultRequestsTable, table, 1), 1)
	}
	return []string{
		create,
		"-- At most one create per resource, enforced by Spanner: a second create\n-- of a resource fails with AlreadyExists and writes nothing.\n" +
			"CREATE UNIQUE NULL_FILTERED INDEX " + table + "OneCreatePerResource ON " + table + " (CreateOf)",
		"-- The pending requests (new or in-progress) in FIFO order; finished\n-- requests leave it (PendingSince is NULL), so scans never read history.\n" +
			"CREATE NULL_FILTERED INDEX " + table + "Pending ON " + table + " (PendingSince, RequestID) STORING (Status, Kind, Resource)",
		"-- Every request of one resource, oldest first, with what a worker needs\n-- to pick the pending ones and the create without reading the table.\n" +
			"CREATE INDEX " + table + "ByResource ON " + table + " (Resource, CreatedAt) STORING (Kind, PendingSince)",
	}, nil
}

// RequestsRetention returns the statement that makes Spanner delete the
// finished requests of table once they are older than days days, measured
// from FinishedAt (column ExpiresFrom). Pending requests are never deleted,
// nor are completed creates: the queue reads a resource's create to know it
// was created, so deleting it would let a second create in and refuse the
// resource's updates. Without a policy, requests are kept for ever as a
// history. With a change-stream capture, keep requests longer than the
// stream's retention period: a capture resumed from an old checkpoint
// recognises the changes it already enqueued by their requests' ids.
func RequestsRetention(table string, days int) (string, error) {
	if err := ValidateTableName(table); err != nil {
		return "", err
	}
	if days < 1 {
		return "", fmt.Errorf("ddl: retention of %d days: use 1 or more days", days)
	}
	return fmt.Sprintf("ALTER TABLE %s ADD ROW DELETION POLICY (OLDER_THAN(ExpiresFrom, INTERVAL %d DAY))", table, days), nil
}

// RequestsStatements is RequestsTable with comments stripped, ready for
// UpdateDatabaseDdl or CreateDatabase's ExtraStatements.
func RequestsStatements(table string) ([]string, error) {
	return GoogleSQL.RequestsStatements(table)
}
