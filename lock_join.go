package spanmutex

import (
	"context"
	"slices"
	"strings"
	"time"
)

// The Lock's group commit of joins: the waiters of one lock in one Scope
// that join meanwhile are inserted into the queue in one commit, and placed
// by one read (the per-Scope state it keeps is scope_lock.go's).

// maxJoinBatch bounds how many waiters one commit inserts into the queue.
const maxJoinBatch = 256

// join inserts entry into the queue of lock name, together with the entries
// of the other waiters of this Scope that join meanwhile, and returns its
// key. The commit is bounded by timeout, whatever ctx says, so that the
// waiters that share it learn its outcome: an error may be of unknown
// outcome, for every entry of the batch.
//
// Its result also says, when known, about how many live entries are before
// ours: one read after the commit places the whole batch. written, if not
// nil, is told the commit's outcome before the lock's gate opens (an entry
// that starts its Scope's session: sessionWritten).
func (ll *localLock) join(ctx context.Context, st lockStore, name string, entry queueInsert, timeout time.Duration, written func(time.Time, error)) joinResult {
	req := &joinRequest{entry: entry, done: make(chan joinResult, 1), written: written}
	ll.mu.Lock()
	ll.joins = append(ll.joins, req)
	lead := !ll.joining
	ll.joining = true
	ll.mu.Unlock()
	if !lead {
		r := <-req.done
		if !r.lead {
			return r
		}
	}
	ll.commitJoins(ctx, st, name, timeout)
	return <-req.done
}

// commitJoins inserts the oldest pending entries, the leader's own first, in
// one blind write, tells each waiter its outcome, and passes the lead to the
// oldest waiter still pending, if any.
func (ll *localLock) commitJoins(ctx context.Context, st lockStore, name string, timeout time.Duration) {
	ll.mu.Lock()
	batch := ll.joins[:min(len(ll.joins), maxJoinBatch)]
	ll.joins = ll.joins[len(batch):]
	ll.mu.Unlock()

	entries := make([]queueInsert, len(batch))
	for i, r := range batch {
		entries[i] = r.entry
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	ts, err := gated(cctx, ll, func() (time.Time, error) {
		ts, err := st.enqueue(cctx, name, entries)
		for _, r := range batch {
			if r.written != nil {
				r.written(ts, err)
			}
		}
		return ts, err
	})
	// The batch's entries share the commit timestamp, and are queued by
	// their ids: the first one's place gives every one's. Waiters behind a
	// holder of this Scope need no place (they do not poll).
	slices.SortFunc(batch, func(a, b *joinRequest) int { return strings.Compare(a.entry.id, b.entry.id) })
	var (
		first  lockView
		placed bool
	)
	if held, _ := ll.anyHeld(); err == nil && !held {
		v, rerr := st.readLock(cctx, name, queueKey{at: ts, id: batch[0].entry.id})
		first, placed = v, rerr == nil
	}
	for i, r := range batch {
		r.done <- joinResult{key: queueKey{at: ts, id: r.entry.id}, err: err, placed: placed, ahead: first.ahead + i, token: first.Token, row: first.row}
	}

	ll.mu.Lock()
	defer ll.mu.Unlock()
	if len(ll.joins) == 0 {
		ll.joining = false
		return
	}
	ll.joins[0].done <- joinResult{lead: true}
}
