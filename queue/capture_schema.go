package queue

import (
	"context"
	"fmt"

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
	cols, err := sqldialect.Columns(ctx, c.client, d, c.cfg.table)
	have := cols[c.cfg.table]
	switch {
	case err != nil:
		return fmt.Errorf("queue: capture %s: read the columns of %s: %w", c.stream, c.cfg.table, err)
	case len(have) == 0:
		return &captureTableError{fmt.Sprintf("queue: capture %s: the checkpoint table %s does not exist: create it with ddl.CaptureStatements (or spanmutex ddl --change-stream)", c.stream, c.cfg.table)}
	case have["LeaseMicros"] == "":
		add, err := d.CaptureUpgrade(c.cfg.table)
		if err != nil {
			return err
		}
		return &captureTableError{fmt.Sprintf("queue: capture %s: the checkpoint table %s has no LeaseMicros column, where a partition's owner declares its lease: add it with: %s",
			c.stream, c.cfg.table, add[0])}
	}
	return nil
}
