package queue

import (
	"context"
	"time"

	"cloud.google.com/go/spanner"
)

// outcome is how a job's requests leave their claim.
type outcome struct {
	status    Status // complete, error, or new (released for another worker)
	lastError string // for error and new
}

// releasedAtShutdown is the LastError of requests released back to new
// because their handler overran the shutdown grace.
const releasedAtShutdown = "released at shutdown"

// finishMutation writes out into request id, of the given kind.
func finishMutation(table, id string, kind Kind, out outcome) *spanner.Mutation {
	m := map[string]any{"RequestID": id, "Status": string(out.status)}
	switch out.status {
	case StatusComplete:
		m["FinishedAt"], m["PendingSince"] = spanner.CommitTimestamp, nil
		if kind != KindCreate {
			// A completed create never expires: it is how the queue
			// knows that its resource exists.
			m["ExpiresFrom"] = spanner.CommitTimestamp
		}
	case StatusError:
		m["FinishedAt"], m["PendingSince"], m["ExpiresFrom"] = spanner.CommitTimestamp, nil, spanner.CommitTimestamp
		m["LastError"] = truncateError(out.lastError)
	case StatusNew:
		// Stays pending, at its place in the queue.
		m["LastError"] = truncateError(out.lastError)
	}
	return spanner.UpdateMap(table, m)
}

// settleFinish reports, by a strong read, whether a step that recorded
// prev's outcome landed despite an unknown commit outcome: every request of
// prev shows the outcome's status under prev's claim (a later claim by
// another worker would show its own id). It returns the commit timestamp
// when the outcome finished the requests.
func (w *Worker) settleFinish(ctx context.Context, prev *finishing) (time.Time, bool, error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	w.stats.reads.Add(1)
	n := 0
	var at time.Time
	err := w.q.client.Single().ReadWithOptions(rctx, w.q.cfg.table, keysOf(prev.ids), []string{"Status", "ProcessID", "FinishedAt"},
		&spanner.ReadOptions{RequestTag: tagSettle}).Do(func(row *spanner.Row) error {
		var st string
		var processID spanner.NullString
		var finishedAt spanner.NullTime
		if err := row.Columns(&st, &processID, &finishedAt); err != nil {
			return err
		}
		if Status(st) == prev.out.status && processID.StringVal == prev.pid {
			n++
			at = finishedAt.Time
		}
		return nil
	})
	return at, err == nil && n == len(prev.ids), err
}
