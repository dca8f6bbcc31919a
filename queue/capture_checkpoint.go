package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"cloud.google.com/go/spanner"

	"github.com/spanmutex/spanmutex/internal/leaserule"
)

// The states of a partition's checkpoint row.
const (
	partitionCreated  = "created"
	partitionRunning  = "running"
	partitionFinished = "finished"
)

// rootToken is the PartitionToken of a stream's root row, which stands for
// the initial query (whose partition token is NULL).
const rootToken = ""

// capturePartition is what a reader needs of a checkpoint row.
type capturePartition struct {
	token   string
	parents []string
	start   time.Time
	resume  time.Time
}

// captureCheckpoint is what a reader writes in one transaction: the requests made
// from a batch of records, and where the partition now stands.
type captureCheckpoint struct {
	token   string
	resume  time.Time // the next query's start_timestamp
	records int64     // data change records in the batch
	reqs    []Request // with their ids, in commit order
	// finish, when set, ends the partition and records its children.
	finish *childPartitionsRecord
}

// ensureRoot runs the initial query (partition token NULL) when the stream
// has no checkpoints yet, and records the partitions it returns, in one
// transaction with the root row. When several instances start at once, the
// first to commit wins and the others' results are discarded.
func (c spannerCapture) ensureRoot(ctx context.Context) error {
	if err := c.checkTable(ctx); err != nil {
		return err
	}
	_, err := c.client.Single().ReadRow(ctx, c.cfg.table, spanner.Key{c.stream, rootToken}, []string{"State"})
	if err == nil {
		return nil
	}
	if !errors.Is(err, spanner.ErrRowNotFound) { // a missing table is NotFound too
		return fmt.Errorf("queue: capture %s: read the checkpoint table %s: %w", c.stream, c.cfg.table, err)
	}
	start := c.cfg.start
	if start.IsZero() {
		// Spanner's clock, not ours: the stream refuses a start before its
		// own creation or too far in the future.
		if start, err = c.spannerNow(ctx, "run"); err != nil {
			return err
		}
	}
	var kids []*childPartitionsRecord
	err = c.query(ctx, start, nil, nil, func(r csRecord) error {
		if r.Children != nil {
			kids = append(kids, r.Children)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("queue: capture %s: initial query from %s: %w", c.stream, start.Format(time.RFC3339Nano), err)
	}
	_, err = c.client.ReadWriteTransaction(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		_, err := txn.ReadRow(ctx, c.cfg.table, spanner.Key{c.stream, rootToken}, []string{"State"})
		if err == nil {
			return nil // another instance recorded it first
		}
		if !errors.Is(err, spanner.ErrRowNotFound) {
			return err
		}
		ms := []*spanner.Mutation{c.newRow(rootToken, partitionFinished, nil, start)}
		for _, k := range kids {
			for _, ch := range k.Children {
				ms = append(ms, c.newRow(ch.Token, partitionCreated, ch.Parents, k.StartTimestamp))
			}
		}
		return txn.BufferWrite(ms)
	})
	if err != nil {
		return fmt.Errorf("queue: capture %s: record the initial partitions: %w", c.stream, err)
	}
	return nil
}

// spannerNow reads Spanner's clock (CURRENT_TIMESTAMP()).
func (c spannerCapture) spannerNow(ctx context.Context, _ string) (time.Time, error) {
	var now time.Time
	stmt, err := c.q.statement(ctx, "SELECT CURRENT_TIMESTAMP()", nil)
	if err == nil {
		var row *spanner.Row
		if row, err = c.client.Single().Query(ctx, stmt).Next(); err == nil {
			err = row.Columns(&now)
		}
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("queue: capture %s: read Spanner's clock: %w", c.stream, err)
	}
	return now, nil
}

// newRow is the insert of a new checkpoint row.
func (c *Capture) newRow(token, state string, parents []string, start time.Time) *spanner.Mutation {
	parents = normalizeParents(parents)
	m := map[string]any{
		"Stream": c.stream, "PartitionToken": token, "State": state, "ParentTokens": parents,
		"StartTimestamp": start, "ResumeTimestamp": start, "Records": int64(0), "Requests": int64(0),
		"CreatedAt": spanner.CommitTimestamp, "UpdatedAt": spanner.CommitTimestamp,
	}
	if state == partitionFinished {
		m["FinishedAt"] = spanner.CommitTimestamp
	}
	return spanner.InsertMap(c.cfg.table, m)
}

func normalizeParents(p []string) []string {
	out := slices.Clone(p)
	slices.Sort(out)
	out = slices.Compact(out)
	if out == nil {
		out = []string{}
	}
	return out
}

// runnable returns the partitions this instance may read now: not
// finished, every parent finished, and owned by nobody, by this instance, or
// by an instance whose lease has expired by Spanner's clock.
func (c spannerCapture) runnable(ctx context.Context) ([]capturePartition, error) {
	stmt, err := c.q.statement(ctx, fmt.Sprintf("SELECT c.`PartitionToken`, c.`ParentTokens`, c.`StartTimestamp`, c.`ResumeTimestamp`, c.`Owner`, c.`LeasedAt`, c.`LeaseMicros`,\n"+
		"  (SELECT COUNT(*) FROM `%[1]s` p WHERE p.`Stream` = c.`Stream` AND p.`PartitionToken` IN UNNEST(c.`ParentTokens`) AND p.`State` = 'finished'),\n"+
		"  CURRENT_TIMESTAMP()\n"+
		"FROM `%[1]s` c WHERE c.`Stream` = @stream AND c.`State` != 'finished'\n"+
		"ORDER BY c.`StartTimestamp`, c.`PartitionToken`", c.cfg.table),
		map[string]any{"stream": c.stream})
	if err != nil {
		return nil, err
	}
	var out []capturePartition
	err = c.client.Single().Query(ctx, stmt).Do(func(row *spanner.Row) error {
		var (
			p        capturePartition
			h        partitionHolder
			finished int64
		)
		if err := row.Columns(&p.token, &p.parents, &p.start, &p.resume, &h.owner, &h.leasedAt, &h.declared, &finished, &h.now); err != nil {
			return err
		}
		if int(finished) == len(p.parents) && c.mayClaim(h) {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("queue: capture %s: list partitions in %s: %w", c.stream, c.cfg.table, err)
	}
	return out, nil
}

// partitionHolder is what a claim is decided on: the row's owner, its
// last claim or checkpoint (a commit timestamp), the lease it declared
// then, and Spanner's clock read with them.
type partitionHolder struct {
	owner    spanner.NullString
	leasedAt spanner.NullTime
	declared spanner.NullInt64 // LeaseMicros; NULL in rows of older captures
	now      time.Time         // CURRENT_TIMESTAMP(), read with the row
}

// mayClaim decides ownership by the rule every primitive uses
// (leaserule): a partition without an owner, or owned by this instance,
// may be claimed; another owner's only once the lease it declared (this
// instance's own, for a row that declares none) has passed since its last
// claim or checkpoint, by Spanner's clock. A claimant's shorter lease does
// not shorten the owner's. There is no jitter: claimants race in
// read-write transactions and one wins.
func (c *Capture) mayClaim(h partitionHolder) bool {
	if !h.owner.Valid || h.owner.StringVal == c.cfg.owner || !h.leasedAt.Valid {
		return true
	}
	declared := time.Duration(h.declared.Int64) * time.Microsecond // 0 when NULL
	return leaserule.Lapsed(h.now, h.leasedAt.Time, declared, c.cfg.lease, 0)
}

// owns reports whether a checkpoint row in state, owned by owner, is still
// this instance's to write: every checkpoint transaction checks it, and
// writes nothing otherwise (errPartitionLost).
func (c *Capture) owns(state string, owner spanner.NullString) bool {
	return state != partitionFinished && owner.Valid && owner.StringVal == c.cfg.owner
}

// claim makes this instance the partition's owner, if it still may be, and
// returns the partition as the claiming transaction read it.
func (c spannerCapture) claim(ctx context.Context, token string) (capturePartition, bool, error) {
	var (
		p       capturePartition
		claimed bool
	)
	// Made before the transaction: the dialect may have to be read (see
	// Queue.statement).
	stmt, err := c.q.statement(ctx, fmt.Sprintf("SELECT `ParentTokens`, `StartTimestamp`, `ResumeTimestamp`, `State`, `Owner`, `LeasedAt`, `LeaseMicros`, CURRENT_TIMESTAMP()\n"+
		"FROM `%s` WHERE `Stream` = @stream AND `PartitionToken` = @token", c.cfg.table),
		map[string]any{"stream": c.stream, "token": token})
	if err != nil {
		return p, false, err
	}
	_, err = c.client.ReadWriteTransaction(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		claimed = false
		row, err := txn.Query(ctx, stmt).Next()
		if err != nil {
			return err
		}
		var (
			state string
			h     partitionHolder
		)
		p = capturePartition{token: token}
		if err := row.Columns(&p.parents, &p.start, &p.resume, &state, &h.owner, &h.leasedAt, &h.declared, &h.now); err != nil {
			return err
		}
		if state == partitionFinished || !c.mayClaim(h) {
			return nil
		}
		claimed = true
		return txn.BufferWrite([]*spanner.Mutation{spanner.UpdateMap(c.cfg.table, map[string]any{
			"Stream": c.stream, "PartitionToken": token, "State": partitionRunning, "Owner": c.cfg.owner,
			"LeasedAt": spanner.CommitTimestamp, "LeaseMicros": c.cfg.lease.Microseconds(), "UpdatedAt": spanner.CommitTimestamp,
		})})
	})
	if err != nil {
		return capturePartition{}, false, fmt.Errorf("queue: capture %s: claim partition %.16s…: %w", c.stream, token, err)
	}
	return p, claimed, nil
}

// commit writes a checkpoint and its requests in one read-write
// transaction, if this instance still owns the partition; otherwise it
// writes nothing and returns errPartitionLost. It returns how many requests
// were new.
func (c spannerCapture) commit(ctx context.Context, cp captureCheckpoint) (int, error) {
	var added int
	_, err := c.client.ReadWriteTransaction(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		row, err := txn.ReadRow(ctx, c.cfg.table, spanner.Key{c.stream, cp.token}, []string{"State", "Owner", "ResumeTimestamp", "Records", "Requests"})
		if err != nil {
			return err
		}
		var (
			state            string
			owner            spanner.NullString
			resume           time.Time
			records, enqueue int64
		)
		if err := row.Columns(&state, &owner, &resume, &records, &enqueue); err != nil {
			return err
		}
		if !c.owns(state, owner) {
			return errPartitionLost
		}
		if added, err = c.enqueueCaptured(ctx, txn, cp.reqs); err != nil {
			return err
		}
		resume = csMaxTime(resume, cp.resume) // never backwards
		update := map[string]any{
			"Stream": c.stream, "PartitionToken": cp.token, "ResumeTimestamp": resume,
			"Records": records + cp.records, "Requests": enqueue + int64(added),
			"LeasedAt": spanner.CommitTimestamp, "LeaseMicros": c.cfg.lease.Microseconds(), "UpdatedAt": spanner.CommitTimestamp,
		}
		ms := []*spanner.Mutation{}
		if cp.finish != nil {
			update["State"] = partitionFinished
			update["Owner"] = nil
			update["FinishedAt"] = spanner.CommitTimestamp
			kids, err := c.childMutations(ctx, txn, cp.finish)
			if err != nil {
				return err
			}
			ms = append(ms, kids...)
		}
		ms = append(ms, spanner.UpdateMap(c.cfg.table, update))
		return txn.BufferWrite(ms)
	})
	if err != nil {
		return 0, fmt.Errorf("queue: capture %s: checkpoint partition %.16s… at %s: %w", c.stream, cp.token, cp.resume.Format(time.RFC3339Nano), err)
	}
	return added, nil
}

// childMutations records the children of a finishing partition: a child of
// several parents (a merge) is named by each of them, and is recorded once,
// by the first, with the union of the parents named.
func (c spannerCapture) childMutations(ctx context.Context, txn *spanner.ReadWriteTransaction, rec *childPartitionsRecord) ([]*spanner.Mutation, error) {
	var ms []*spanner.Mutation
	for _, ch := range rec.Children {
		row, err := txn.ReadRow(ctx, c.cfg.table, spanner.Key{c.stream, ch.Token}, []string{"State", "ParentTokens"})
		if errors.Is(err, spanner.ErrRowNotFound) {
			ms = append(ms, c.newRow(ch.Token, partitionCreated, ch.Parents, rec.StartTimestamp))
			continue
		}
		if err != nil {
			return nil, err
		}
		var (
			state   string
			parents []string
		)
		if err := row.Columns(&state, &parents); err != nil {
			return nil, err
		}
		union := normalizeParents(append(parents, ch.Parents...))
		if state == partitionCreated && !slices.Equal(union, normalizeParents(parents)) {
			ms = append(ms, spanner.UpdateMap(c.cfg.table, map[string]any{
				"Stream": c.stream, "PartitionToken": ch.Token, "ParentTokens": union, "UpdatedAt": spanner.CommitTimestamp,
			}))
		}
	}
	return ms, nil
}

// release gives up the partitions this instance holds, so that another
// instance (or this one, restarted) takes them at once rather than after
// the lease. A failure only delays that.
func (c spannerCapture) release(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	stmt, err := c.q.statement(ctx, fmt.Sprintf("UPDATE `%s` SET `Owner` = NULL, `UpdatedAt` = PENDING_COMMIT_TIMESTAMP() WHERE `Stream` = @stream AND `Owner` = @owner AND `State` != 'finished'",
		c.cfg.table), map[string]any{"stream": c.stream, "owner": c.cfg.owner})
	if err != nil {
		return
	}
	_, _ = c.client.ReadWriteTransaction(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		_, err := txn.Update(ctx, stmt)
		return err
	})
}
