package queue

import (
	"context"
	"fmt"
	"slices"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/spanmutex/spanmutex/internal/textcut"
)

// claimPlan is what a worker holding a resource's lease does with the
// resource's pending requests in one claim transaction.
type claimPlan struct {
	kind      Kind      // what the claimed requests are
	claim     []Request // requests to claim (set in-progress) and hand to the handler
	fail      []failure // requests to end in error now, without a handler
	reclaimed int       // how many of claim were in-progress under a dead claim
}

// failure is a request that ends in error, and why.
type failure struct {
	req    Request
	reason string
}

// empty reports whether the plan does nothing: the resource has nothing
// claimable left.
func (p claimPlan) empty() bool { return len(p.claim) == 0 && len(p.fail) == 0 }

// planClaim decides, from the resource's pending requests (new or
// in-progress, oldest first) and its create (nil if it has none; when
// pending, it is also among pending), what to claim:
//
//   - its create, while pending: alone, since updates wait for it;
//   - once the create is complete: every pending update, as one group;
//   - once the create ended in error: nothing, and every pending update ends
//     in error "create failed: <its reason>";
//   - with no create at all: every pending update ends in error.
//
// A request already claimed maxAttempts times ends in error instead of being
// claimed again. The caller holds the resource's lease, so a request found
// in-progress belongs to a claim whose worker lost the lease: it is claimed
// again.
func planClaim(resource string, pending []Request, create *Request, maxAttempts int) claimPlan {
	var cands []Request
	var p claimPlan
	switch {
	case create != nil && !create.Status.Finished():
		p.kind, cands = KindCreate, []Request{*create}
	case create != nil && create.Status == StatusComplete:
		p.kind = KindUpdate
		for _, r := range pending {
			if r.Kind == KindUpdate {
				cands = append(cands, r)
			}
		}
	default:
		reason := fmt.Sprintf("resource %q has no create request", resource)
		if create != nil {
			reason = "create failed: " + create.LastError
		}
		for _, r := range pending {
			if r.Kind == KindUpdate {
				p.fail = append(p.fail, failure{req: r, reason: reason})
			}
		}
		return p
	}
	for _, r := range cands {
		if r.Attempts >= int64(maxAttempts) {
			p.fail = append(p.fail, failure{req: r, reason: fmt.Sprintf("gave up after %d claims", r.Attempts)})
			continue
		}
		if r.Status == StatusInProgress {
			p.reclaimed++
		}
		p.claim = append(p.claim, r)
	}
	return p
}

// claimed is the outcome of a committed claim transaction.
type claimed struct {
	plan      claimPlan
	processID string    // the claim's id, in the claimed rows' ProcessID
	at        time.Time // the commit timestamp: ClaimedAt, or FinishedAt of the failures
}

// readResource reads, in txn, resource's pending requests, oldest first, and
// its create (pending or not; nil if it has none): the ids, kinds and
// pending marks of the resource's requests from the index by resource (which
// stores them), then the whole of the pending ones and the create. Two reads
// by key rather than a query: the emulator answers those without scanning
// the whole table. The second read also reads the requests of ids, which it
// returns by id in also: a step reads the job it finishes with the requests
// it claims next.
func (w *Worker) readResource(ctx context.Context, txn *spanner.ReadWriteTransaction, resource string, ids []string) (pending []Request, create *Request, also map[string]Request, err error) {
	t := w.q.cfg.table
	fail := func(err error) ([]Request, *Request, map[string]Request, error) {
		return nil, nil, nil, fmt.Errorf("queue: read the pending requests of %q: %w", resource, err)
	}
	wanted := slices.Clone(ids)
	order := map[string]int{} // id → place in (CreatedAt, RequestID) order
	pendingIDs := map[string]bool{}
	n := 0
	// The index stores Kind and PendingSince: the finished history of the
	// resource is skipped without reading the table.
	err = txn.ReadUsingIndex(ctx, t, t+"ByResource", spanner.Key{resource}.AsPrefix(), []string{"RequestID", "Kind", "PendingSince"}).Do(func(row *spanner.Row) error {
		var id, kind string
		var pendingSince spanner.NullTime
		if err := row.Columns(&id, &kind, &pendingSince); err != nil {
			return err
		}
		order[id] = n
		n++
		pendingIDs[id] = pendingSince.Valid
		if (pendingSince.Valid || Kind(kind) == KindCreate) && !slices.Contains(ids, id) {
			wanted = append(wanted, id)
		}
		return nil
	})
	if err != nil {
		return fail(err)
	}
	if len(wanted) == 0 {
		return nil, nil, nil, nil
	}
	rows := make([]*Request, n)
	also = map[string]Request{}
	err = txn.Read(ctx, t, keysOf(wanted), requestColumns).Do(func(row *spanner.Row) error {
		r, err := decodeRequest(row)
		if err != nil {
			return err
		}
		if slices.Contains(ids, r.ID) {
			also[r.ID] = r
		}
		if i, ok := order[r.ID]; ok {
			rows[i] = &r
		}
		return nil
	})
	if err != nil {
		return fail(err)
	}
	for _, r := range rows {
		if r == nil {
			continue
		}
		if r.Kind == KindCreate && create == nil {
			c := *r
			create = &c
		}
		if pendingIDs[r.ID] {
			pending = append(pending, *r)
		}
	}
	return pending, create, also, nil
}

// claimMutations writes plan: claimed rows in-progress under pid and token,
// failed rows finished in error.
func (w *Worker) claimMutations(plan claimPlan, pid string, token int64) []*spanner.Mutation {
	t := w.q.cfg.table
	var ms []*spanner.Mutation
	for _, r := range plan.claim {
		ms = append(ms, spanner.UpdateMap(t, map[string]any{
			"RequestID": r.ID,
			"Status":    string(StatusInProgress),
			"ProcessID": pid,
			"Token":     token,
			"Attempts":  r.Attempts + 1,
			"ClaimedAt": spanner.CommitTimestamp,
		}))
	}
	for _, f := range plan.fail {
		ms = append(ms, spanner.UpdateMap(t, map[string]any{
			"RequestID":    f.req.ID,
			"Status":       string(StatusError),
			"LastError":    truncateError(f.reason),
			"FinishedAt":   spanner.CommitTimestamp,
			"ExpiresFrom":  spanner.CommitTimestamp,
			"PendingSince": nil,
		}))
	}
	return ms
}

// settleClaim reads back one row a claim of unknown outcome wrote, and
// reports whether the claim committed, with its commit timestamp.
func (w *Worker) settleClaim(ctx context.Context, c claimed, pid string) (time.Time, bool, error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	var id string
	if len(c.plan.claim) > 0 {
		id = c.plan.claim[0].ID
	} else {
		id = c.plan.fail[0].req.ID
	}
	got, err := w.q.Get(rctx, id)
	w.stats.reads.Add(1)
	if err != nil {
		return time.Time{}, false, err
	}
	if len(c.plan.claim) > 0 {
		return got.ClaimedAt, got.ProcessID == pid, nil
	}
	return got.FinishedAt, got.Status.Finished(), nil
}

// maxLastError bounds the error text recorded in LastError.
const maxLastError = 16 << 10

// truncateError shortens an error text to maxLastError bytes, on a rune
// boundary.
func truncateError(s string) string { return textcut.Cut(s, maxLastError, "… (truncated)") }
