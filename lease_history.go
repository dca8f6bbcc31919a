package spanmutex

import (
	"context"
	"errors"
	"time"

	"github.com/spanmutex/spanmutex/internal/spanerr"
)

// historyReader reads a row now and as of a past Spanner time.
type historyReader interface {
	read(ctx context.Context, name string) (row, error)
	readAt(ctx context.Context, name string, at time.Time) (row, error)
}

// lostWrite settles whether a fenced write of a lease, moving its row to
// a state, landed after the answer to one of its tries was lost.
//
// A strong read settles it while the row is still the lease's (the write
// has not landed: try it again) or shows the write itself. Once a strong
// read shows the row moved on, no further try can land (they are fenced on
// the lease) and only the row's history can say whether an earlier one
// did: the first version after the lease's last acknowledged renewal that
// no longer shows the lease holding the row is either our write or
// someone's takeover. What the search has learnt of that history is kept
// across calls, since history does not change: a search cut short by
// failing reads resumes where it stopped, and the whole search costs at
// most maxHistoryReads successful reads however often it is resumed.
type lostWrite struct {
	l    *Lease
	ours func(row) bool // whether a version of the row is our write's
	// lo and hi bound the first version that is not the lease's: the
	// row was the lease's at lo and was first (as read at hi) at hi.
	// hi is zero until a strong read showed the row moved on.
	lo, hi time.Time
	first  row
	moved  row // the strong read that showed the row moved on
	reads  int // successful exact-timestamp reads so far
}

// newLostWrite starts settling a write of l that moves its row to state to.
func newLostWrite(l *Lease, to State) *lostWrite {
	return &lostWrite{l: l, ours: func(v row) bool { return v.State == to && v.LeaseID == l.id && v.Token == l.token }}
}

// movedOn reports whether a strong read showed the row moved on from the
// lease: trying the write again is then useless, only settle can tell.
func (w *lostWrite) movedOn() bool { return !w.hi.IsZero() }

// settle reports whether the write landed and returns the strong read that
// decided it (the row is not the lease's if it did not land and that read
// shows it moved on; it is, if the write may be tried again). An error
// (reads that kept failing, maxHistoryFailures in this call) leaves the
// outcome unknown: call settle again later, which resumes the search.
func (w *lostWrite) settle(ctx context.Context, st historyReader) (bool, row, error) {
	if !w.movedOn() {
		r, err := w.readNow(ctx, st)
		if err != nil {
			return false, row{}, err
		}
		if w.ours(r) || r.heldBy(w.l.id) {
			return w.ours(r), r, nil
		}
		w.lo, w.hi, w.first, w.moved = w.l.lastRenewedAt(), r.Now, r, r
		if w.lo.IsZero() {
			return false, r, errHistoryUnknown
		}
	}
	ok, err := w.search(ctx, st)
	return ok, w.moved, err
}

// readNow reads the row strongly, retrying transient failures up to
// maxHistoryFailures times.
func (w *lostWrite) readNow(ctx context.Context, st historyReader) (row, error) {
	var err error
	for range maxHistoryFailures {
		var r row
		if r, err = st.read(ctx, w.l.name); err == nil {
			return r, nil
		}
		if !spanerr.Retryable(err) || ctx.Err() != nil {
			break
		}
	}
	return row{}, err
}

// search narrows [lo, hi] by exact-timestamp reads that halve it, until it
// is a microsecond wide: first is then the first version that no longer
// shows the lease holding the row, and ours says whether it is our write.
func (w *lostWrite) search(ctx context.Context, st historyReader) (bool, error) {
	failed := 0
	for w.hi.Sub(w.lo) > time.Microsecond {
		if w.reads >= maxHistoryReads {
			return false, errHistoryUnknown
		}
		mid := w.lo.Add(w.hi.Sub(w.lo) / 2).Truncate(time.Microsecond)
		if !mid.After(w.lo) {
			mid = w.lo.Add(time.Microsecond)
		}
		v, err := st.readAt(ctx, w.l.name, mid)
		if err != nil {
			if failed++; failed > maxHistoryFailures || !spanerr.Retryable(err) || ctx.Err() != nil {
				return false, err
			}
			continue
		}
		w.reads++
		if v.heldBy(w.l.id) && v.Token == w.l.token {
			w.lo = mid
		} else {
			w.hi, w.first = mid, v
		}
	}
	return w.ours(w.first), nil
}

// errHistoryUnknown: the row's history could not say whether a write
// landed.
var errHistoryUnknown = errors.New("spanmutex: the row's history does not say whether our write landed")

// maxHistoryReads bounds the successful exact-timestamp reads of a
// lostWrite (enough to halve an hour down to a microsecond), and
// maxHistoryFailures the transient failures a call of settle retries.
const (
	maxHistoryReads    = 40
	maxHistoryFailures = 5
)
