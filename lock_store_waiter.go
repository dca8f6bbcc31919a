package spanmutex

// The Lock store's queue operations of a waiter: joining (enqueue),
// finding its entry again, proving it alive, and leaving.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/spanner"
	"google.golang.org/api/iterator"

	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/internal/sqldialect"
)

func (s *spannerStore) enqueue(ctx context.Context, name string, entries []queueInsert) (time.Time, error) {
	return s.insertEntries(ctx, name, entries, true)
}

func (s *spannerStore) findQueued(ctx context.Context, name, waiterID string) (queueKey, bool, error) {
	s.stats.reads.Add(1)
	stmt, err := s.dialect.Statement(ctx, fmt.Sprintf("SELECT `EnqueuedAt` FROM `%s` WHERE `Name` = @name AND `WaiterID` = @id", s.queueTable()),
		map[string]any{"name": name, "id": waiterID})
	if err != nil {
		return queueKey{}, false, s.explain(ctx, err)
	}
	it := taggedQuerier{s.client.Single(), tagFind}.Query(ctx, stmt)
	defer it.Stop()
	r, err := it.Next()
	if errors.Is(err, iterator.Done) {
		return queueKey{}, false, nil
	}
	if err != nil {
		return queueKey{}, false, s.explain(ctx, err)
	}
	var at time.Time
	if err := r.Columns(&at); err != nil {
		return queueKey{}, false, err
	}
	return queueKey{at: at, id: waiterID}, true, nil
}

func (s *spannerStore) renewWaiter(ctx context.Context, name string, key queueKey, session string) error {
	cols, vals := []string{"Name", "EnqueuedAt", "WaiterID", "RenewedAt"}, []any{name, key.at, key.id, spanner.CommitTimestamp}
	if s.sessioned() {
		cols, vals = append(cols, "Session"), append(vals, spanner.NullString{StringVal: session, Valid: session != ""})
	}
	return s.idempotentWrite(ctx, tagEntryRenew, []*spanner.Mutation{spanner.Update(s.queueTable(), cols, vals)})
}

// deleteWaiter deletes, in tx, every entry of waiter waiterID, including
// one whose insert had an unknown outcome and whose key was never learnt.
// The statement is in dialect d.
func (s *spannerStore) deleteWaiter(ctx context.Context, tx *spanner.ReadWriteTransaction, d ddl.Dialect, name, waiterID string) error {
	_, err := tx.Update(ctx, sqldialect.Statement(d, fmt.Sprintf("DELETE FROM `%s` WHERE `Name` = @name AND `WaiterID` = @id", s.queueTable()),
		map[string]any{"name": name, "id": waiterID}))
	return err
}

func (s *spannerStore) purgeWaiter(ctx context.Context, name, waiterID string) error {
	d, err := s.dialect.Get(ctx) // before the transaction: see statement
	if err != nil {
		return s.explain(ctx, err)
	}
	_, err = s.rw(ctx, tagLeave, func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
		s.stats.rwAttempts.Add(1)
		return s.deleteWaiter(ctx, tx, d, name, waiterID)
	})
	if err != nil {
		return s.explain(ctx, err)
	}
	return nil
}

func (s *spannerStore) leave(ctx context.Context, name, waiterID string) (handOff, error) {
	var to handOff
	d, err := s.dialect.Get(ctx) // before the transaction: see statement
	if err != nil {
		return handOff{}, s.explain(ctx, err)
	}
	at, err := s.rw(ctx, tagLeave, func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
		s.stats.rwAttempts.Add(1)
		to = handOff{}
		// The reads below see the deletion: a read-write transaction
		// reads its own DML.
		if err := s.deleteWaiter(ctx, tx, d, name, waiterID); err != nil {
			return err
		}
		v, head, complete, err := s.readForLeave(ctx, tx, d, name)
		if err != nil || !v.heldBy(waiterID) {
			return err
		}
		var ms []*spanner.Mutation
		to, ms = s.handOffMutations(v, head, complete, name, waiterID, "")
		return tx.BufferWrite(ms)
	})
	if err != nil {
		return handOff{}, s.explain(ctx, err)
	}
	to.at = at
	return to, nil
}
