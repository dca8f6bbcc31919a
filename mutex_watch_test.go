package spanmutex

import (
	"context"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A Run waiting for another holder, whose Mutex has a listening Scope, is
// woken when the holder records DONE: it returns AlreadyDone long before its
// next backoff (10 s here) would have read the row, and leaves no entry.
func TestRunWaiterWokenWhenDone(t *testing.T) { eachDialect(t, testRunWaiterWokenWhenDone) }

func testRunWaiterWokenWhenDone(t *testing.T, db string) {
	holderClient, waiterClient := newClient(t, db), newClient(t, db)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	holder, err := New(holderClient, "woken", WithOwner("holder"))
	require.NoError(t, err)
	inside, finish := make(chan struct{}), make(chan struct{})
	holderDone := make(chan error, 1)
	go func() {
		_, err := holder.Run(ctx, func(context.Context, *Lease) error {
			close(inside)
			<-finish
			return nil
		})
		holderDone <- err
	}()
	<-inside

	scope, err := ListenScope("127.0.0.1:0", "")
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, scope.Close()) })
	slow := func() backoff.BackOff { return backoff.NewConstantBackOff(10 * time.Second) }
	waiter, err := New(waiterClient, "woken", WithOwner("waiter"), WithScope(scope), WithBackOff(slow))
	require.NoError(t, err)
	type result struct {
		out  Outcome
		err  error
		took time.Duration
	}
	got := make(chan result, 1)
	go func() {
		began := time.Now()
		out, err := waiter.Run(ctx, func(context.Context, *Lease) error { t.Error("ran twice"); return nil })
		got <- result{out, err, time.Since(began)}
	}()
	waitFor(t, 30*time.Second, "the waiter to register", func() bool { return len(queued(t, waiterClient, "woken")) == 1 })
	finished := time.Now()
	close(finish)
	require.NoError(t, <-holderDone)
	r := <-got
	require.NoError(t, r.err)
	assert.Equal(t, AlreadyDone, r.out)
	after := time.Since(finished)
	t.Logf("the waiter returned %v after the holder's section ended (its backoff: 10 s); wake-ups received %d", after, scope.wakeUps().received)
	assert.Equal(t, int64(1), scope.wakeUps().received)
	assert.Less(t, after, 5*time.Second, "woken, not polled")
	assert.Empty(t, queued(t, waiterClient, "woken"), "the finish took the watcher's entry")
}
