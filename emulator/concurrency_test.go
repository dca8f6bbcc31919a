package emulator

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestConcurrentTransactionsOnOneClient is the emulator's own behaviour,
// with no spanmutex code: 32 goroutines each commit 20 read-modify-write
// increments of one row through one client. The Go client retries the
// aborts the emulator answers with (it runs one read-write transaction at a
// time), so every increment commits, and the count is exact.
//
// This holds with the client go.mod requires. With v1.88 and later (one
// multiplexed session for every read-write transaction) this emulator
// build fails most of them with "Transaction not found" or "Invalid
// transaction ID", which the client does not retry: that is why the
// newest-client CI step (.ci/newest-client) leaves out the tests that
// overlap read-write transactions on one client (doc/development.md).
func TestConcurrentTransactionsOnOneClient(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: starts the emulator (skipped with -short)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	t.Setenv(HostEnv, "")
	e, err := Start(ctx, WithDDL("CREATE TABLE Counter (K STRING(10) NOT NULL, N INT64 NOT NULL) PRIMARY KEY (K)"))
	require.NoError(t, err, "the Cloud Spanner emulator is needed: %s", InstallHint)
	defer func() { assert.NoError(t, e.Close()) }()
	c := e.Client()
	_, err = c.Apply(ctx, []*spanner.Mutation{spanner.Insert("Counter", []string{"K", "N"}, []any{"k", int64(0)})})
	require.NoError(t, err)

	const goroutines, each = 32, 20
	var (
		wg       sync.WaitGroup
		commits  atomic.Int64
		mu       sync.Mutex
		failures = map[string]int{}
	)
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				if err := increment(ctx, c); err != nil {
					mu.Lock()
					failures[fmt.Sprintf("%v: %.21s", spanner.ErrCode(err), spanner.ErrDesc(err))]++
					mu.Unlock()
					continue
				}
				commits.Add(1)
			}
		}()
	}
	wg.Wait()
	row, err := c.Single().ReadRow(ctx, "Counter", spanner.Key{"k"}, []string{"N"})
	require.NoError(t, err)
	var n int64
	require.NoError(t, row.Columns(&n))
	t.Logf("%d of %d committed; the row counts %d; failures: %v", commits.Load(), goroutines*each, n, failures)
	assert.Empty(t, failures, "transactions the client did not retry")
	assert.Equal(t, int64(goroutines*each), n)
}

// increment adds one to the counter in one read-write transaction.
func increment(ctx context.Context, c *spanner.Client) error {
	_, err := c.ReadWriteTransaction(ctx, func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
		row, err := tx.ReadRow(ctx, "Counter", spanner.Key{"k"}, []string{"N"})
		if err != nil {
			return err
		}
		var n int64
		if err := row.Columns(&n); err != nil {
			return err
		}
		return tx.BufferWrite([]*spanner.Mutation{spanner.Update("Counter", []string{"K", "N"}, []any{"k", n + 1})})
	})
	return err
}
