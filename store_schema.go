package spanmutex

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/internal/sqldialect"
)

// schemaError reads INFORMATION_SCHEMA to name exactly what is wrong with
// the table.
func (s *spannerStore) schemaError(ctx context.Context, cause error) error {
	if err := s.checkSchema(ctx); err != nil {
		var se *schemaError
		if errors.As(err, &se) {
			se.Err = cause
		}
		return err
	}
	return fmt.Errorf("spanmutex: table %s: %w", s.table, cause)
}

// checkSchema reads INFORMATION_SCHEMA and returns an error matching ErrSchema naming
// what is missing or mistyped, or nil if the table has every column. The
// waiters' queue table is checked too when it exists, and must exist for a
// Lock (a Mutex does not need it). The sessions table is optional: when it
// exists, it must have its columns (checkSessions). A column not of ours
// that is NOT NULL with no default is an error too, unless the store only
// reads: every insert of ours would fail.
func (s *spannerStore) checkSchema(ctx context.Context) error {
	d, err := s.dialect.Get(ctx)
	if err != nil {
		return s.explainOther(err)
	}
	mutex, queue, sessions, err := s.describe(ctx, d)
	if err != nil {
		return err
	}
	if mutex.Name == "" {
		return s.absent(d, mutex)
	}
	have := columnTypes(mutex)
	s.hasVersion.Store(have["Version"] != "")
	s.hasPermits.Store(have["Permits"] != "" && queue.Name != "" && columnTypes(queue)["Token"] != "")
	s.recordQueued(have["Queued"] != "", time.Now().UnixNano()) // local: ages the answer
	missing := missingColumns(have, s.neededColumns(d), "")
	s.hasQueue.Store(queue.Name != "")
	if queue.Name != "" {
		missing = append(missing, missingColumns(columnTypes(queue), s.neededQueueColumns(d), s.queueTable()+".")...)
	}
	sessionsErr := s.checkSessions(d, have, columnTypes(queue), sessions)
	if len(missing) > 0 {
		slices.Sort(missing)
		return &schemaError{Table: s.table, Problem: "does not have the columns spanmutex needs", Missing: missing, Dialect: d}
	}
	if sessionsErr != nil {
		return sessionsErr
	}
	if s.readOnly {
		return nil
	}
	if s.needsQueue && queue.Name == "" {
		return &schemaError{Table: s.table, Dialect: d,
			Problem: fmt.Sprintf("its waiters' queue table %s, which a Lock needs, does not exist in database %s", s.queueTable(), s.client.DatabaseName()),
			fix: fmt.Sprintf("create it with the CREATE TABLE %s statement of: spanmutex ddl%s --table %s (only that one: %s exists)",
				s.queueTable(), dialectFlag(d), s.table, s.table)}
	}
	return s.extraRequired(d, mutex, queue, sessions)
}

// sessionsReady reports whether a database whose mutex table and queue
// have columns mutex and queue, and whose sessions table is sessions, can
// hold rows and queue entries through sessions.
func sessionsReady(mutex, queue map[string]string, sessions *sqldialect.Table) bool {
	return mutex["Session"] != "" && queue["Session"] != "" && sessions.Name != ""
}

// checkSessions records in hasSessions whether the database has what
// sessions need: the sessions table with its columns and the Session
// column of the mutex table and of its queue (have, queue: their
// columns), typed as dialect d types them. Sessions are optional: without the sessions table it returns
// nil, whatever the Session column (a table of ours without it was made
// before sessions; a table of the user's may have a Session column of its
// own). A sessions table is meant for us, so once it exists an error
// matching ErrSchema names its columns that are missing or mistyped, and a
// Session column of another type.
func (s *spannerStore) checkSessions(d ddl.Dialect, have, queue map[string]string, sessions *sqldialect.Table) error {
	if sessions.Name == "" {
		s.hasSessions.Store(false)
		return nil
	}
	table := s.table + ddl.SessionsSuffix
	missing := missingColumns(columnTypes(sessions), d.SessionsColumns(), table+".")
	if got, want := have["Session"], d.MutexColumns()["Session"]; got != "" && got != want {
		missing = append(missing, fmt.Sprintf("Session is %s, want %s", got, want))
	}
	if got, want := queue["Session"], d.QueueColumns()["Session"]; got != "" && got != want {
		missing = append(missing, fmt.Sprintf("%s.Session is %s, want %s", s.queueTable(), got, want))
	}
	s.hasSessions.Store(len(missing) == 0 && sessionsReady(have, queue, sessions))
	if len(missing) == 0 {
		return nil
	}
	slices.Sort(missing)
	return &schemaError{Table: s.table, Dialect: d, Missing: missing,
		Problem: fmt.Sprintf("has a sessions table, %s, but not as spanmutex's sessions need it", table),
		fix: fmt.Sprintf("make them as in the CREATE TABLE %s and the Session column of: spanmutex ddl%s --table %s, or drop %s (sessions are optional: spanmutex works without that table)",
			table, dialectFlag(d), s.table, table)}
}

// absent is the error of a mutex table that does not exist: on
// PostgreSQL, it names the tables whose names differ only in case.
func (s *spannerStore) absent(d ddl.Dialect, mutex *sqldialect.Table) error {
	se := &schemaError{Table: s.table, Problem: "does not exist in database " + s.client.DatabaseName(), Dialect: d}
	if len(mutex.Variants) > 0 {
		se.Problem += fmt.Sprintf(", but %s does: names are case-sensitive on PostgreSQL, where spanmutex quotes them", strings.Join(mutex.Variants, ", "))
		se.fix = fmt.Sprintf("use that table with --table %s (WithTable(%q))", mutex.Variants[0], mutex.Variants[0])
	}
	return se
}

// extraRequired returns an error matching ErrSchema if the mutex, queue or sessions
// table has a column that spanmutex does not write and that every insert must write.
func (s *spannerStore) extraRequired(d ddl.Dialect, mutex, queue, sessions *sqldialect.Table) error {
	var extra []string
	for _, t := range []struct {
		tab    *sqldialect.Table
		ours   map[string]string
		prefix string
	}{{mutex, d.MutexColumns(), ""}, {queue, d.QueueColumns(), s.queueTable() + "."}, {sessions, d.SessionsColumns(), s.table + ddl.SessionsSuffix + "."}} {
		for name, c := range t.tab.Columns {
			if _, ok := t.ours[name]; !ok && c.Required {
				extra = append(extra, t.prefix+name)
			}
		}
	}
	if len(extra) == 0 {
		return nil
	}
	slices.Sort(extra)
	return &schemaError{Table: s.table, Dialect: d,
		Problem: "has a column spanmutex does not write that is NOT NULL with no default, so its inserts fail: " + strings.Join(extra, ", "),
		fix:     "give each a DEFAULT, make it nullable, or drop it (ALTER TABLE ... ALTER COLUMN / DROP COLUMN)"}
}

// describe returns what INFORMATION_SCHEMA says of the mutex table, of
// its waiters' queue table and of its sessions table, as dialect d names
// and types them, from one query.
func (s *spannerStore) describe(ctx context.Context, d ddl.Dialect) (mutex, queue, sessions *sqldialect.Table, err error) {
	sessionsTable := s.table + ddl.SessionsSuffix
	tabs, err := sqldialect.Describe(ctx, s.client, d, s.table, s.queueTable(), sessionsTable)
	if err != nil {
		return nil, nil, nil, s.explainOther(err)
	}
	s.reached.Store(true)
	return tabs[s.table], tabs[s.queueTable()], tabs[sessionsTable], nil
}

// columns returns the columns of the mutex table and of its waiters' queue
// table with their Spanner types, as dialect d spells them, from one query;
// none for a table that does not exist.
func (s *spannerStore) columns(ctx context.Context, d ddl.Dialect) (mutex, queue map[string]string, err error) {
	m, q, _, err := s.describe(ctx, d)
	if err != nil {
		return nil, nil, err
	}
	return columnTypes(m), columnTypes(q), nil
}

// columnTypes returns the types of t's columns by name.
func columnTypes(t *sqldialect.Table) map[string]string {
	out := make(map[string]string, len(t.Columns))
	for name, c := range t.Columns {
		out[name] = c.Type
	}
	return out
}

// neededColumns returns the mutex table's columns this store uses, typed
// in dialect d: every one but the optional ones (ddl.AddedMutexColumns),
// save Version when the Mutex has a version and Permits for a Semaphore.
func (s *spannerStore) neededColumns(d ddl.Dialect) map[string]string {
	need := d.MutexColumns()
	for name := range d.AddedMutexColumns() {
		if !(name == "Version" && s.versioned) && !(name == "Permits" && s.semaphore) {
			delete(need, name)
		}
	}
	return need
}

// neededQueueColumns returns the queue table's columns this store uses,
// typed in dialect d: all but those only a Semaphore uses
// (ddl.AddedQueueColumns), unless it is a Semaphore's.
func (s *spannerStore) neededQueueColumns(d ddl.Dialect) map[string]string {
	need := d.QueueColumns()
	if !s.semaphore {
		for name := range d.AddedQueueColumns() {
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
