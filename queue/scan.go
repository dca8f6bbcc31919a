package queue

import (
	"context"
	"fmt"
	"time"

	"cloud.google.com/go/spanner"
)

// pendingEntry is one entry of the pending index: a request that is new or
// in-progress, at its place in the queue.
type pendingEntry struct {
	since    time.Time // PendingSince: the request's CreatedAt commit timestamp
	id       string
	resource string
	status   Status // new or in-progress
}

// line is the scan's "line in the sand": the last entry of the pending index
// a pass has looked at. A zero line is the start of the queue.
type line struct {
	since time.Time
	id    string
}

func (l line) zero() bool { return l.since.IsZero() }

// scanPage returns up to n pending requests after l, in queue order
// (PendingSince, then RequestID), by a strong single-use read of the pending
// index: lock-free, so scans never contend with claims. Requests enqueued in
// one commit share a PendingSince and are ordered by id among themselves.
// It reads the index by key range rather than by query, which the emulator
// answers without scanning the whole table.
func (w *Worker) scanPage(ctx context.Context, l line, n int) ([]pendingEntry, error) {
	t := w.q.cfg.table
	keys := spanner.KeySet(spanner.AllKeys())
	if !l.zero() {
		// Everything after the line: an empty end key closes no range.
		keys = spanner.KeyRange{Start: spanner.Key{l.since, l.id}, End: spanner.Key{}, Kind: spanner.OpenClosed}
	}
	w.stats.reads.Add(1)
	var out []pendingEntry
	err := w.q.client.Single().ReadWithOptions(ctx, t, keys, []string{"PendingSince", "RequestID", "Resource", "Status"},
		&spanner.ReadOptions{Index: t + "Pending", Limit: n, RequestTag: tagScan}).Do(func(row *spanner.Row) error {
		var e pendingEntry
		var status string
		if err := row.Columns(&e.since, &e.id, &e.resource, &status); err != nil {
			return err
		}
		e.status = Status(status)
		out = append(out, e)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("queue: scan the pending requests of table %s: %w", t, err)
	}
	return out, nil
}
