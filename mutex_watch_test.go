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

// Waiting Runs are woken when a holder interrupts its section (the row is
// NEEDED again), and a waiter woken once is woken again on its next wait:
// a holder interrupts while two others wait; the one that then takes the
// section interrupts too, while the other waits again. Each waiter's
// backoff is 10 s, so all three sections start within seconds only if
// every wait ends by a wake-up (issue 41: an interrupt woke nobody, and a
// waiter's registration served one wake-up).
func TestRunWaitersWokenByInterrupts(t *testing.T) { eachDialect(t, testRunWaitersWokenByInterrupts) }

func testRunWaitersWokenByInterrupts(t *testing.T, db string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	holder, err := New(newClient(t, db), "interrupted", WithOwner("holder"))
	require.NoError(t, err)
	inside, stop := make(chan struct{}), make(chan struct{})
	holderDone := make(chan error, 1)
	go func() {
		_, err := holder.Run(ctx, func(context.Context, *Lease) error {
			close(inside)
			<-stop
			return Interrupt("holder: not now", nil)
		})
		holderDone <- err
	}()
	<-inside

	slow := func() backoff.BackOff { return backoff.NewConstantBackOff(10 * time.Second) }
	var scopes []*Scope
	ran := make(chan string, 2)
	done := make(chan error, 2)
	for _, who := range []string{"w1", "w2"} {
		scope, err := ListenScope("127.0.0.1:0", "")
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, scope.Close()) })
		scopes = append(scopes, scope)
		m, err := New(newClient(t, db), "interrupted", WithOwner(who), WithScope(scope), WithBackOff(slow))
		require.NoError(t, err)
		go func() {
			_, err := m.Run(ctx, func(context.Context, *Lease) error {
				ran <- who
				<-time.After(300 * time.Millisecond) // its work, while the other waits again
				return Interrupt(who+": not now either", nil)
			})
			done <- err
		}()
	}
	c := newClient(t, db)
	waitFor(t, 30*time.Second, "both waiters to register", func() bool { return len(queued(t, c, "interrupted")) == 2 })
	interrupted := time.Now()
	close(stop)
	require.ErrorIs(t, <-holderDone, ErrInterrupted)
	for range 2 {
		select {
		case <-ran:
		case <-time.After(8 * time.Second):
			t.Errorf("a waiter's section did not start within 8 s of an interrupt (its backoff: 10 s)")
			cancel() // and let both Runs return before the test ends
		}
	}
	took := time.Since(interrupted)
	for range 2 {
		if err := <-done; ctx.Err() == nil {
			require.ErrorIs(t, err, ErrInterrupted)
		}
	}
	woken := scopes[0].wakeUps().received + scopes[1].wakeUps().received
	t.Logf("both waiters' sections ran %v after the first interrupt; wake-ups received: %d", took, woken)
	assert.Less(t, took, 5*time.Second, "woken, not polled")
	assert.Equal(t, int64(3), woken, "two by the holder's interrupt, one by the first waiter's")
}
