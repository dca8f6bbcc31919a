package main

import (
	"time"

	"github.com/spanmutex/spanmutex"
)

// sharedRow is the row of a semaphore or RWLock (state SHARED) with its
// queue, as status and resize show it: the size, the last token, the
// granted entries and how many live waiters are queued (Inspect reads
// them, judging liveness by the library's rule).
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
		out = append(out, r)
	}
	return out
}
