// Package sqldialect gives spanmutex's SQL statements in the dialect of the
// database they run on. Each statement is written once, in GoogleSQL, with
// every identifier of ours quoted in backticks and named parameters
// (@name); Statement derives the PostgreSQL form from it, so that the two
// forms cannot drift apart. The few constructs that have no mechanical
// translation (interval arithmetic) are written with a helper of this
// package that returns the form of each dialect.
package sqldialect

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"cloud.google.com/go/spanner"

	"github.com/spanmutex/spanmutex/ddl"
)

// detectSQL reads the database's dialect. It is valid in both dialects:
// lower-case INFORMATION_SCHEMA names and a string literal.
const detectSQL = "SELECT option_value FROM information_schema.database_options WHERE option_name = 'database_dialect'"

// Columns returns the columns of each of tables with their Spanner types,
// as INFORMATION_SCHEMA.COLUMNS.SPANNER_TYPE spells them in d, from one
// strong read: an empty map for a table that does not exist. Table names
// match as d resolves them (Describe).
func Columns(ctx context.Context, client *spanner.Client, d ddl.Dialect, tables ...string) (map[string]map[string]string, error) {
	desc, err := Describe(ctx, client, d, tables...)
	if err != nil {
		return nil, err
	}
	out := make(map[string]map[string]string, len(tables))
	for t, tab := range desc {
		out[t] = map[string]string{}
		for name, c := range tab.Columns {
			out[t][name] = c.Type
		}
	}
	return out, nil
}

// Column is a column as INFORMATION_SCHEMA.COLUMNS describes it.
type Column struct {
	Type string // SPANNER_TYPE, as d spells it
	// Required: NOT NULL with no default and not generated, so that every
	// insert must write it.
	Required bool
}

// Table is what Describe found of a table asked for by name.
type Table struct {
	// Name is the table's name as it was created; "" if there is none.
	Name    string
	Columns map[string]Column
	// Variants are the tables, on PostgreSQL, whose names differ from
	// the one asked for only in case: spanmutex quotes its identifiers,
	// so there they name other tables.
	Variants []string
}

// Describe returns, from one strong read, what INFORMATION_SCHEMA says of
// each of tables in d's default schema. Names match as d resolves the
// identifiers spanmutex writes: case-insensitively in GoogleSQL (where
// "mutexes" is the table Mutexes), exactly in PostgreSQL (where the
// quoted "mutexes" is not "Mutexes").
func Describe(ctx context.Context, client *spanner.Client, d ddl.Dialect, tables ...string) (map[string]*Table, error) {
	out := make(map[string]*Table, len(tables))
	lowered := make([]string, len(tables))
	for i, t := range tables {
		out[t] = &Table{Columns: map[string]Column{}}
		lowered[i] = strings.ToLower(t)
	}
	stmt := Statement(d, "SELECT table_name, column_name, spanner_type, "+
		"is_nullable = 'NO' AND column_default IS NULL AND generation_expression IS NULL "+
		"FROM information_schema.columns WHERE table_schema = @schema AND LOWER(table_name) IN UNNEST(@tables)",
		map[string]any{"schema": Schema(d), "tables": lowered})
	err := client.Single().Query(ctx, stmt).Do(func(r *spanner.Row) error {
		var table, name, typ string
		var required bool
		if err := r.Columns(&table, &name, &typ, &required); err != nil {
			return err
		}
		for asked, tab := range out {
			switch {
			case table == asked || (d != ddl.PostgreSQL && strings.EqualFold(table, asked)):
				tab.Name = table
				tab.Columns[name] = Column{Type: typ, Required: required}
			case strings.EqualFold(table, asked) && !slices.Contains(tab.Variants, table):
				tab.Variants = append(tab.Variants, table)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Detect reads the dialect of client's database from its
// INFORMATION_SCHEMA.DATABASE_OPTIONS (option database_dialect), by a
// strong single-use read. It returns an error, not a guess, if the option
// is absent or unknown.
func Detect(ctx context.Context, client *spanner.Client) (ddl.Dialect, error) {
	it := client.Single().Query(ctx, spanner.Statement{SQL: detectSQL})
	defer it.Stop()
	row, err := it.Next()
	if err != nil {
		return 0, err
	}
	var v string
	if err := row.Columns(&v); err != nil {
		return 0, err
	}
	switch v {
	case "GOOGLE_STANDARD_SQL":
		return ddl.GoogleSQL, nil
	case "POSTGRESQL":
		return ddl.PostgreSQL, nil
	}
	return 0, fmt.Errorf("database %s has dialect %q, which is neither GOOGLE_STANDARD_SQL nor POSTGRESQL", client.DatabaseName(), v)
}

// SubMicros returns the SQL for the timestamp ts less micros microseconds
// (both SQL expressions, written as Statement takes them) in d.
func SubMicros(d ddl.Dialect, ts, micros string) string {
	if d == ddl.PostgreSQL {
		return fmt.Sprintf("spanner.timestamptz_subtract(%s, (%s)::text || ' microseconds')", ts, micros)
	}
	return fmt.Sprintf("TIMESTAMP_SUB(%s, INTERVAL %s MICROSECOND)", ts, micros)
}

// Schema returns the INFORMATION_SCHEMA TABLE_SCHEMA of the default schema,
// where spanmutex's tables are, in d: "" in GoogleSQL, "public" in PostgreSQL.
func Schema(d ddl.Dialect) string {
	if d == ddl.PostgreSQL {
		return "public"
	}
	return ""
}

// Statement returns the statement sql, written in GoogleSQL as the package
// doc says, with params, in dialect d. For PostgreSQL, the parameters are
// numbered in the order of their first use ($1 is params key "p1").
func Statement(d ddl.Dialect, sql string, params map[string]any) spanner.Statement {
	if d != ddl.PostgreSQL {
		return spanner.Statement{SQL: sql, Params: params}
	}
	text, order := Translate(sql)
	var out map[string]any
	if params != nil {
		out = make(map[string]any, len(params))
		for i, name := range order {
			if v, ok := params[name]; ok {
				out[fmt.Sprintf("p%d", i+1)] = v
			}
		}
	}
	return spanner.Statement{SQL: text, Params: out}
}

var (
	forceIndex = regexp.MustCompile("@\\{FORCE_INDEX=(`?[A-Za-z0-9_]+`?)\\}")
	inUnnest   = regexp.MustCompile(`\bIN UNNEST\(([^()]*)\)`)
	param      = regexp.MustCompile(`@([A-Za-z_][A-Za-z0-9_]*)`)
)

// Translate turns the GoogleSQL text sql into PostgreSQL and returns the
// names of its parameters in the order of their numbers ($1 first):
// backticks become double quotes, @name becomes $n, CURRENT_TIMESTAMP()
// becomes CURRENT_TIMESTAMP, PENDING_COMMIT_TIMESTAMP() becomes
// SPANNER.PENDING_COMMIT_TIMESTAMP(), x IN UNNEST(a) becomes x = ANY(a) and
// a @{FORCE_INDEX=i} hint becomes /*@ FORCE_INDEX=i */. String literals
// ('...') are left as they are.
func Translate(sql string) (string, []string) {
	var b strings.Builder
	var order []string
	number := map[string]int{}
	for i, part := range strings.Split(sql, "'") {
		if i%2 == 1 { // inside a string literal
			b.WriteString("'" + part + "'")
			continue
		}
		part = forceIndex.ReplaceAllString(part, "/*@ FORCE_INDEX=$1 */")
		part = inUnnest.ReplaceAllString(part, "= ANY($1)")
		part = strings.ReplaceAll(part, "PENDING_COMMIT_TIMESTAMP()", "SPANNER.PENDING_COMMIT_TIMESTAMP()")
		part = strings.ReplaceAll(part, "CURRENT_TIMESTAMP()", "CURRENT_TIMESTAMP")
		part = strings.ReplaceAll(part, "`", `"`)
		part = param.ReplaceAllStringFunc(part, func(p string) string {
			name := p[1:]
			n, ok := number[name]
			if !ok {
				order = append(order, name)
				n = len(order)
				number[name] = n
			}
			return fmt.Sprintf("$%d", n)
		})
		b.WriteString(part)
	}
	return b.String(), order
}

// Of is the dialect of a client's database: given (Known), declared by the
// caller and checked against the database on first use (Declared), or
// read from the database on first use and kept (For). It is safe for
// concurrent use.
type Of struct {
	client *spanner.Client
	mu     sync.Mutex
	known  bool // d is the dialect: read, checked, or Known
	// declared: d was declared, and the first Get checks it (one read).
	declared bool
	d        ddl.Dialect
}

// For returns the dialect of client's database, to be read by the first Get.
func For(client *spanner.Client) *Of { return &Of{client: client} }

// Known returns the dialect d, which Get returns without reading.
func Known(d ddl.Dialect) *Of { return &Of{known: true, d: d} }

// Declared returns the dialect d, which the caller declared for client's
// database: the first Get (or Check) reads the database's dialect once and
// returns a *MismatchError if it is not d; later calls read nothing.
func Declared(client *spanner.Client, d ddl.Dialect) *Of {
	return &Of{client: client, declared: true, d: d}
}

// MismatchError says that the dialect declared for a database is not the
// one it was created with.
type MismatchError struct {
	Database string
	Declared ddl.Dialect
	Actual   ddl.Dialect
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("the dialect was declared %s, but database %s is %s", e.Declared, e.Database, e.Actual)
}

// Get returns the dialect, reading it (Detect) if it is not known yet, or
// checking it once if it was declared. A failed read is returned, not
// kept: the next call reads again; a mismatch is returned by every call.
// Call it before a read-write transaction, never with the ctx of one: the
// read is a single-use read of INFORMATION_SCHEMA, which the client
// refuses to nest in a transaction.
func (o *Of) Get(ctx context.Context) (ddl.Dialect, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.known {
		return o.d, nil
	}
	d, err := Detect(ctx, o.client)
	if err != nil {
		return 0, fmt.Errorf("read the dialect of database %s: %w", o.client.DatabaseName(), err)
	}
	if o.declared && d != o.d {
		return 0, &MismatchError{Database: o.client.DatabaseName(), Declared: o.d, Actual: d}
	}
	o.d, o.known = d, true
	return d, nil
}

// Check is Get for a caller that issues no SQL yet: it reads nothing
// unless the dialect was declared and not checked yet.
func (o *Of) Check(ctx context.Context) error {
	o.mu.Lock()
	pending := o.declared && !o.known
	o.mu.Unlock()
	if !pending {
		return nil
	}
	_, err := o.Get(ctx)
	return err
}

// Statement returns sql, written in GoogleSQL with the identifiers in
// backticks, with params in the database's dialect (the package's
// Statement), reading the dialect if it is not known. Like Get, call it
// before a read-write transaction, not inside one.
func (o *Of) Statement(ctx context.Context, sql string, params map[string]any) (spanner.Statement, error) {
	d, err := o.Get(ctx)
	if err != nil {
		return spanner.Statement{}, err
	}
	return Statement(d, sql, params), nil
}
