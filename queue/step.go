package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"cloud.google.com/go/spanner"

	"github.com/spanmutex/spanmutex"
	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/internal/spanerr"
)

// finishing is a job whose outcome is to be recorded: the requests of ids,
// in-progress under claim pid.
type finishing struct {
	pid string
	ids []string
	out outcome
}

// stepResult is what one step of a tenure committed.
type stepResult struct {
	finished int           // requests of the previous job recorded
	next     claimed       // what it claimed (an empty plan: nothing claimable)
	known    *resourceRead // the resource's requests as the step left them
}

// stepInput is what a step is to do: record prev's outcome (if not nil),
// claim the next job (if claimNext) under claim id pid, on the resource's
// requests as known (nil: read them).
type stepInput struct {
	prev      *finishing
	claimNext bool
	pid       string
	known     *resourceRead
}

// finishes returns the ids of the requests whose outcome the step records.
func (in stepInput) finishes() []string {
	if in.prev == nil {
		return nil
	}
	return in.prev.ids
}

// step runs one read-write transaction of a tenure on resource, fenced by
// lease's guard (readGuarded: its GuardSQL, read with the requests in one
// statement, or Guard's key read; either way a step costs one read and its
// Commit). It records the outcome of
// the previous job prev (if not nil) for the requests still in-progress
// under its claim, and, if claimNext, claims what is claimable next (see
// planClaim). Doing both in one
// transaction saves a transaction per job; the claim sees the outcome just
// recorded, so a create completed here lets its updates be claimed here.
//
// If the lease was lost it writes nothing and returns an error matching
// spanmutex.ErrLeaseLost: the next holder claims the requests again. A
// commit whose outcome is unknown is settled by reading rows back.
//
// pid is the next claim's id. A caller that retries a step whose outcome it
// could not settle passes the same pid again, so that the retry recognises
// what the first try wrote if it landed after all: the previous job's
// requests already finished under prev's claim, and the next ones already
// claimed under pid. It then writes the same outcome and the same claim
// again instead of counting a second claim.
func (w *Worker) step(ctx context.Context, lease *spanmutex.Lease, resource string, in stepInput) (stepResult, error) {
	d, err := w.q.dialect.Get(ctx) // read once per queue, never in a transaction
	if err != nil {
		return stepResult{}, err
	}
	var res stepResult
	resp, err := w.q.client.ReadWriteTransactionWithOptions(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		w.stats.transactions.Add(1)
		res = stepResult{next: claimed{processID: in.pid}}
		read, err := w.readGuarded(ctx, txn, d, lease, resource, in)
		if err != nil {
			return err
		}
		var ms []*spanner.Mutation
		if in.prev != nil {
			fin, recorded := w.finishMutations(read.also, in.prev)
			ms, res.finished = fin, len(fin)+recorded
		}
		live, create := asWritten(read.pending, read.create, in.prev, in.pid)
		if in.claimNext {
			res.next.plan = planClaim(resource, live, create, w.cfg.maxAttempts)
			ms = append(ms, w.claimMutations(res.next.plan, in.pid, lease.Token())...)
		}
		res.known = leftBy(live, create, res.next.plan, in.pid, lease.Token())
		return txn.BufferWrite(ms)
	}, spanner.TransactionOptions{TransactionTag: tagStep})
	ts := resp.CommitTs
	if err != nil && !errors.Is(err, spanmutex.ErrLeaseLost) && spanerr.UnknownOutcome(err) {
		if at, landed := w.settleStep(ctx, in.prev, res.next, in.pid); landed {
			ts, err = at, nil
		}
	}
	if err != nil {
		return stepResult{}, err
	}
	res.next.at = ts
	for i := range res.next.plan.claim {
		r := &res.next.plan.claim[i]
		r.Status, r.ProcessID, r.Token, r.ClaimedAt = StatusInProgress, in.pid, lease.Token(), ts
		r.Attempts++
	}
	return res, nil
}

// asWritten returns the resource's pending requests and its create, read in
// a step's transaction, as that transaction leaves them (reads do not see
// its own writes): less prev's requests, finished by it; the create with
// prev's outcome if prev was the create; and requests claimed under pid by
// an earlier try of the step that landed as they were before that claim.
func asWritten(pending []Request, create *Request, prev *finishing, pid string) ([]Request, *Request) {
	done := map[string]bool{}
	if prev != nil {
		for _, id := range prev.ids {
			done[id] = true
		}
	}
	live := pending[:0]
	for _, r := range pending {
		if done[r.ID] {
			continue
		}
		if r.Status == StatusInProgress && r.ProcessID == pid {
			r.Status, r.ProcessID, r.Attempts = StatusNew, "", r.Attempts-1
		}
		live = append(live, r)
	}
	if create != nil && done[create.ID] {
		create.Status = prev.out.status
		if prev.out.status == StatusError {
			create.LastError = truncateError(prev.out.lastError)
		}
	}
	return live, create
}

// settleStep settles a step whose outcome is unknown by reading back one
// row it would have written (it is atomic): prev's, if it finished a job,
// else one of next's claims. It reports the commit timestamp if it landed.
func (w *Worker) settleStep(ctx context.Context, prev *finishing, next claimed, pid string) (time.Time, bool) {
	var (
		at     time.Time
		landed bool
		err    error
	)
	switch {
	case prev != nil:
		at, landed, err = w.settleFinish(ctx, prev)
	case !next.plan.empty():
		at, landed, err = w.settleClaim(ctx, next, pid)
	}
	return at, err == nil && landed
}

// readGuarded is a step's read, in txn, which fails unless lease still
// holds the resource's lock. It reads the guard and the requests in
// readResource's one statement, unless the requests as the last step left
// them (in.known) decide the step: while the lease holds, only its holder
// changes them, and others only enqueue new ones. They decide a step that
// claims nothing (it records an outcome) and one they give something to
// claim (the updates pending behind a create it completes); such a step
// reads Guard's row alone, by key, the same round trip at a fraction of a
// statement's cost. A step they give nothing to claim reads the statement,
// which finds what was enqueued meanwhile and claims it in this tenure.
func (w *Worker) readGuarded(ctx context.Context, txn *spanner.ReadWriteTransaction, d ddl.Dialect, lease *spanmutex.Lease, resource string, in stepInput) (resourceRead, error) {
	ids := in.finishes()
	if in.known == nil || (in.claimNext && !w.knownClaims(resource, in)) {
		read, err := w.readResource(ctx, txn, d, lease, resource, ids)
		if err == nil && !read.held {
			err = guardRefused(ctx, txn, lease)
		}
		return read, err
	}
	if err := lease.Guard(ctx, txn); err != nil {
		return resourceRead{}, err
	}
	return in.known.copyFor(ids), nil
}

// knownClaims reports whether a step of in, on the resource's requests as
// known, would claim or fail any.
func (w *Worker) knownClaims(resource string, in stepInput) bool {
	k := in.known.copyFor(in.finishes())
	live, create := asWritten(k.pending, k.create, in.prev, in.pid)
	return !planClaim(resource, live, create, w.cfg.maxAttempts).empty()
}

// copyFor returns a copy of r, which a step may change, with the requests
// of ids (the job it finishes) in also.
func (r *resourceRead) copyFor(ids []string) resourceRead {
	out := resourceRead{held: true, pending: slices.Clone(r.pending), also: map[string]Request{}}
	if r.create != nil {
		c := *r.create
		out.create = &c
	}
	for _, p := range out.pending {
		if slices.Contains(ids, p.ID) {
			out.also[p.ID] = p
		}
	}
	return out
}

// guardRefused returns why lease no longer holds its lock, which its
// GuardSQL just found in txn: Guard's error, read in the same transaction.
func guardRefused(ctx context.Context, txn *spanner.ReadWriteTransaction, lease *spanmutex.Lease) error {
	if err := lease.Guard(ctx, txn); err != nil {
		return err
	}
	return fmt.Errorf("queue: the lease of %q (token %d) failed its guard's condition, and Guard's read found it held; writing nothing", lease.Name(), lease.Token())
}

// leftBy returns the resource's requests as a step leaves them that wrote
// plan under claim pid and token: live and create (its pending requests
// and its create, as asWritten gives them) less the requests plan ends in
// error, with those it claims in-progress under pid.
func leftBy(live []Request, create *Request, plan claimPlan, pid string, token int64) *resourceRead {
	reasons := map[string]string{}
	for _, f := range plan.fail {
		reasons[f.req.ID] = f.reason
	}
	claimed := map[string]bool{}
	for _, r := range plan.claim {
		claimed[r.ID] = true
	}
	left := func(r Request) (Request, bool) {
		if reason, ok := reasons[r.ID]; ok {
			r.Status, r.LastError = StatusError, truncateError(reason)
			return r, false
		}
		if claimed[r.ID] {
			r.Status, r.ProcessID, r.Token = StatusInProgress, pid, token
			r.Attempts++
		}
		return r, true
	}
	out := &resourceRead{held: true}
	for _, r := range live {
		if r, pending := left(r); pending {
			out.pending = append(out.pending, r)
		}
	}
	if create != nil {
		c, _ := left(*create)
		out.create = &c
	}
	return out
}

// finishMutations returns the writes that record prev's outcome, for its
// requests that reqs (read in the step's transaction, by id) show still
// in-progress under prev's claim, and how many show that outcome under
// prev's claim already (an earlier try of the step landed).
func (w *Worker) finishMutations(reqs map[string]Request, prev *finishing) ([]*spanner.Mutation, int) {
	var ms []*spanner.Mutation
	recorded := 0
	for _, id := range prev.ids {
		r, ok := reqs[id]
		switch {
		case !ok || r.ProcessID != prev.pid:
		case r.Status == StatusInProgress:
			ms = append(ms, finishMutation(w.q.cfg.table, id, r.Kind, prev.out))
		case r.Status == prev.out.status:
			recorded++
		}
	}
	return ms, recorded
}
