package queue

import (
	"context"
	"fmt"

	"cloud.google.com/go/spanner"
)

// enqueueCaptured writes, in txn, those of reqs (with their ids, in commit
// order) whose ids are not in the table yet, and returns how many it wrote.
// An id already there is a request enqueued by an earlier read of the same
// change: it is skipped, which makes a replay a no-op. A request the queue
// would refuse (a second create, an update with no create) is adapted or
// recorded as an error, as the ConflictPolicy says, so that a change never
// blocks the capture.
func (c spannerCapture) enqueueCaptured(ctx context.Context, txn *spanner.ReadWriteTransaction, reqs []Request) (int, error) {
	if len(reqs) == 0 {
		return 0, nil
	}
	existing, err := c.q.existingIDs(ctx, txn, ids(reqs))
	if err != nil {
		return 0, err
	}
	var fresh []Request
	var resources []string
	for _, r := range reqs {
		if !existing[r.ID] {
			fresh = append(fresh, r)
			resources = append(resources, r.Resource)
			existing[r.ID] = true // a batch may name one id twice (a Mapper's own ids)
		}
	}
	if len(fresh) == 0 {
		return 0, nil
	}
	created, err := c.q.createdAmong(ctx, txn, resources)
	if err != nil {
		return 0, err
	}
	var (
		accepted []Request
		refused  []*spanner.Mutation
	)
	for _, r := range fresh {
		var conflict string
		switch {
		case r.Kind == KindCreate && created[r.Resource]:
			conflict = fmt.Sprintf("queue: capture: create of resource %q refused: it already has a create request", r.Resource)
			if c.cfg.conflict == ConflictAdapt {
				r.Kind = KindUpdate
				conflict = ""
			}
		case r.Kind == KindUpdate && !created[r.Resource]:
			conflict = fmt.Sprintf("queue: capture: update of resource %q refused: it has no create request", r.Resource)
			if c.cfg.conflict == ConflictAdapt {
				r.Kind = KindCreate
				conflict = ""
			}
		}
		if conflict != "" {
			refused = append(refused, c.errorRow(r, conflict))
			continue
		}
		if r.Kind == KindCreate {
			created[r.Resource] = true
		}
		accepted = append(accepted, r)
	}
	if len(accepted) > 0 {
		// insert checks again, with the same reads, and writes the rows as
		// Enqueue would.
		if err := c.q.insert(ctx, txn, accepted); err != nil {
			return 0, err
		}
	}
	if err := txn.BufferWrite(refused); err != nil {
		return 0, err
	}
	return len(fresh), nil
}

// errorRow is a refused request, kept in status error with the reason, never
// pending. It is stored as an update: the queue allows one create per
// resource, and this one was refused.
func (c spannerCapture) errorRow(r Request, reason string) *spanner.Mutation {
	return spanner.InsertMap(c.q.cfg.table, map[string]any{
		"RequestID":   r.ID,
		"Status":      string(StatusError),
		"Kind":        string(KindUpdate),
		"Resource":    r.Resource,
		"Payload":     r.Payload,
		"Attempts":    int64(0),
		"LastError":   reason,
		"CreatedAt":   spanner.CommitTimestamp,
		"FinishedAt":  spanner.CommitTimestamp,
		"ExpiresFrom": spanner.CommitTimestamp,
	})
}
