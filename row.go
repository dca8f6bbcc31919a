package spanmutex

import "time"

// row is one read of a section's row together with Spanner's clock at the
// moment of the read. Times are Spanner commit timestamps, zero when NULL.
type row struct {
	Exists     bool
	State      State
	Owner      string
	LeaseID    string
	Token      int64
	Attempts   int64
	LastError  string
	StartedAt  time.Time
	RenewedAt  time.Time
	FinishedAt time.Time
	UpdatedAt  time.Time
	// Lease is the lease the holder declared (LeaseMicros), 0 if the row
	// has none.
	Lease time.Duration
	// Version is the version that last started the row ("" if NULL, or not
	// read because the Mutex has no version).
	Version string
	// Queued is what the row's Queued column says of the lock's queue
	// (queue_mark.go); markUnknown unless a Lock's read read it.
	Queued queueMark
	// Now is Spanner's CURRENT_TIMESTAMP() read with the row: in the same
	// read-write transaction when deciding, or the same snapshot when peeking.
	Now time.Time
	// Session is the session the holder holds the row through ("" if
	// none, or not read: the table has no Session column). A row read with
	// its session is judged by it (withSession).
	Session string
}

// withSession returns r, which names a session, judged by it: the
// session's last renewal (renewedAt, if found) counts as a renewal of the
// row, and the session's lease as the row's, in place of the century the
// row declares (sessionHeldLease). A session not found lapsed long ago
// (or never committed): the row is judged by its own RenewedAt and the
// reader's own lease.
func (r row) withSession(renewedAt time.Time, lease time.Duration, found bool) row {
	if r.Session == "" {
		return r
	}
	r.Lease = 0
	if found {
		r.RenewedAt, r.Lease = latest(r.RenewedAt, renewedAt), lease
	}
	return r
}

// heldBy reports whether r shows the lock held under lease (or waiter) id.
func (r row) heldBy(id string) bool { return r.State == StateStarted && r.LeaseID == id }

// lastWritten is the latest commit timestamp in r: a lower bound of
// Spanner's clock at any transaction that read r.
func (r row) lastWritten() time.Time { return latest(r.StartedAt, r.RenewedAt, r.UpdatedAt) }

// latest returns the latest of ts.
func latest(ts ...time.Time) time.Time {
	var out time.Time
	for _, t := range ts {
		if t.After(out) {
			out = t
		}
	}
	return out
}
