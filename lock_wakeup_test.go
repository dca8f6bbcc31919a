package spanmutex

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/spanmutex/spanmutex/emulator"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lockReturn is what a Lock call run in a goroutine returned.
type lockReturn struct {
	lease *Lease
	err   error
}

// A wake-up from another Scope (two Scopes share no memory: they meet only
// in Spanner and by datagram, as processes do) makes the woken waiter
// confirm the hand-off with a read in a read-write transaction (its debug log says so). A forged
// datagram naming the waiter grants nothing: the waiter reads, finds the
// lock not its own, and waits on. Each dialect runs on an emulator of its
// own, so that the waiter's fallback poll (a second apart) is not what
// finds the hand-off.
func TestLockWakeUpConfirmedByARead(t *testing.T) {
	needEmulator(t)
	bin, err := emulator.FindBinary()
	require.NoError(t, err)
	for _, d := range dialects {
		t.Run(d.String(), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			own, err := emulator.Start(ctx, emulator.WithBinary(bin), emulator.WithDialect(d))
			require.NoError(t, err)
			t.Cleanup(func() { assert.NoError(t, own.Close()) })
			client, err := own.NewClient(ctx, own.Database())
			require.NoError(t, err)
			t.Cleanup(client.Close)
			testWakeUpConfirmed(ctx, t, client)
		})
	}
}

func testWakeUpConfirmed(ctx context.Context, t *testing.T, client *spanner.Client) {
	const name = "confirmed-wake"
	listening, err := ListenScope("127.0.0.1:0", "")
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, listening.Close()) })
	holder, err := NewLock(client, name, WithOwner("holder"), WithScope(NewScope()))
	require.NoError(t, err)
	var log lockedBuffer
	waiter, err := NewLock(client, name, WithOwner("waiter"), WithScope(listening),
		WithLogger(slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	require.NoError(t, err)
	held, err := holder.Lock(ctx)
	require.NoError(t, err)

	got := make(chan lockReturn, 1)
	go func() {
		l, err := waiter.Lock(ctx)
		got <- lockReturn{l, err}
	}()
	waitFor(t, time.Minute, "the waiter to queue and wait", func() bool {
		return len(queuedIDs(t, client, name)) == 1 && strings.Contains(log.String(), "lock: waiting")
	})
	id := queuedIDs(t, client, name)[0]

	conn, err := net.Dial("udp", listening.Addr())
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.Write(wakeDatagram(id, held.AcquiredAt()))
	require.NoError(t, err)
	// Once the datagram's read has begun, a wait logged afterwards comes
	// after it: the waiter reads one thing at a time.
	before := waiter.ops().reads
	waitFor(t, time.Minute, "the waiter's read", func() bool { return waiter.ops().reads >= before+1 })
	waits := strings.Count(log.String(), "lock: waiting")
	waitFor(t, time.Minute, "the waiter to wait again", func() bool { return strings.Count(log.String(), "lock: waiting") > waits })
	select {
	case r := <-got:
		t.Fatalf("a forged wake-up ended the waiter's Lock: lease %v, err %v", r.lease, r.err)
	default:
	}
	assert.NotContains(t, log.String(), "handed to us")

	require.NoError(t, holder.Unlock(ctx))
	r := <-got
	require.NoError(t, r.err)
	assert.Equal(t, held.Token()+1, r.lease.Token())
	assert.True(t, r.lease.HandedOff())
	assert.Contains(t, log.String(), "handed to us, by a wake-up confirmed by a read")
	assert.Equal(t, int64(1), holder.scope.wakeUps().sent)
	require.NoError(t, waiter.Unlock(ctx))
}

// Two waiters of one listening Scope queue behind a holder of another, each
// by its own arrival transaction, and wait (for a wake-up, or their fallback
// poll a second later). The first is woken, handed the lock, and unlocks,
// handing it to the second within their Scope, whose wake-up ends the
// arrival's wait: the second's Lock returns at once, not after a lease
// spent waiting for the Scope's holder, itself, to leave.
func TestLockHandOffWithinScopeAfterQueuedArrivals(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := newClient(t, freshDatabase(t))
	const name = "queued-arrivals"
	other, err := NewLock(client, name, WithOwner("other"), WithScope(NewScope()))
	require.NoError(t, err)
	scope, err := ListenScope("127.0.0.1:0", "")
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, scope.Close()) })
	first, err := NewLock(client, name, WithOwner("first"), WithScope(scope))
	require.NoError(t, err)
	second, err := NewLock(client, name, WithOwner("second"), WithScope(scope))
	require.NoError(t, err)
	held, err := other.Lock(ctx)
	require.NoError(t, err)

	firstGot, secondGot := make(chan lockReturn, 1), make(chan error, 1)
	go func() {
		l, err := first.Lock(ctx)
		firstGot <- lockReturn{l, err}
	}()
	waitFor(t, time.Minute, "the first waiter to queue", func() bool { return len(queuedIDs(t, client, name)) == 1 })
	go func() {
		// Well under the 30s lease such a wait would take.
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, err := second.Lock(sctx)
		secondGot <- err
	}()
	waitFor(t, time.Minute, "the second waiter to queue", func() bool { return len(queuedIDs(t, client, name)) == 2 })
	assert.Equal(t, int64(2), first.ops().rw+second.ops().rw,
		"each waiter queued by its own arrival transaction")

	require.NoError(t, other.Unlock(ctx))
	r := <-firstGot
	require.NoError(t, r.err)
	assert.Equal(t, held.Token()+1, r.lease.Token())
	require.NoError(t, first.Unlock(ctx))
	require.NoError(t, <-secondGot, "the second waiter was handed the lock within its Scope")
	require.NoError(t, second.Unlock(ctx))
}
