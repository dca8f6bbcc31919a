package spanmutex

import (
	"time"

	"cloud.google.com/go/spanner"
)

// holderRecord is who becomes the holder of a row in holderMutation.
type holderRecord struct {
	owner, leaseID string
	// lease is the lease the holder declares (0: none, contenders judge it
	// by their own lease).
	lease time.Duration
	// attempts is the run-once section's attempt count (0 for a Lock).
	attempts int64
	// version is the run-once section's version ("": not written).
	version string
	// session is the session the holder holds through ("": none, the
	// holder renews the row itself); it then declares sessionHeldLease.
	session string
}

// holderMutation is the one write that makes a holder, for every
// primitive: it moves the row read as r to STARTED under h with the next
// fencing token, which it returns (r.Token + 1, so tokens strictly
// increase), and stamps StartedAt and RenewedAt with the commit timestamp,
// from which contenders judge the holder's silence by Spanner's clock. A
// missing row is inserted.
func (s *spannerStore) holderMutation(r row, name string, h holderRecord) (*spanner.Mutation, int64) {
	token := r.Token + 1
	declared := spanner.NullInt64{Int64: h.lease.Microseconds(), Valid: h.lease > 0}
	if h.session != "" {
		declared = spanner.NullInt64{Int64: sessionHeldLease.Microseconds(), Valid: true}
	}
	cols := []string{"Name", "State", "Owner", "LeaseID", "Token", "Attempts", "StartedAt", "RenewedAt", "FinishedAt", "UpdatedAt", "LeaseMicros"}
	vals := []any{name, string(StateStarted), h.owner, h.leaseID, token, h.attempts,
		spanner.CommitTimestamp, spanner.CommitTimestamp, nil, spanner.CommitTimestamp, declared}
	if h.version != "" {
		cols, vals = append(cols, "Version"), append(vals, h.version)
	}
	if s.sessioned() {
		// Written every time, NULL too: a session of an earlier holder
		// must not keep this one live.
		cols, vals = append(cols, "Session"), append(vals, spanner.NullString{StringVal: h.session, Valid: h.session != ""})
	}
	if !r.Exists {
		return spanner.Insert(s.table, append(cols, "CreatedAt"), append(vals, spanner.CommitTimestamp)), token
	}
	return spanner.Update(s.table, cols, vals), token
}
