package spanmutex

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"cloud.google.com/go/spanner"

	"github.com/spanmutex/spanmutex/ddl"
)

// Guard checks, inside the caller's own read-write transaction, that the
// lease is still held: the row is STARTED under this acquisition's id and
// token (for a Semaphore's or RWLock's lease: its queue entry still holds
// its token). It returns an error matching ErrLeaseLost if not, and the caller should then
// return it to make the transaction roll back. Once the holder has released
// the lease, Guard returns Err (matching ErrReleased) without reading.
//
// This is the strongest fence there is: Guard's read and the caller's writes
// commit in one serializable transaction, so they commit only if no takeover
// committed before them; a takeover that comes later is ordered after them.
//
//	_, err := client.ReadWriteTransaction(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
//		if err := lease.Guard(ctx, txn); err != nil {
//			return err
//		}
//		return txn.BufferWrite(myWrites)
//	})
func (l *Lease) Guard(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
	if l == nil {
		return errNilLease
	}
	if txn == nil {
		return fmt.Errorf("spanmutex: Guard: nil transaction")
	}
	if err := l.Err(); errors.Is(err, ErrReleased) {
		return err
	}
	if l.shared {
		return l.guardEntry(ctx, txn)
	}
	r, err := txn.ReadRow(ctx, l.table, spanner.Key{l.name}, []string{"State", "Owner", "LeaseID", "Token"})
	if errors.Is(err, spanner.ErrRowNotFound) {
		return &leaseLostError{Name: l.name, Token: l.token, Reason: "the row was deleted"}
	}
	if err != nil {
		return fmt.Errorf("spanmutex: Guard %q: %w", l.name, err)
	}
	return l.checkHeld(r)
}

// guardEntry is Guard for a Semaphore's lease: its entry, read by key in
// txn, must still hold its token. A holder whose permits were counted free
// (its lease lapsed) had its entry deleted by that commit.
func (l *Lease) guardEntry(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
	r, err := txn.ReadRow(ctx, l.table+ddl.QueueSuffix, spanner.Key{l.name, l.queuedAt, l.id}, []string{"Token"})
	if errors.Is(err, spanner.ErrRowNotFound) {
		return &leaseLostError{Name: l.name, Token: l.token, Reason: "its entry is gone: its permits were counted free after its lease ran out unrenewed"}
	}
	if err != nil {
		return fmt.Errorf("spanmutex: Guard %q: %w", l.name, err)
	}
	var token spanner.NullInt64
	if err := r.Columns(&token); err != nil {
		return fmt.Errorf("spanmutex: decode entry of %q: %w", l.name, err)
	}
	if token.Int64 != l.token {
		return &leaseLostError{Name: l.name, Token: l.token, CurrentToken: token.Int64, Reason: "its entry holds another token"}
	}
	return nil
}

// checkHeld returns an error matching ErrLeaseLost unless r (State, Owner, LeaseID,
// Token) shows this lease holding the row.
func (l *Lease) checkHeld(r *spanner.Row) error {
	var state, owner, leaseID spanner.NullString
	var token int64
	if err := r.Columns(&state, &owner, &leaseID, &token); err != nil {
		return fmt.Errorf("spanmutex: decode row %q: %w", l.name, err)
	}
	if State(state.StringVal) == StateStarted && leaseID.StringVal == l.id && token == l.token {
		return nil
	}
	lost := &leaseLostError{Name: l.name, Token: l.token, CurrentState: State(state.StringVal),
		CurrentOwner: owner.StringVal, CurrentToken: token, currentLeaseID: leaseID.StringVal}
	if token == l.token && leaseID.StringVal != l.id && State(state.StringVal) == StateFailed {
		lost.Reason = "another contender recorded the section FAILED as abandoned: " +
			"this holder did not renew within the lease on the last allowed attempt"
	}
	return lost
}

// GuardSQL returns Guard's check as a SQL condition in dialect d, for a
// caller that reads in its own read-write transaction anyway and would
// spare Guard's round trip, as etcd's Mutex.IsOwner serves a Txn's If: put
// it in a statement of that transaction (SELECT <cond> AS held, ... FROM
// ...), and go on only if it is TRUE. It is TRUE exactly when Guard would
// return nil; when it is FALSE, call Guard in the same transaction for the
// error matching ErrLeaseLost (or ErrReleased) that says why, and return it. Reading
// the condition in a read-write transaction locks the lock's row as
// Guard's read does, so the fence is as strong.
//
// The condition is self-contained: the lease's name, id and token are
// quoted literals, so it needs no parameters and fits any statement. For a
// nil or released lease it is FALSE.
func (l *Lease) GuardSQL(d ddl.Dialect) string {
	if l == nil || errors.Is(l.Err(), ErrReleased) {
		return "FALSE"
	}
	q := func(ident string) string { return "`" + ident + "`" }
	if d == ddl.PostgreSQL {
		q = func(ident string) string { return `"` + ident + `"` }
	}
	if l.shared { // a Semaphore's: its entry holds its token
		return fmt.Sprintf("EXISTS (SELECT 1 FROM %s AS g WHERE g.%s = %s AND g.%s = %s AND g.%s = %s)",
			q(l.table+ddl.QueueSuffix), q("Name"), sqlString(d, l.name), q("WaiterID"), sqlString(d, l.id),
			q("Token"), strconv.FormatInt(l.token, 10))
	}
	return fmt.Sprintf("EXISTS (SELECT 1 FROM %s AS g WHERE g.%s = %s AND g.%s = '%s' AND g.%s = %s AND g.%s = %s)",
		q(l.table), q("Name"), sqlString(d, l.name), q("State"), StateStarted,
		q("LeaseID"), sqlString(d, l.id), q("Token"), strconv.FormatInt(l.token, 10))
}

// sqlString is s as a string literal of dialect d. A name has no control
// characters (names.Name); quotes and backslashes are escaped.
func sqlString(d ddl.Dialect, s string) string {
	if d == ddl.PostgreSQL {
		return "'" + strings.ReplaceAll(s, "'", "''") + "'"
	}
	return "'" + strings.NewReplacer(`\`, `\\`, "'", `\'`).Replace(s) + "'"
}
