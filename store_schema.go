package spanmutex

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/internal/sqldialect"
)

// schemaError reads INFORMATION_SCHEMA to name exactly what is wrong with
// the table.
func (s *spannerStore) schemaError(ctx context.Context, cause error) error {
	if err := s.checkSchema(ctx); err != nil {
		var se *SchemaError
		if errors.As(err, &se) {
			se.Err = cause
		}
		return err
	}
	return fmt.Errorf("spanmutex: table %s: %w", s.table, cause)
}

// checkSchema reads INFORMATION_SCHEMA and returns a *SchemaError naming
// what is missing or mistyped, or nil if the table has every column. The
// waiters' queue table is checked too when it exists (a Mutex does not need
// it).
func (s *spannerStore) checkSchema(ctx context.Context) error {
	d, err := s.dialect.Get(ctx)
	if err != nil {
		return s.explainOther(err)
	}
	have, queue, err := s.columns(ctx, d)
	if err != nil {
		return err
	}
	if len(have) == 0 {
		return &SchemaError{Table: s.table, Problem: "does not exist in database " + s.client.DatabaseName(), Dialect: d}
	}
	s.hasVersion.Store(have["Version"] != "")
	s.recordQueued(have)
	missing := missingColumns(have, s.neededColumns(d), "")
	s.hasQueue.Store(len(queue) > 0)
	if len(queue) > 0 {
		missing = append(missing, missingColumns(queue, d.QueueColumns(), s.queueTable()+".")...)
	}
	if len(missing) == 0 {
		return nil
	}
	slices.Sort(missing)
	return &SchemaError{Table: s.table, Problem: "does not have the columns spanmutex needs", Missing: missing, Dialect: d}
}

// columns returns the columns of the mutex table and of its waiters' queue
// table with their Spanner types, as dialect d spells them, from one query;
// none for a table that does not exist.
func (s *spannerStore) columns(ctx context.Context, d ddl.Dialect) (mutex, queue map[string]string, err error) {
	cols, err := sqldialect.Columns(ctx, s.client, d, s.table, s.queueTable())
	if err != nil {
		return nil, nil, s.explainOther(err)
	}
	s.reached.Store(true)
	return cols[s.table], cols[s.queueTable()], nil
}

// neededColumns returns the mutex table's columns this store uses, typed
// in dialect d: every one but the optional ones (ddl.AddedMutexColumns),
// save Version when the Mutex has a version.
func (s *spannerStore) neededColumns(d ddl.Dialect) map[string]string {
	need := d.MutexColumns()
	for name := range d.AddedMutexColumns() {
		if !(name == "Version" && s.versioned) {
			delete(need, name)
		}
	}
	return need
}

// missingColumns describes the columns of want that have lacks or types
// otherwise, each prefixed with prefix.
func missingColumns(have, want map[string]string, prefix string) []string {
	var missing []string
	for name, typ := range want {
		if got, ok := have[name]; !ok {
			missing = append(missing, prefix+name+" "+typ+" missing")
		} else if got != typ {
			missing = append(missing, fmt.Sprintf("%s%s is %s, want %s", prefix, name, got, typ))
		}
	}
	return missing
}
