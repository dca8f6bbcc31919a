package spanmutex

import (
	"context"
	"fmt"
	"sync"

	"cloud.google.com/go/spanner"

	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/internal/sqldialect"
)

// WithDialect says which SQL dialect the database was created with
// (ddl.GoogleSQL or ddl.PostgreSQL), so that the Mutex or Lock need not
// read it. Without it, the dialect is read from the database's
// INFORMATION_SCHEMA.DATABASE_OPTIONS by the first call that issues SQL,
// once per Mutex or Lock. Key reads and mutations are the same in both
// dialects; statements are written once and translated (see ddl for the
// PostgreSQL schema, whose quoted identifiers keep the same names).
func WithDialect(d ddl.Dialect) Option {
	return func(c *config) { c.dialect, c.dialectSet = d, true }
}

// dialectOf is the dialect of a client's database: given by WithDialect, or
// read from the database on first use and kept. Its zero value, with a
// client, reads it; it is safe for concurrent use.
type dialectOf struct {
	client *spanner.Client
	mu     sync.Mutex
	known  bool
	d      ddl.Dialect
}

func knownDialect(d ddl.Dialect) *dialectOf { return &dialectOf{known: true, d: d} }

// get returns the dialect, reading it if it is not known yet. A failed
// read is returned, not kept: the next call reads again.
func (o *dialectOf) get(ctx context.Context) (ddl.Dialect, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.known {
		return o.d, nil
	}
	d, err := sqldialect.Detect(ctx, o.client)
	if err != nil {
		return 0, fmt.Errorf("spanmutex: read the dialect of database %s: %w", o.client.DatabaseName(), err)
	}
	o.d, o.known = d, true
	return d, nil
}
