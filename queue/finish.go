package queue

import (
	"context"
	"errors"
	"fmt"

	"cloud.google.com/go/spanner"

	"github.com/spanmutex/spanmutex"
)

// outcome is how a job's requests leave their claim.
type outcome struct {
	status    Status // complete, error, or new (released for another worker)
	lastError string // for error and new
}

// releasedAtShutdown is the LastError of requests released back to new
// because their handler overran the shutdown grace.
const releasedAtShutdown = "released at shutdown"

// finish records a job's outcome in one read-write transaction fenced by
// lease.Guard: every request of ids still in-progress under claim pid gets
// out (complete or error: finished, leaving the pending index; new: released
// to be claimed again). If the lease was lost it writes nothing and returns
// an error matching spanmutex.ErrLeaseLost: the next holder claims the
// requests again. It returns how many requests it wrote. A commit whose
// outcome is unknown is settled by reading the rows back.
func (w *Worker) finish(ctx context.Context, lease *spanmutex.Lease, pid string, ids []string, out outcome) (int, error) {
	t := w.q.cfg.table
	keys := make([]spanner.KeySet, len(ids))
	for i, id := range ids {
		keys[i] = spanner.Key{id}
	}
	var written int
	_, err := w.q.client.ReadWriteTransaction(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		w.stats.transactions.Add(1)
		written = 0
		if err := lease.Guard(ctx, txn); err != nil {
			return err
		}
		var ms []*spanner.Mutation
		err := txn.Read(ctx, t, spanner.KeySets(keys...), []string{"RequestID", "Status", "ProcessID"}).Do(func(row *spanner.Row) error {
			var id, status string
			var processID spanner.NullString
			if err := row.Columns(&id, &status, &processID); err != nil {
				return err
			}
			if Status(status) != StatusInProgress || processID.StringVal != pid {
				return nil // not ours any more (cannot happen while we hold the lease)
			}
			ms = append(ms, finishMutation(t, id, out))
			return nil
		})
		if err != nil {
			return fmt.Errorf("queue: read the claimed requests: %w", err)
		}
		written = len(ms)
		return txn.BufferWrite(ms)
	})
	if err != nil && !errors.Is(err, spanmutex.ErrLeaseLost) && commitUnknown(err) {
		landed, rerr := w.settleFinish(ctx, ids, pid, out.status)
		if rerr == nil && landed {
			return len(ids), nil
		}
	}
	if err != nil {
		return 0, err
	}
	return written, nil
}

// finishMutation writes out into request id.
func finishMutation(table, id string, out outcome) *spanner.Mutation {
	m := map[string]any{"RequestID": id, "Status": string(out.status)}
	switch out.status {
	case StatusComplete:
		m["FinishedAt"], m["PendingSince"] = spanner.CommitTimestamp, nil
	case StatusError:
		m["FinishedAt"], m["PendingSince"] = spanner.CommitTimestamp, nil
		m["LastError"] = truncateError(out.lastError)
	case StatusNew:
		// Stays pending, at its place in the queue.
		m["LastError"] = truncateError(out.lastError)
	}
	return spanner.UpdateMap(table, m)
}

// settleFinish reports, by a strong read, whether a finish of unknown
// outcome landed: every request of ids shows status under our claim pid (a
// later claim by another worker would show its own pid).
func (w *Worker) settleFinish(ctx context.Context, ids []string, pid string, status Status) (bool, error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	keys := make([]spanner.KeySet, len(ids))
	for i, id := range ids {
		keys[i] = spanner.Key{id}
	}
	w.stats.reads.Add(1)
	n := 0
	err := w.q.client.Single().Read(rctx, w.q.cfg.table, spanner.KeySets(keys...), []string{"Status", "ProcessID"}).Do(func(row *spanner.Row) error {
		var st string
		var processID spanner.NullString
		if err := row.Columns(&st, &processID); err != nil {
			return err
		}
		if Status(st) == status && processID.StringVal == pid {
			n++
		}
		return nil
	})
	return err == nil && n == len(ids), err
}
