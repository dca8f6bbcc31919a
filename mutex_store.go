package spanmutex

import (
	"context"
	"fmt"
	"time"

	"cloud.google.com/go/spanner"
)

// mutexStore is the narrow interface between Run's loop and Spanner. The decision
// logic stays in decide, a pure function; the store reads rows with Spanner's
// clock and writes them in read-write transactions that decide again.
type mutexStore interface {
	// read returns the row and Spanner's clock from one strong, lock-free
	// snapshot.
	read(ctx context.Context, name string) (row, error)
	// readAt returns the row as it was at Spanner time at (a past time).
	readAt(ctx context.Context, name string, at time.Time) (row, error)
	// acquire re-reads the row in a read-write transaction, decides with p,
	// and writes STARTED (acquire, take over) or FAILED (abandon) if that is
	// the decision. The returned lease is non-nil only if it committed.
	acquire(ctx context.Context, name string, p policy, c claim) (decision, *Lease, error)
	// finish moves our STARTED row to DONE or FAILED, fenced on the lease.
	finish(ctx context.Context, l *Lease, to State, lastError string) error
	// renew sets RenewedAt to the commit timestamp, fenced on the lease.
	renew(ctx context.Context, l *Lease) error
	// release gives back a lease whose section never ran: NEEDED, one
	// attempt fewer.
	release(ctx context.Context, l *Lease) error
	// interrupt gives back the row of a section that returned an
	// *InterruptedError: NEEDED, one attempt fewer, reason in LastError,
	// fenced on the lease.
	interrupt(ctx context.Context, l *Lease, reason string) error
	// checkSchema returns an error matching ErrSchema if the table is missing or lacks a
	// column spanmutex needs.
	checkSchema(ctx context.Context) error
	// reset re-arms the row if decideReset allows it on Spanner's clock
	// (Reset, ForceReset): NEEDED, no attempt counted, leaseID as its
	// acquisition id; refused, an error matching ErrResetRefused.
	reset(ctx context.Context, name string, lease time.Duration, leaseID string, force bool) (ResetResult, error)
}

func (s *spannerStore) acquire(ctx context.Context, name string, p policy, c claim) (decision, *Lease, error) {
	var (
		d     decision
		lease *Lease
	)
	dialect, err := s.dialect.Get(ctx) // before the transaction: see statement
	if err != nil {
		return d, nil, s.explain(ctx, err)
	}
	commitTS, err := s.rw(ctx, tagMutex, func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
		s.stats.rwAttempts.Add(1)
		// The closure may run more than once: everything it reports is
		// reassigned on every run.
		d, lease = decision{}, nil
		r, err := s.queryRow(ctx, tx, dialect, name)
		if err != nil {
			return err
		}
		d = decide(r, p) // Spanner's clock: r.Now is CURRENT_TIMESTAMP() of this transaction.
		switch d.action {
		case actAcquire, actTakeOver:
			attempts := r.Attempts + 1
			if d.fresh {
				attempts = 1
			}
			// We declare our own lease: contenders judge our silence by it.
			h := holderRecord{owner: c.owner, leaseID: c.leaseID, lease: p.lease, attempts: attempts, session: c.session}
			if s.versioned {
				h.version = p.version
			}
			m, token := s.holderMutation(r, name, h)
			lease = newLease(name, c.owner, c.leaseID, token, d.action == actTakeOver, s.table)
			lease.attempt, lease.session = attempts, c.session
			return tx.BufferWrite(s.withSessionInsert([]*spanner.Mutation{m}, c.startSession))
		case actAbandon:
			msg := fmt.Sprintf("abandoned: holder %q (token %d) did not renew or finish within its lease of %v on attempt %d of %d",
				r.Owner, r.Token, holderLease(r, p.lease), r.Attempts, p.maxAttempts)
			// The abandoning contender's claim id replaces the holder's, so
			// that the holder, should it come back, finds its lease gone.
			return tx.BufferWrite([]*spanner.Mutation{spanner.Update(s.table,
				[]string{"Name", "State", "LeaseID", "LastError", "FinishedAt", "UpdatedAt"},
				[]any{name, string(StateFailed), c.leaseID, msg, spanner.CommitTimestamp, spanner.CommitTimestamp})})
		}
		return nil
	})
	if err != nil {
		// d is what the last run decided: if its commit landed after all,
		// it is what was written, and the caller settles that by reading.
		return d, nil, s.explain(ctx, err)
	}
	if lease != nil {
		lease.acquiredAt = commitTS
	}
	return d, lease, nil
}

// maxErrorText bounds the error text stored in LastError.
const maxErrorText = 8 << 10

// finish records to, fenced on the lease, and in the same transaction takes
// the section's watchers, which it wakes once the commit is acknowledged.
func (s *spannerStore) finish(ctx context.Context, l *Lease, to State, lastError string) error {
	var errText any
	if to == StateFailed {
		errText = truncate(lastError, maxErrorText)
	}
	var watchers []handOff
	_, err := s.fencedUpdate(ctx, l, func(lost *leaseLostError) bool {
		return lost.CurrentState == to && lost.currentLeaseID == l.id // an earlier try committed it; its answer was lost
	}, func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
		// The closure runs again only after an abort, which committed
		// nothing: the watchers are those of the run that commits.
		var (
			ms  []*spanner.Mutation
			err error
		)
		if watchers, ms, err = s.takeWatchersIn(ctx, tx, l.name, nil); err != nil {
			return err
		}
		return tx.BufferWrite(append(ms, spanner.Update(s.table, []string{"Name", "State", "LastError", "FinishedAt", "UpdatedAt"},
			[]any{l.name, string(to), errText, spanner.CommitTimestamp, spanner.CommitTimestamp})))
	})
	if err != nil {
		return err
	}
	s.wakeWatchers(ctx, watchers)
	return nil
}

func (s *spannerStore) release(ctx context.Context, l *Lease) error {
	var watchers []handOff
	_, err := s.rw(ctx, tagRelease, func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
		s.stats.rwAttempts.Add(1)
		r, err := tx.ReadRow(ctx, s.table, spanner.Key{l.name}, []string{"State", "LeaseID", "Attempts"})
		if err != nil {
			return err
		}
		var state, leaseID spanner.NullString
		var attempts int64
		if err := r.Columns(&state, &leaseID, &attempts); err != nil {
			return err
		}
		if State(state.StringVal) != StateStarted || leaseID.StringVal != l.id {
			watchers = nil
			return nil // no longer ours: nothing to give back
		}
		var ms []*spanner.Mutation
		if watchers, ms, err = s.takeWatchersIn(ctx, tx, l.name, nil); err != nil {
			return err
		}
		return tx.BufferWrite(append(ms, spanner.Update(s.table,
			[]string{"Name", "State", "Attempts", "UpdatedAt"},
			[]any{l.name, string(StateNeeded), max(attempts-1, 0), spanner.CommitTimestamp})))
	})
	if err != nil {
		return s.explain(ctx, err)
	}
	s.wakeWatchers(ctx, watchers) // the section is free again: its waiters may take it
	return nil
}
