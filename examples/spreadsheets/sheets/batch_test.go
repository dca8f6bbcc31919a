package sheets_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spanmutex/spanmutex/examples/spreadsheets/sheets"
)

// TestServerBatchesConcurrentRequests sends many requests at once, so that
// they are enqueued in shared transactions, with one sheet created by many
// callers at once: each caller gets its own answer, as without batching,
// the batches with a refused create being split.
func TestServerBatchesConcurrentRequests(t *testing.T) {
	q, _ := freshQueue(t)
	srv, err := sheets.NewServer(q, newStore(t))
	require.NoError(t, err)
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	api, err := sheets.NewClient(ts.URL, ts.Client())
	require.NoError(t, err)
	ctx := context.Background()
	_, err = api.Create(ctx, "clicked")
	require.NoError(t, err)

	const n = 40
	var (
		wg                sync.WaitGroup
		mu                sync.Mutex
		ids               = map[string]bool{}
		contested, others int
		conflicts         int
	)
	for i := range n {
		wg.Add(3)
		go func() { // everyone creates "contested"
			defer wg.Done()
			_, err := api.Create(ctx, "contested")
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				contested++
			case sheets.IsStatus(err, http.StatusConflict):
				conflicts++
			default:
				t.Errorf("create of contested: %v", err)
			}
		}()
		go func() { // a sheet of one's own
			defer wg.Done()
			a, err := api.Create(ctx, fmt.Sprintf("own-%d", i))
			if err != nil {
				t.Errorf("create own-%d: %v", i, err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			ids[a.Request] = true
			others++
		}()
		go func() { // a click on an existing sheet
			defer wg.Done()
			a, err := api.Update(ctx, "clicked", json.RawMessage(fmt.Sprint(i)))
			if err != nil {
				t.Errorf("click %d: %v", i, err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			ids[a.Request] = true
		}()
	}
	wg.Wait()
	require.Equal(t, 1, contested, "exactly one create of the contested sheet is accepted")
	require.Equal(t, n-1, conflicts)
	require.Equal(t, n, others)
	require.Len(t, ids, 2*n, "every accepted request has an id of its own")

	st, err := api.Status(ctx, "clicked")
	require.NoError(t, err)
	require.Len(t, st.Requests, n+1)
	st, err = api.Status(ctx, "contested")
	require.NoError(t, err)
	require.Len(t, st.Requests, 1)
	for id := range ids {
		_, err := q.Get(ctx, id)
		require.NoError(t, err, "accepted request %s is in the queue", id)
	}
	stats := srv.Stats()
	require.Equal(t, int64(3*n+1), stats.Requests)
	require.Positive(t, stats.Batched, "some requests shared a transaction: %+v", stats)
	require.Positive(t, stats.SplitBatches, "a batch with a second create of the contested sheet was split: %+v", stats)
	t.Logf("%+v", stats)
}

// TestServerRejectsBadBatchSize checks WithMaxBatch's bounds.
func TestServerRejectsBadBatchSize(t *testing.T) {
	q, _ := freshQueue(t)
	for _, n := range []int{0, -1, 1001} {
		_, err := sheets.NewServer(q, nil, sheets.WithMaxBatch(n))
		require.ErrorIs(t, err, sheets.ErrInvalidConfig, "WithMaxBatch(%d)", n)
	}
	_, err := sheets.NewServer(q, nil, sheets.WithMaxBatch(1))
	require.NoError(t, err)
}
