package main

import (
	"slices"
	"time"

	"github.com/spanmutex/spanmutex"
)

// sharedRow is the row of a semaphore or RWLock (state SHARED) with its
// queue, as status and resize show it: the size, the last token, the
// granted entries and the live waiters (Inspect reads them, judging
// liveness by the library's rule).
type sharedRow struct {
	name    string
	size    int64
	token   int64
	holders []sharedHolder // oldest first; lapsed ones too
	waiters int64
	waiting []sharedHolder // the live waiters in queue order (token 0)
}

// sharedHolder is a granted queue entry, or a waiting one.
type sharedHolder struct {
	owner   string
	permits int64 // held, or asked for by a waiter
	token   int64
	// left is the lease left by Spanner's clock at the read; ≤ 0: lapsed,
	// its permits are counted free and the next grant deletes the entry.
	left time.Duration
	// waited is how long a waiter has waited, by Spanner's clock.
	waited time.Duration
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

// writerWaits reports whether r is an RWLock's row for which a writer
// waits: new readers then queue behind it.
func (r sharedRow) writerWaits() bool {
	return r.rwLock() && slices.ContainsFunc(r.waiting, func(w sharedHolder) bool { return w.permits == rwLockSize })
}

// owners returns the owners of r's live holders, oldest first, each once:
// what status shows as the owner of a SHARED row.
func (r sharedRow) owners() []string {
	var out []string
	for _, h := range r.holders {
		if h.left > 0 && !slices.Contains(out, h.owner) {
			out = append(out, h.owner)
		}
	}
	return out
}

// sharedRows returns the SHARED rows among recs, as Inspect read them.
func sharedRows(recs []spanmutex.Record) []sharedRow {
	var out []sharedRow
	for _, rec := range recs {
		if rec.State != spanmutex.StateShared {
			continue
		}
		r := sharedRow{name: rec.Name, size: rec.Permits, token: rec.Token, waiters: int64(rec.Waiters)}
		for _, h := range rec.Holders {
			r.holders = append(r.holders, sharedHolder{owner: h.Owner, permits: h.Permits, token: h.Token, left: h.LeaseLeft})
		}
		for _, w := range rec.Waiting {
			r.waiting = append(r.waiting, sharedHolder{owner: w.Owner, permits: w.Permits, left: w.LeaseLeft, waited: w.Waited})
		}
		out = append(out, r)
	}
	return out
}
