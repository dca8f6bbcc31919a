package spanmutex

import (
	"github.com/spanmutex/spanmutex/ddl"
)

// WithDialect says which SQL dialect the database was created with
// (ddl.GoogleSQL or ddl.PostgreSQL), so that the Mutex, Lock, Election,
// Inspect or Fence need not read it. Without it, the dialect is read from the database's
// INFORMATION_SCHEMA.DATABASE_OPTIONS by the first call that issues SQL,
// once per Mutex or Lock. Key reads and mutations are the same in both
// dialects; statements are written once and translated (see ddl for the
// PostgreSQL schema, whose quoted identifiers keep the same names).
func WithDialect(d ddl.Dialect) Option {
	return anyOption(func(c *config) { c.dialect, c.dialectSet = d, true })
}
