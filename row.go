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
