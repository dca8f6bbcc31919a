package queue

import (
	"context"
	"fmt"

	"cloud.google.com/go/spanner"

	"github.com/spanmutex/spanmutex/internal/sqldialect"
)

// captureTableError is what checkTable finds wrong with the checkpoint
// table: Run reports it rather than retrying.
type captureTableError struct{ msg string }

func (e *captureTableError) Error() string { return e.msg }

// checkTable reads INFORMATION_SCHEMA once, when Run starts, and says what
// to do when the checkpoint table is missing or lacks a column this
// capture writes: LeaseMicros, added so that a partition's owner declares
// its lease, is the one a table made by an earlier spanmutex lacks.
func (c spannerCapture) checkTable(ctx context.Context) error {
	d, err := c.q.dialect.Get(ctx)
	if err != nil {
		return fmt.Errorf("queue: capture %s: %w", c.stream, err)
	}
	stmt := sqldialect.Statement(d, "SELECT column_name FROM information_schema.columns WHERE table_schema = @schema AND table_name = @t",
		map[string]any{"schema": sqldialect.Schema(d), "t": c.cfg.table})
	have := map[string]bool{}
	err = c.client.Single().Query(ctx, stmt).Do(func(r *spanner.Row) error {
		var name string
		if err := r.Columns(&name); err != nil {
			return err
		}
		have[name] = true
		return nil
	})
	switch {
	case err != nil:
		return fmt.Errorf("queue: capture %s: read the columns of %s: %w", c.stream, c.cfg.table, err)
	case len(have) == 0:
		return &captureTableError{fmt.Sprintf("queue: capture %s: the checkpoint table %s does not exist: create it with ddl.CaptureStatements (or spanmutex ddl --change-stream)", c.stream, c.cfg.table)}
	case !have["LeaseMicros"]:
		add, err := d.CaptureUpgrade(c.cfg.table)
		if err != nil {
			return err
		}
		return &captureTableError{fmt.Sprintf("queue: capture %s: the checkpoint table %s has no LeaseMicros column, where a partition's owner declares its lease: add it with: %s",
			c.stream, c.cfg.table, add[0])}
	}
	return nil
}
