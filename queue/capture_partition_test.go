package queue

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/stretchr/testify/require"

	"github.com/spanmutex/spanmutex/ddl"
)

// Partition bookkeeping, on checkpoint rows written by hand: the emulator
// splits and merges partitions only every 20-40s, so the long tests see
// splits but rarely a merge.

func runnableTokens(t *testing.T, c *Capture) []string {
	t.Helper()
	ps, err := c.store.runnable(context.Background())
	require.NoError(t, err)
	var out []string
	for _, p := range ps {
		out = append(out, p.token)
	}
	sort.Strings(out)
	return out
}

func TestCaptureStartsAMergedChildOnceAfterAllItsParents(t *testing.T) {
	c, start := captureDatabase(t)
	q, err := New(c)
	require.NoError(t, err)
	ctx := context.Background()
	a := fastCapture(t, q, c, start, WithCaptureID("A"))
	_, err = c.Apply(ctx, []*spanner.Mutation{
		a.newRow(rootToken, partitionFinished, nil, start),
		a.newRow("P1", partitionCreated, nil, start),
		a.newRow("P2", partitionCreated, nil, start),
		a.newRow("P3", partitionCreated, nil, start),
	})
	require.NoError(t, err)
	require.Equal(t, []string{"P1", "P2", "P3"}, runnableTokens(t, a))
	for _, tok := range []string{"P1", "P2", "P3"} {
		_, claimed, err := a.store.claim(ctx, tok)
		require.NoError(t, err)
		require.True(t, claimed)
	}

	// P1 and P2 merge into M: each names M, with both parents.
	end := start.Add(time.Second)
	merge := &childPartitionsRecord{StartTimestamp: end, Children: []childPartition{{Token: "M", Parents: []string{"P2", "P1"}}}}
	_, err = a.store.commit(ctx, captureCheckpoint{token: "P1", resume: end, finish: merge})
	require.NoError(t, err)
	require.Equal(t, []string{"P2", "P3"}, runnableTokens(t, a), "M waits for P2")
	_, err = a.store.commit(ctx, captureCheckpoint{token: "P2", resume: end, finish: merge})
	require.NoError(t, err, "the second parent's record of M is not a second insert")
	require.Equal(t, []string{"M", "P3"}, runnableTokens(t, a))

	// P3 splits into S1 and S2, runnable at once.
	split := &childPartitionsRecord{StartTimestamp: end, Children: []childPartition{
		{Token: "S1", Parents: []string{"P3"}}, {Token: "S2", Parents: []string{"P3"}}}}
	_, err = a.store.commit(ctx, captureCheckpoint{token: "P3", resume: end, finish: split})
	require.NoError(t, err)
	require.Equal(t, []string{"M", "S1", "S2"}, runnableTokens(t, a))

	rows := map[string]partitionRow{}
	for _, p := range checkpointRows(t, c, ddl.DefaultCaptureTable, ordersStream) {
		rows[p.Token] = p
	}
	require.Equal(t, []string{"P1", "P2"}, rows["M"].Parents)
	require.Equal(t, partitionCreated, rows["M"].State)
	require.Equal(t, end, rows["M"].Resume, "a child starts at its start timestamp")
	for _, tok := range []string{"P1", "P2", "P3"} {
		require.Equal(t, partitionFinished, rows[tok].State)
		require.Empty(t, rows[tok].Owner)
	}
	_, err = a.store.commit(ctx, captureCheckpoint{token: "P1", resume: end.Add(time.Second)})
	require.ErrorIs(t, err, errPartitionLost, "a finished partition takes no more checkpoints")
}

func TestCaptureOwnerFencesCheckpointsUntilItsLeaseExpires(t *testing.T) {
	t.Parallel() // waits out leases beside the other waiting tests, on its own database
	c, start := captureDatabase(t)
	q, err := New(c)
	require.NoError(t, err)
	ctx := context.Background()
	short := []CaptureOption{WithQueryWindow(100 * time.Millisecond), WithPartitionLease(1500 * time.Millisecond)}
	a := fastCapture(t, q, c, start, append(short, WithCaptureID("A"))...)
	b := fastCapture(t, q, c, start, append(short, WithCaptureID("B"))...)
	_, err = c.Apply(ctx, []*spanner.Mutation{a.newRow(rootToken, partitionFinished, nil, start), a.newRow("P", partitionCreated, nil, start)})
	require.NoError(t, err)

	_, claimed, err := a.store.claim(ctx, "P")
	require.NoError(t, err)
	require.True(t, claimed)
	require.Empty(t, runnableTokens(t, b), "B does not see A's partition as runnable")
	_, claimed, err = b.store.claim(ctx, "P")
	require.NoError(t, err)
	require.False(t, claimed, "nor can it claim it while A's lease lasts")
	req := Request{ID: "cs-from-b", Kind: KindCreate, Resource: "r"}
	_, err = b.store.commit(ctx, captureCheckpoint{token: "P", resume: start, records: 1, reqs: []Request{req}})
	require.ErrorIs(t, err, errPartitionLost)
	_, err = q.Get(ctx, req.ID)
	require.ErrorIs(t, err, ErrNotFound, "B's checkpoint transaction wrote nothing")

	// A stops writing checkpoints (paused, crashed): once its lease has
	// expired by Spanner's clock, B takes over and A is fenced off.
	waitFor(t, 30*time.Second, "B to take the partition over", func() bool {
		_, claimed, err := b.store.claim(ctx, "P")
		require.NoError(t, err)
		return claimed
	})
	added, err := b.store.commit(ctx, captureCheckpoint{token: "P", resume: start.Add(time.Second), records: 1, reqs: []Request{req}})
	require.NoError(t, err)
	require.Equal(t, 1, added)
	_, err = a.store.commit(ctx, captureCheckpoint{token: "P", resume: start.Add(2 * time.Second), records: 1,
		reqs: []Request{{ID: "cs-from-a", Kind: KindUpdate, Resource: "r"}}})
	require.ErrorIs(t, err, errPartitionLost)
	_, err = q.Get(ctx, "cs-from-a")
	require.ErrorIs(t, err, ErrNotFound, "A, back from its pause, wrote nothing")
	rows := checkpointRows(t, c, ddl.DefaultCaptureTable, ordersStream)
	for _, p := range rows {
		if p.Token == "P" {
			require.Equal(t, "B", p.Owner)
			require.Equal(t, start.Add(time.Second), p.Resume)
			require.Equal(t, int64(1), p.Requests)
		}
	}
}

// partitionLease reads who owns partition token, when it last claimed or
// checkpointed it, and the lease it declared then.
func partitionLease(t *testing.T, c *spanner.Client, token string) (owner string, leasedAt time.Time, declared spanner.NullInt64) {
	t.Helper()
	row, err := c.Single().ReadRow(context.Background(), ddl.DefaultCaptureTable, spanner.Key{ordersStream, token},
		[]string{"Owner", "LeasedAt", "LeaseMicros"})
	require.NoError(t, err)
	var o spanner.NullString
	require.NoError(t, row.Columns(&o, &leasedAt, &declared))
	return o.StringVal, leasedAt, declared
}

// A partition is taken over by the rule of every primitive: only after the
// lease its owner declared, by Spanner's clock, however short the
// claimant's own; a row that declares none (written by an older capture)
// is judged by the claimant's own lease.
func TestCaptureTakesOverOnlyAfterTheOwnersDeclaredLease(t *testing.T) {
	t.Parallel() // waits out leases beside the other waiting tests, on its own database
	c, start := captureDatabase(t)
	q, err := New(c)
	require.NoError(t, err)
	ctx := context.Background()
	window := WithQueryWindow(100 * time.Millisecond)
	a := fastCapture(t, q, c, start, WithCaptureID("A"), window, WithPartitionLease(4*time.Second))
	old := fastCapture(t, q, c, start, WithCaptureID("OLD"), window, WithPartitionLease(time.Hour))
	b := fastCapture(t, q, c, start, WithCaptureID("B"), window, WithPartitionLease(1500*time.Millisecond))
	_, err = c.Apply(ctx, []*spanner.Mutation{a.newRow(rootToken, partitionFinished, nil, start),
		a.newRow("P", partitionCreated, nil, start), a.newRow("Q", partitionCreated, nil, start)})
	require.NoError(t, err)
	claimBy := func(cp *Capture, token string) bool {
		_, claimed, err := cp.store.claim(ctx, token)
		require.NoError(t, err)
		return claimed
	}
	require.True(t, claimBy(a, "P"))
	require.True(t, claimBy(old, "Q"))
	_, aAt, declared := partitionLease(t, c, "P")
	require.Equal(t, spanner.NullInt64{Int64: (4 * time.Second).Microseconds(), Valid: true}, declared, "A declares its lease")
	// OLD's row as a capture older than LeaseMicros wrote it: no declaration.
	_, err = c.Apply(ctx, []*spanner.Mutation{spanner.UpdateMap(ddl.DefaultCaptureTable, map[string]any{
		"Stream": ordersStream, "PartitionToken": "Q", "LeaseMicros": nil})})
	require.NoError(t, err)
	_, oldAt, _ := partitionLease(t, c, "Q")

	waitFor(t, 30*time.Second, "B to take P over", func() bool { return claimBy(b, "P") })
	owner, bAt, declared := partitionLease(t, c, "P")
	require.Equal(t, "B", owner)
	require.GreaterOrEqual(t, bAt.Sub(aAt), 4*time.Second,
		"B, whose own lease is 1.5s, took P over %v after A's claim, by Spanner's clock; A declared 4s", bAt.Sub(aAt))
	require.Equal(t, (1500 * time.Millisecond).Microseconds(), declared.Int64, "B declares its own lease")

	waitFor(t, 30*time.Second, "B to take Q over", func() bool { return claimBy(b, "Q") })
	owner, bAt, _ = partitionLease(t, c, "Q")
	require.Equal(t, "B", owner)
	gap := bAt.Sub(oldAt)
	require.GreaterOrEqual(t, gap, 1500*time.Millisecond, "an undeclared lease is judged by the claimant's own")
	require.Less(t, gap, time.Hour, "not by the hour the old owner was configured with but never declared")
}

// A checkpoint table made before LeaseMicros is refused when Run starts,
// with the statement that adds the column, and nothing is written; once
// it is added, Run reads the stream.
func TestCaptureRefusesATableWithoutLeaseMicros(t *testing.T) {
	for _, d := range []ddl.Dialect{ddl.GoogleSQL, ddl.PostgreSQL} {
		t.Run(d.String(), func(t *testing.T) {
			schema := captureSchema(t, d)
			require.Contains(t, strings.Join(schema, "\n"), "LeaseMicros")
			for i, s := range schema {
				schema[i] = strings.NewReplacer("LeaseMicros INT64,", "", `"LeaseMicros" bigint,`, "").Replace(s)
			}
			require.NotContains(t, strings.Join(schema, "\n"), "LeaseMicros", "the table as an earlier spanmutex made it")
			db := freshDatabaseIn(t, d, schema...)
			c := newClient(t, db)
			q, err := New(c)
			require.NoError(t, err)
			capt, err := q.NewCapture(c, ordersStream, testMapper)
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err = capt.Run(ctx)
			add := "ALTER TABLE CaptureCheckpoints ADD COLUMN LeaseMicros INT64"
			if d == ddl.PostgreSQL {
				add = `ALTER TABLE "CaptureCheckpoints" ADD COLUMN "LeaseMicros" bigint`
			}
			require.ErrorContains(t, err, "has no LeaseMicros column")
			require.ErrorContains(t, err, "add it with: "+add)
			require.Empty(t, checkpointRows(t, c, ddl.DefaultCaptureTable, ordersStream), "nothing written")

			applyDDL(t, db, add)
			runCtx, stop := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- capt.Run(runCtx) }()
			waitFor(t, 30*time.Second, "the upgraded table's root row", func() bool {
				return len(checkpointRows(t, c, ddl.DefaultCaptureTable, ordersStream)) > 0
			})
			stop()
			require.ErrorIs(t, <-done, context.Canceled)
		})
	}
}
