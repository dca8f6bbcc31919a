package spanmutex

import (
	"context"
	"errors"
	"fmt"

	"cloud.google.com/go/spanner"

	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/internal/sqldialect"
)

// WithDialect says which SQL dialect the database was created with
// (ddl.GoogleSQL or ddl.PostgreSQL). Without it, the dialect is read from
// the database's INFORMATION_SCHEMA.DATABASE_OPTIONS by the first call that
// issues SQL, once per Mutex or Lock. With it, the declaration is checked
// against the same option once, by the first call: once per Mutex, Fence
// or Inspect call, and once per Scope for its Locks and Elections (so a
// Lock made per call costs the read once per process, not per call); a
// wrong declaration makes that call, and every later one, fail with an
// error wrapping ErrInvalidConfig that names both dialects, before
// anything is written. Key reads and mutations are the same in both
// dialects; statements are written once and translated (see ddl for the
// PostgreSQL schema, whose quoted identifiers keep the same names).
func WithDialect(d ddl.Dialect) Option {
	return anyOption(func(c *config) { c.dialect, c.dialectSet = d, true })
}

// declaredKey names a dialect declared (WithDialect) for a database, which
// a Scope checks once for all its primitives.
type declaredKey struct {
	database string
	dialect  ddl.Dialect
}

// readKey names the dialect of a client's database, which a Scope reads
// once for all its primitives on that client. It is keyed by the client,
// whose database a constructor does not ask for (it does no I/O, and a
// client made for a test may have none).
type readKey struct{ client *spanner.Client }

// dialectOf returns the dialect of client's database: d, checked once
// against the database, if declared (WithDialect); otherwise read once.
// Once is per Scope s, shared by its Locks, Semaphores and an Election's
// terms; per call if s is nil.
func (s *Scope) dialectOf(client *spanner.Client, declared bool, d ddl.Dialect) *sqldialect.Of {
	switch {
	case s == nil && declared:
		return sqldialect.Declared(client, d)
	case s == nil:
		return sqldialect.For(client)
	case declared:
		of, _ := s.dialects.LoadOrStore(declaredKey{client.DatabaseName(), d}, sqldialect.Declared(client, d))
		return of.(*sqldialect.Of)
	}
	of, _ := s.dialects.LoadOrStore(readKey{client}, sqldialect.For(client))
	return of.(*sqldialect.Of)
}

// dialectError returns, if err says that the declared dialect is not the
// database's, the error to return for it (wrapping ErrInvalidConfig);
// nil otherwise.
func dialectError(err error) error {
	var mm *sqldialect.MismatchError
	if !errors.As(err, &mm) {
		return nil
	}
	return fmt.Errorf("%w: WithDialect(ddl.%s), but database %s is %s: declare ddl.%s, or leave WithDialect out to read it",
		ErrInvalidConfig, goName(mm.Declared), mm.Database, goName(mm.Actual), goName(mm.Actual))
}

// goName is the Go name of dialect d in package ddl.
func goName(d ddl.Dialect) string {
	if d == ddl.PostgreSQL {
		return "PostgreSQL"
	}
	return "GoogleSQL"
}

// checkDialect checks, once, the dialect of (declared with WithDialect),
// for the calls that may write before they issue SQL of their own (an
// uncontended Lock, Fence.Admit): nil if it was not declared, or checked.
func checkDialect(ctx context.Context, of *sqldialect.Of) error {
	if err := of.Check(ctx); err != nil {
		if de := dialectError(err); de != nil {
			return de
		}
		return fmt.Errorf("spanmutex: %w", err)
	}
	return nil
}
