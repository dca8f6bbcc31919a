package queue

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"cloud.google.com/go/spanner"

	"github.com/spanmutex/spanmutex"
	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/internal/sqldialect"
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

// maxClaimRequests caps the requests one claim takes, claimed and failed
// together: the rest wait for the next claim, which the worker makes at
// once while it holds the lease. A step commits the claim with the outcome
// of the job before it (at most as many requests), and Spanner refuses a
// commit of more than 80,000 mutations, counting every column a write
// sets and every column of each index entry it changes: at most
// maxMutationsPerRequest each, so a step writes at most 2 x 1,000 x 16 =
// 32,000 (TestClaimStaysWithinSpannersCommitLimits). Without the cap, a
// backlog of some thousands of updates of one resource made a commit
// Spanner refuses, and the create's outcome, in that commit, was never
// recorded.
const maxClaimRequests = 1000

// maxMutationsPerRequest bounds the mutations one request's claim, failure
// or outcome counts: at most 7 columns of the table (key included), the
// Pending index entry's 5 columns (PendingSince, RequestID, Status, Kind,
// Resource) and the ByResource entry's 4 (Resource, CreatedAt, Kind,
// PendingSince).
const maxMutationsPerRequest = 7 + 5 + 4

// empty reports whether the plan does nothing: the resource has nothing
// claimable left.
func (p claimPlan) empty() bool { return len(p.claim) == 0 && len(p.fail) == 0 }

// planClaim decides, from the resource's pending requests (new or
// in-progress, oldest first) and its create (nil if it has none; when
// pending, it is also among pending), what to claim:
//
//   - its create, while pending: alone, since updates wait for it;
//   - once the create is complete: its pending updates, oldest first, as
//     one group;
//   - once the create ended in error: nothing, and its pending updates end
//     in error "create failed: <its reason>";
//   - with no create at all: its pending updates end in error.
//
// A plan takes at most maxClaimRequests requests, the oldest: a later
// claim takes the rest.
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
			if r.Kind == KindUpdate && len(p.fail) < maxClaimRequests {
				p.fail = append(p.fail, failure{req: r, reason: reason})
			}
		}
		return p
	}
	for _, r := range cands {
		if len(p.claim)+len(p.fail) == maxClaimRequests {
			break
		}
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

// resourceRead is what a step reads in one statement: whether its lease
// still holds the resource's lock, the resource's pending requests (oldest
// first), its create (pending or not; nil if none), and the requests of
// the job the step finishes, by id.
type resourceRead struct {
	held    bool
	pending []Request
	create  *Request
	also    map[string]Request
}

// guardPlaceholder stands in resourceSQL for the lease's GuardSQL, which is
// put in after the statement is made in the database's dialect (the
// condition is written in it already).
const guardPlaceholder = "GUARD_CONDITION"

// resourceSQL selects, with the guard's answer in every row, the resource's
// requests that are pending, its creates, and the requests of @ids (the job
// a step finishes, of the same resource), by the index by resource, oldest
// first; one row of NULL requests and the answer if there are none.
func (w *Worker) resourceSQL() string {
	t := w.q.cfg.table
	return "SELECT r.`" + strings.Join(requestColumns, "`, r.`") + "`, r.`PendingSince` IS NOT NULL, g.held" +
		" FROM (SELECT " + guardPlaceholder + " AS held) AS g" +
		" LEFT JOIN `" + t + "`@{FORCE_INDEX=`" + t + "ByResource`} AS r ON r.`Resource` = @resource" +
		" AND (r.`PendingSince` IS NOT NULL OR r.`Kind` = 'create' OR r.`RequestID` IN UNNEST(@ids))" +
		" ORDER BY r.`CreatedAt`, r.`RequestID`"
}

// readResource reads, in txn and in one statement (a round trip; Guard's
// read and two reads by key would be three), what resourceRead holds: lease
// checked by its GuardSQL in dialect d, and resource's requests. A step
// writes nothing unless held.
func (w *Worker) readResource(ctx context.Context, txn *spanner.ReadWriteTransaction, d ddl.Dialect, lease *spanmutex.Lease, resource string, ids []string) (resourceRead, error) {
	stmt := sqldialect.Statement(d, w.resourceSQL(), map[string]any{"resource": resource, "ids": append([]string{}, ids...)})
	stmt.SQL = strings.Replace(stmt.SQL, guardPlaceholder, lease.GuardSQL(d), 1)
	out := resourceRead{also: map[string]Request{}}
	err := txn.QueryWithOptions(ctx, stmt, spanner.QueryOptions{RequestTag: tagStep}).Do(func(row *spanner.Row) error {
		n := row.Size()
		if err := row.Column(n-1, &out.held); err != nil {
			return err
		}
		var id spanner.NullString
		if err := row.Column(0, &id); err != nil || !id.Valid {
			return err // no request: the row carries the guard's answer alone
		}
		r, err := decodeRequest(row)
		if err != nil {
			return err
		}
		var pending bool
		if err := row.Column(n-2, &pending); err != nil {
			return err
		}
		if slices.Contains(ids, r.ID) {
			out.also[r.ID] = r
		}
		if r.Kind == KindCreate && out.create == nil {
			c := r
			out.create = &c
		}
		if pending {
			out.pending = append(out.pending, r)
		}
		return nil
	})
	if err != nil {
		return resourceRead{}, fmt.Errorf("queue: read the pending requests of %q: %w", resource, err)
	}
	return out, nil
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
