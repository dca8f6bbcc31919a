package sheets_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spanmutex/spanmutex"
	"github.com/spanmutex/spanmutex/examples/spreadsheets/sheets"
	"github.com/spanmutex/spanmutex/queue"
)

// TestBackendEndToEnd runs the front end and three workers, each with its
// own client, and sends creates and clicks through the HTTP API: every
// request completes, each sheet holds exactly its clicks, and the store saw
// no violation.
func TestBackendEndToEnd(t *testing.T) {
	q, db := freshQueue(t)
	store := newStore(t, sheets.WithWriteDuration(2*time.Millisecond))
	backend, err := sheets.NewBackend(store)
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	var queues []*queue.Queue
	var wg sync.WaitGroup
	for n := range 3 {
		c, err := emu.NewClient(ctx, db)
		require.NoError(t, err)
		t.Cleanup(c.Close)
		wq, err := queue.New(c, queue.WithLockOptions(spanmutex.WithLease(2*time.Second)))
		require.NoError(t, err)
		w, err := wq.NewWorker(backend.Handle, queue.WithWorkerID(fmt.Sprintf("w%d", n)), queue.WithPollInterval(20*time.Millisecond, 200*time.Millisecond))
		require.NoError(t, err)
		queues = append(queues, wq)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := w.Run(ctx); err != nil {
				t.Errorf("worker %s: %v", w.ID(), err)
			}
		}()
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	api, _ := serve(t, q, store, sheets.WithNotify(func() {
		for _, wq := range queues {
			wq.Notify()
		}
	}))

	const nSheets, clicksPerSheet = 4, 5
	for s := range nSheets {
		id := fmt.Sprintf("s%d", s)
		_, err := api.Create(ctx, id)
		require.NoError(t, err)
		for c := range clicksPerSheet {
			_, err := api.Update(ctx, id, json.RawMessage(fmt.Sprintf(`{"click":%d}`, c)))
			require.NoError(t, err)
		}
	}
	for s := range nSheets {
		id := fmt.Sprintf("s%d", s)
		var st sheets.SheetStatus
		waitFor(t, "sheet "+id+" to be done", func() bool {
			st, err = api.Status(ctx, id)
			return err == nil && st.Pending == 0
		})
		require.Equal(t, 1+clicksPerSheet, st.Complete, "sheet %s: %+v", id, st)
		require.NotNil(t, st.Stored)
		require.Equal(t, clicksPerSheet, st.Stored.Clicks)

		sheet, ok := store.Sheet(id)
		require.True(t, ok)
		var got []int
		for _, p := range sheet.Payloads {
			var c struct{ Click int }
			require.NoError(t, json.Unmarshal(p, &c))
			got = append(got, c.Click)
		}
		require.Equal(t, []int{0, 1, 2, 3, 4}, got, "clicks applied once each, in the order they were enqueued")
	}
	require.Empty(t, store.Violations())
	bs := backend.Stats()
	require.Equal(t, int64(nSheets), bs.Creates)
	require.Equal(t, int64(nSheets*clicksPerSheet), bs.Clicks)
	require.Zero(t, bs.Failed)
}
