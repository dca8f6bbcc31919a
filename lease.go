package spanmutex

import "time"

// Lease is a holder's claim on a section, handed to the section while it
// runs. Its token fences the holder's writes elsewhere: pass it along with
// every write the section makes, and have the receiver reject tokens lower
// than the highest it has seen.
type Lease struct {
	name       string
	owner      string
	id         string
	token      int64
	acquiredAt time.Time
	takeover   bool
}

// Name returns the section's name.
func (l *Lease) Name() string { return l.name }

// Owner returns the owner identity recorded in the row.
func (l *Lease) Owner() string { return l.owner }

// Token returns the fencing token of this acquisition: strictly greater than
// the token of every earlier acquisition or takeover of the same name, and
// never handed out again (as long as the row is not deleted).
func (l *Lease) Token() int64 { return l.token }

// AcquiredAt returns the Spanner commit timestamp of the acquisition.
func (l *Lease) AcquiredAt() time.Time { return l.acquiredAt }

// TookOver reports whether this acquisition took the section over from a
// holder that went silent past the watermark.
func (l *Lease) TookOver() bool { return l.takeover }
