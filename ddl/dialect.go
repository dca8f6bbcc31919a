package ddl

import (
	_ "embed"
	"fmt"
	"strings"
)

// Dialect is the SQL dialect of a Spanner database: GoogleSQL or PostgreSQL.
// Spanner fixes it when the database is created. The zero value is
// GoogleSQL, the dialect of the package-level functions of this package.
type Dialect int

const (
	// GoogleSQL is the dialect of databases created without a dialect.
	GoogleSQL Dialect = iota
	// PostgreSQL is the dialect of databases created for PGAdapter and
	// PostgreSQL drivers (DatabaseDialect POSTGRESQL).
	PostgreSQL
)

// String returns "googlesql" or "postgresql", the names ParseDialect and
// the --dialect flags accept.
func (d Dialect) String() string {
	switch d {
	case GoogleSQL:
		return "googlesql"
	case PostgreSQL:
		return "postgresql"
	}
	return fmt.Sprintf("Dialect(%d)", int(d))
}

// Valid reports whether d is GoogleSQL or PostgreSQL.
func (d Dialect) Valid() bool { return d == GoogleSQL || d == PostgreSQL }

// ParseDialect parses "googlesql" or "postgresql" (in any case; "pg" too).
func ParseDialect(s string) (Dialect, error) {
	switch strings.ToLower(s) {
	case "googlesql", "google_standard_sql":
		return GoogleSQL, nil
	case "postgresql", "postgres", "pg":
		return PostgreSQL, nil
	}
	return 0, fmt.Errorf("ddl: unknown dialect %q: use googlesql or postgresql", s)
}

//go:embed mutexes.pg.sql
var mutexesPG string

//go:embed queue.pg.sql
var queuePG string

//go:embed fences.pg.sql
var fencesPG string

//go:embed requests.pg.sql
var requestsPG string

// renamePG renames, in the PostgreSQL text sql, every quoted identifier
// that starts with the default name from to start with to instead: the
// table and the constraints named after it.
func renamePG(sql, from, to string) string {
	return strings.ReplaceAll(sql, `"`+from, `"`+to)
}

// pgTable validates table and returns the PostgreSQL text sql, written for
// the table named from+suffix, for the table named table+suffix.
func pgTable(sql, from, table, suffix string) (string, error) {
	if err := ValidateTableName(table); err != nil {
		return "", err
	}
	return renamePG(sql, from+suffix, table+suffix), nil
}

// stripped returns stmts with their comments stripped, and err.
func stripped(stmts []string, err error) ([]string, error) {
	for i, s := range stmts {
		stmts[i] = stripComments(s)
	}
	return stmts, err
}

// MutexTable returns the CREATE TABLE statement of the mutex table named
// table, with comments, in d.
func (d Dialect) MutexTable(table string) (string, error) {
	if d != PostgreSQL {
		return MutexTable(table)
	}
	return pgTable(mutexesPG, DefaultMutexTable, table, "")
}

// QueueTable returns the CREATE TABLE statement of the waiters' queue of
// the mutex table named table, in d.
func (d Dialect) QueueTable(table string) (string, error) {
	if d != PostgreSQL {
		return QueueTable(table)
	}
	return pgTable(queuePG, DefaultMutexTable, table, QueueSuffix)
}

// FenceTable returns the CREATE TABLE statement of the fence table named
// table, in d.
func (d Dialect) FenceTable(table string) (string, error) {
	if d != PostgreSQL {
		return FenceTable(table)
	}
	return pgTable(fencesPG, DefaultFenceTable, table, "")
}

// Schema is the package-level Schema, in d.
func (d Dialect) Schema(table, fenceTable string) ([]string, error) {
	var out []string
	for _, f := range []func() (string, error){
		func() (string, error) { return d.MutexTable(table) },
		func() (string, error) { return d.QueueTable(table) },
		func() (string, error) { return d.FenceTable(fenceTable) },
		func() (string, error) { return d.SessionsTable(table) },
	} {
		stmt, err := f()
		if err != nil {
			return nil, err
		}
		out = append(out, stmt)
	}
	return out, nil
}

// Statements is the package-level Statements, in d: no comments, ready for
// UpdateDatabaseDdl. (A PostgreSQL database is created with its CREATE
// DATABASE statement alone and given these by UpdateDatabaseDdl.)
func (d Dialect) Statements(table string) ([]string, error) {
	return stripped(d.Schema(table, DefaultFenceTable))
}

// pgType maps a GoogleSQL type of the column lists to the type that
// a PostgreSQL database's INFORMATION_SCHEMA.COLUMNS.SPANNER_TYPE shows.
func pgType(googleSQL string) string {
	switch {
	case googleSQL == "INT64":
		return "bigint"
	case googleSQL == "BOOL":
		return "boolean"
	case googleSQL == "TIMESTAMP":
		return "spanner.commit_timestamp" // every timestamp spanmutex writes is a commit timestamp
	case googleSQL == "STRING(MAX)":
		return "character varying"
	case strings.HasPrefix(googleSQL, "STRING("):
		return "character varying" + strings.TrimPrefix(googleSQL, "STRING")
	}
	return googleSQL
}

// inDialect retypes cols, a fresh column list, in d.
func inDialect(d Dialect, cols map[string]string) map[string]string {
	if d == PostgreSQL {
		for name, typ := range cols {
			cols[name] = pgType(typ)
		}
	}
	return cols
}

// MutexColumns is the package-level MutexColumns with the types spelled as
// INFORMATION_SCHEMA.COLUMNS.SPANNER_TYPE spells them in d.
func (d Dialect) MutexColumns() map[string]string { return inDialect(d, MutexColumns()) }

// AddedMutexColumns is the package-level AddedMutexColumns, typed in d.
func (d Dialect) AddedMutexColumns() map[string]string { return inDialect(d, AddedMutexColumns()) }

// AddedQueueColumns is the package-level AddedQueueColumns, typed in d.
func (d Dialect) AddedQueueColumns() map[string]string { return inDialect(d, AddedQueueColumns()) }

// QueueColumns is the package-level QueueColumns, typed in d.
func (d Dialect) QueueColumns() map[string]string { return inDialect(d, QueueColumns()) }

// Upgrade is the package-level Upgrade, in d.
func (d Dialect) Upgrade(table string) ([]string, error) {
	sessions, err := d.SessionsTable(table)
	if err != nil {
		return nil, err
	}
	alter := upgradeGoogleSQL(table)
	if d == PostgreSQL {
		alter = upgradePG(table)
	}
	return append(alter, stripComments(sessions)), nil
}

// upgradePG is Upgrade's ALTER TABLE statements in PostgreSQL.
func upgradePG(table string) []string {
	q := table + QueueSuffix
	return []string{
		`ALTER TABLE "` + table + `" ADD COLUMN "LeaseMicros" bigint`,
		`ALTER TABLE "` + table + `" ADD COLUMN "Version" varchar(256)`,
		`ALTER TABLE "` + table + `" ADD COLUMN "Queued" boolean`,
		`ALTER TABLE "` + q + `" ADD COLUMN "LeaseMicros" bigint`,
		`ALTER TABLE "` + q + `" ADD COLUMN "WakeAddr" varchar(64)`,
		`ALTER TABLE "` + table + `" ADD COLUMN "Permits" bigint`,
		`ALTER TABLE "` + q + `" ADD COLUMN "Permits" bigint`,
		`ALTER TABLE "` + q + `" ADD COLUMN "Token" bigint`,
		`ALTER TABLE "` + table + `" ADD COLUMN "Session" varchar(36)`,
		`ALTER TABLE "` + q + `" ADD COLUMN "Session" varchar(36)`,
	}
}

// RequestsTable is the package-level RequestsTable, in d. In PostgreSQL,
// the unique index of creates is a partial index (WHERE "CreateOf" IS NOT
// NULL), the form PostgreSQL gives GoogleSQL's NULL_FILTERED.
func (d Dialect) RequestsTable(table string) ([]string, error) {
	if d != PostgreSQL {
		return RequestsTable(table)
	}
	create, err := pgTable(requestsPG, DefaultRequestsTable, table, "")
	if err != nil {
		return nil, err
	}
	t := `"` + table + `"`
	return []string{
		create,
		"-- At most one create per resource, enforced by Spanner.\n" +
			`CREATE UNIQUE INDEX "` + table + `OneCreatePerResource" ON ` + t + ` ("CreateOf") WHERE "CreateOf" IS NOT NULL`,
		"-- The pending requests (new or in-progress) in FIFO order.\n" +
			`CREATE INDEX "` + table + `Pending" ON ` + t + ` ("PendingSince", "RequestID") INCLUDE ("Status", "Kind", "Resource") WHERE "PendingSince" IS NOT NULL`,
		"-- Every request of one resource, oldest first.\n" +
			`CREATE INDEX "` + table + `ByResource" ON ` + t + ` ("Resource", "CreatedAt") INCLUDE ("Kind", "PendingSince")`,
	}, nil
}

// RequestsStatements is the package-level RequestsStatements, in d.
func (d Dialect) RequestsStatements(table string) ([]string, error) {
	return stripped(d.RequestsTable(table))
}

// RequestsRetention is the package-level RequestsRetention, in d (in
// PostgreSQL: ALTER TABLE ... ADD TTL INTERVAL 'N days' ON "ExpiresFrom").
func (d Dialect) RequestsRetention(table string, days int) (string, error) {
	stmt, err := RequestsRetention(table, days)
	if err != nil || d != PostgreSQL {
		return stmt, err
	}
	return fmt.Sprintf(`ALTER TABLE "%s" ADD TTL INTERVAL '%d days' ON "ExpiresFrom"`, table, days), nil
}

//go:embed capture.pg.sql
var capturePG string

// CaptureTable is the package-level CaptureTable, in d.
func (d Dialect) CaptureTable(table string) (string, error) {
	if d != PostgreSQL {
		return CaptureTable(table)
	}
	return pgTable(capturePG, DefaultCaptureTable, table, "")
}

// CaptureUpgrade is the package-level CaptureUpgrade, in d.
func (d Dialect) CaptureUpgrade(table string) ([]string, error) {
	if d != PostgreSQL {
		return CaptureUpgrade(table)
	}
	if err := ValidateTableName(table); err != nil {
		return nil, err
	}
	return []string{`ALTER TABLE "` + table + `" ADD COLUMN "LeaseMicros" bigint`}, nil
}

// CaptureStatements is the package-level CaptureStatements, in d.
func (d Dialect) CaptureStatements(table string) ([]string, error) {
	stmt, err := d.CaptureTable(table)
	if err != nil {
		return nil, err
	}
	return stripped([]string{stmt}, nil)
}

// ChangeStream is the package-level ChangeStream, in d (in PostgreSQL, with
// the names quoted: CREATE CHANGE STREAM "S" FOR "T1", "T2").
func (d Dialect) ChangeStream(stream string, tables ...string) (string, error) {
	stmt, err := ChangeStream(stream, tables...)
	if err != nil || d != PostgreSQL {
		return stmt, err
	}
	return `CREATE CHANGE STREAM "` + stream + `" FOR "` + strings.Join(tables, `", "`) + `"`, nil
}
