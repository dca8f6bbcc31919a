package queue

import (
	"context"
	"sort"
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
	ps, err := c.runnable(context.Background())
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
		_, claimed, err := a.claim(ctx, tok)
		require.NoError(t, err)
		require.True(t, claimed)
	}

	// P1 and P2 merge into M: each names M, with both parents.
	end := start.Add(time.Second)
	merge := &childPartitionsRecord{StartTimestamp: end, Children: []childPartition{{Token: "M", Parents: []string{"P2", "P1"}}}}
	_, err = a.commit(ctx, captureCheckpoint{token: "P1", resume: end, finish: merge})
	require.NoError(t, err)
	require.Equal(t, []string{"P2", "P3"}, runnableTokens(t, a), "M waits for P2")
	_, err = a.commit(ctx, captureCheckpoint{token: "P2", resume: end, finish: merge})
	require.NoError(t, err, "the second parent's record of M is not a second insert")
	require.Equal(t, []string{"M", "P3"}, runnableTokens(t, a))

	// P3 splits into S1 and S2, runnable at once.
	split := &childPartitionsRecord{StartTimestamp: end, Children: []childPartition{
		{Token: "S1", Parents: []string{"P3"}}, {Token: "S2", Parents: []string{"P3"}}}}
	_, err = a.commit(ctx, captureCheckpoint{token: "P3", resume: end, finish: split})
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
	_, err = a.commit(ctx, captureCheckpoint{token: "P1", resume: end.Add(time.Second)})
	require.ErrorIs(t, err, errPartitionLost, "a finished partition takes no more checkpoints")
}

func TestCaptureOwnerFencesCheckpointsUntilItsLeaseExpires(t *testing.T) {
	c, start := captureDatabase(t)
	q, err := New(c)
	require.NoError(t, err)
	ctx := context.Background()
	short := []CaptureOption{WithQueryWindow(100 * time.Millisecond), WithPartitionLease(1500 * time.Millisecond)}
	a := fastCapture(t, q, c, start, append(short, WithCaptureID("A"))...)
	b := fastCapture(t, q, c, start, append(short, WithCaptureID("B"))...)
	_, err = c.Apply(ctx, []*spanner.Mutation{a.newRow(rootToken, partitionFinished, nil, start), a.newRow("P", partitionCreated, nil, start)})
	require.NoError(t, err)

	_, claimed, err := a.claim(ctx, "P")
	require.NoError(t, err)
	require.True(t, claimed)
	require.Empty(t, runnableTokens(t, b), "B does not see A's partition as runnable")
	_, claimed, err = b.claim(ctx, "P")
	require.NoError(t, err)
	require.False(t, claimed, "nor can it claim it while A's lease lasts")
	req := Request{ID: "cs-from-b", Kind: KindCreate, Resource: "r"}
	_, err = b.commit(ctx, captureCheckpoint{token: "P", resume: start, records: 1, reqs: []Request{req}})
	require.ErrorIs(t, err, errPartitionLost)
	_, err = q.Get(ctx, req.ID)
	require.ErrorIs(t, err, ErrNotFound, "B's checkpoint transaction wrote nothing")

	// A stops writing checkpoints (paused, crashed): once its lease has
	// expired by Spanner's clock, B takes over and A is fenced off.
	waitFor(t, 30*time.Second, "B to take the partition over", func() bool {
		_, claimed, err := b.claim(ctx, "P")
		require.NoError(t, err)
		return claimed
	})
	added, err := b.commit(ctx, captureCheckpoint{token: "P", resume: start.Add(time.Second), records: 1, reqs: []Request{req}})
	require.NoError(t, err)
	require.Equal(t, 1, added)
	_, err = a.commit(ctx, captureCheckpoint{token: "P", resume: start.Add(2 * time.Second), records: 1,
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
