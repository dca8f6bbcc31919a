package main

import (
	"context"
	"fmt"
	"time"

	"cloud.google.com/go/spanner"

	"github.com/spanmutex/spanmutex"
	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/internal/defaults"
	"github.com/spanmutex/spanmutex/internal/leaserule"
	"github.com/spanmutex/spanmutex/internal/sqldialect"
)

// sharedRow is the row of a semaphore or RWLock (state SHARED) with its
// queue, as status and resize read it: the size, the last token, the
// granted entries and how many live waiters are queued.
type sharedRow struct {
	name    string
	size    int64
	token   int64
	holders []sharedHolder // oldest first; lapsed ones too
	waiters int64
}

// sharedHolder is a granted queue entry.
type sharedHolder struct {
	owner   string
	permits int64
	token   int64
	// left is the lease left by Spanner's clock at the read; ≤ 0: lapsed,
	// its permits are counted free and the next grant deletes the entry.
	left time.Duration
}

// rwLock reports whether r is an RWLock's row.
func (r sharedRow) rwLock() bool { return r.size == rwLockSize }

// held returns the permits the live holders hold.
func (r sharedRow) held() int64 {
	var n int64
	for _, h := range r.holders {
		if h.left > 0 {
			n += h.permits
		}
	}
	return n
}

// waiterLeases is how many of its declared leases a waiting entry stays
// live unrenewed, as ddl/queue.sql states (it renews every two).
const waiterLeases = 4

// sharedSQL reads every SHARED row of the mutex table (or NAME's) with its
// Semaphore entries (Permits set), and Spanner's clock, in one statement:
// one result row per entry, the row's columns repeated, or one with NULL
// entry columns when the queue is empty.
func sharedSQL(table string, one bool) string {
	where := ""
	if one {
		where = " AND m.`Name` = @name"
	}
	return fmt.Sprintf("SELECT CURRENT_TIMESTAMP(), m.`Name`, m.`Permits`, m.`Token`, "+
		"q.`EnqueuedAt`, q.`Owner`, q.`RenewedAt`, q.`LeaseMicros`, q.`Permits`, q.`Token` "+
		"FROM `%s` AS m LEFT JOIN `%s` AS q ON q.`Name` = m.`Name` AND q.`Permits` IS NOT NULL "+
		"WHERE m.`State` = @shared%s ORDER BY m.`Name`, q.`EnqueuedAt`, q.`WaiterID`", table, table+ddl.QueueSuffix, where)
}

// readShared reads the SHARED rows of table (all of them if name is
// empty, else NAME's: none if it is not one), ordered by name, from one
// strong snapshot. Liveness is judged with Spanner's clock at the read
// (CURRENT_TIMESTAMP() against the entries' commit timestamps), by the
// rule the library grants by (internal/leaserule); an entry that declared
// no lease is judged by defaults.Lease.
func readShared(ctx context.Context, client *spanner.Client, table, name string) ([]sharedRow, error) {
	d, err := sqldialect.Detect(ctx, client)
	if err != nil {
		return nil, err
	}
	params := map[string]any{"shared": string(spanmutex.StateShared)}
	if name != "" {
		params["name"] = name
	}
	var out []sharedRow
	err = client.Single().Query(ctx, sqldialect.Statement(d, sharedSQL(table, name != ""), params)).Do(func(r *spanner.Row) error {
		var (
			now, at, renewed               spanner.NullTime
			rowName                        string
			size, token, lease, n, granted spanner.NullInt64
			owner                          spanner.NullString
		)
		if err := r.Columns(&now, &rowName, &size, &token, &at, &owner, &renewed, &lease, &n, &granted); err != nil {
			return fmt.Errorf("decode the semaphore %q of %s: %w", rowName, table, err)
		}
		if len(out) == 0 || out[len(out)-1].name != rowName {
			out = append(out, sharedRow{name: rowName, size: size.Int64, token: token.Int64})
		}
		if !at.Valid {
			return nil
		}
		row := &out[len(out)-1]
		declared := leaserule.Declared(time.Duration(lease.Int64)*time.Microsecond, defaults.Lease)
		silent := leaserule.Silent(now.Time, renewed.Time)
		switch {
		case granted.Valid:
			row.holders = append(row.holders, sharedHolder{owner: owner.StringVal, permits: n.Int64, token: granted.Int64, left: declared - silent})
		case silent < waiterLeases*declared:
			row.waiters++
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
