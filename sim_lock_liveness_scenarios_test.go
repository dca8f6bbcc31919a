//go:build go1.25

package spanmutex

// Liveness scenarios of the Lock: shapes in which a waiter once spun or
// waited forever. They run in lockScenarios, on the simulated Spanner and
// on the emulator.

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/spanmutex/spanmutex/internal/defaults"
)

// countingStore counts the calls a process makes to its lockStore that
// a waiting Lock call can repeat (calls: reads, acquisitions and renewals),
// and the reads among them (reads: of the row, glances, full reads).
type countingStore struct {
	lockStore
	calls, reads atomic.Int64
}

func (s *countingStore) read(ctx context.Context, name string) (row, error) {
	s.calls.Add(1)
	s.reads.Add(1)
	return s.lockStore.read(ctx, name)
}

func (s *countingStore) glance(ctx context.Context, name string) (row, error) {
	s.calls.Add(1)
	s.reads.Add(1)
	return s.lockStore.glance(ctx, name)
}

func (s *countingStore) readLock(ctx context.Context, name string, key queueKey) (lockView, error) {
	s.calls.Add(1)
	s.reads.Add(1)
	return s.lockStore.readLock(ctx, name, key)
}

func (s *countingStore) acquireLock(ctx context.Context, name string, key queueKey, p policy, c claim, join bool) (acquireResult, error) {
	s.calls.Add(1)
	return s.lockStore.acquireLock(ctx, name, key, p, c, join)
}

func (s *countingStore) renew(ctx context.Context, l *Lease) error {
	s.calls.Add(1)
	return s.lockStore.renew(ctx, l)
}

// stallingHandler is a log handler that blocks the goroutine logging the
// first record whose message contains match until release is closed: a
// delay between a waiter reading a wake-up and acting on it, as a paused
// or descheduled goroutine has. stalled closes when it blocks.
type stallingHandler struct {
	match            string
	once             sync.Once
	stalled, release chan struct{}
}

func newStallingHandler(match string) *stallingHandler {
	return &stallingHandler{match: match, stalled: make(chan struct{}), release: make(chan struct{})}
}

// unblock lets the stalled goroutine go on; it may be called more than
// once.
func (h *stallingHandler) unblock() {
	select {
	case <-h.release:
	default:
		close(h.release)
	}
}

// recv receives from ch, or fails t after a minute (of virtual time in
// the simulation): a scenario that goes wrong must not hang the suite.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(time.Minute):
		t.Fatalf("no %s within a minute", what)
		panic("unreachable")
	}
}

func (h *stallingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *stallingHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *stallingHandler) WithGroup(string) slog.Handler            { return h }
func (h *stallingHandler) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.match) {
		h.once.Do(func() {
			close(h.stalled)
			<-h.release
		})
	}
	return nil
}

// scenarioInScopeHandOffLostBeforeGrant: A hands the lock to B of its own
// Scope; B's goroutine is delayed before it acts on the wake-up, so long
// that C, queued behind B in another process, takes B's lease over and
// frees the lock. B, resumed, finds the hand-off lost and must wait again
// and take the free lock, with a handful of Spanner calls: it once went
// back to the lost hand-off every turn, spinning without an RPC pause until
// its ctx ended (issue 41, fault 1).
func scenarioInScopeHandOffLostBeforeGrant(t *testing.T, e lockEnv, name string) {
	ctx := context.Background()
	scope, st := e.newScope(), e.store(t)
	a := e.newLock(t, name, "a", scope, st)
	// Whichever way B learns of the hand-off (the wake-up of A's Unlock, or
	// a poll that read the row first, which a loaded machine allows), it
	// is delayed there.
	stall := newStallingHandler("handed to us")
	defer stall.unblock()
	bst := &countingStore{lockStore: st}
	b := e.newLock(t, name, "b", scope, bst)
	b.cfg.logger = slog.New(stall)
	c := e.process(t, name, "c")

	la, err := a.Lock(ctx)
	require.NoError(t, err)
	bctx, cancel := context.WithTimeout(ctx, 20*scenarioLease)
	defer cancel()
	type result struct {
		lease *Lease
		err   error
	}
	gotB := make(chan result, 1)
	go func() {
		lease, err := b.Lock(bctx)
		gotB <- result{lease, err}
	}()
	e.waitQueued(t, name, 1)
	gotC := lockAsync(t, c)
	e.waitQueued(t, name, 2)
	require.NoError(t, a.Unlock(ctx))
	recv(t, stall.stalled, "B's delay") // B learnt of the hand-off and is delayed before acting on it

	lc := recv(t, gotC, "C's lease")
	require.NotNil(t, lc)
	assert.True(t, lc.TookOver(), "C took B's unrenewed lease over")
	assert.Equal(t, la.Token()+2, lc.Token())
	require.NoError(t, c.Unlock(ctx))

	before := bst.calls.Load()
	stall.unblock()
	rb := recv(t, gotB, "B's Lock")
	require.NoError(t, rb.err, "B waits again and takes the free lock")
	assert.Equal(t, la.Token()+3, rb.lease.Token())
	calls := bst.calls.Load() - before
	t.Logf("B's Spanner calls from its resumption to its grant: %d", calls)
	assert.LessOrEqual(t, calls, int64(10), "B's Spanner calls from its resumption to its grant")
	require.NoError(t, b.Unlock(ctx))
}

// slowLockCommits is a lockStore whose acquisitions and renewals each take
// delay, as commits do on a slow link.
type slowLockCommits struct {
	lockStore
	delay    time.Duration
	acquired atomic.Int64
}

func (s *slowLockCommits) acquireLock(ctx context.Context, name string, key queueKey, p policy, c claim, join bool) (acquireResult, error) {
	time.Sleep(s.delay)
	res, err := s.lockStore.acquireLock(ctx, name, key, p, c, join)
	if res.lease != nil {
		s.acquired.Add(1)
	}
	return res, err
}

func (s *slowLockCommits) renew(ctx context.Context, l *Lease) error {
	time.Sleep(s.delay)
	return s.lockStore.renew(ctx, l)
}

// A Lock whose leases can never be made fresh before the grant (each
// commit takes longer than a renewal interval) gives each back and ends
// with ErrOutage after WithMaxFailures of them: each acquisition that
// succeeded used to reset the failure count, so it acquired and gave back
// until its ctx ended (issue 41, fault 7's form in the Lock).
func TestLockCountsFailedGrants(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := newSimEnv()
		st := &slowLockCommits{lockStore: e.store(t), delay: 400 * time.Millisecond}
		l := e.newLock(t, "slow", "a", e.newScope(), st)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := l.Lock(ctx)
		require.ErrorIs(t, err, ErrOutage)
		assert.NotErrorIs(t, err, ErrNotObtained, "ended by the failure limit, not by the ctx")
		assert.Equal(t, int64(defaults.MaxFailures), st.acquired.Load(), "one acquisition per counted failure")
		time.Sleep(3 * scenarioLease) // let detached calls end in the bubble
	})
}

// unreachableLeave is a lockStore whose every way of leaving the queue
// fails, as if its process were cut off from Spanner when its call ended.
type unreachableLeave struct{ lockStore }

var errCutOff = status.Error(codes.Unavailable, "cut off")

func (unreachableLeave) leave(context.Context, string, string) (handOff, error) {
	return handOff{}, errCutOff
}
func (unreachableLeave) dequeue(context.Context, string, queueKey) error { return errCutOff }
func (unreachableLeave) purgeWaiter(context.Context, string, string) error {
	return errCutOff
}

// processPause pauses every Spanner call of a process's Locks (those
// whose store is a pausedStore on it) for a while, as a paused process
// makes none: a GC pause, a SIGSTOP, a descheduled VM.
type processPause struct {
	mu     sync.Mutex
	resume chan struct{} // nil when running
}

// pause stops the process's calls for d, then lets them go on.
func (p *processPause) pause(d time.Duration) {
	p.mu.Lock()
	p.resume = make(chan struct{})
	p.mu.Unlock()
	time.Sleep(d)
	p.mu.Lock()
	close(p.resume)
	p.resume = nil
	p.mu.Unlock()
}

// wait blocks while the process is paused.
func (p *processPause) wait() {
	p.mu.Lock()
	ch := p.resume
	p.mu.Unlock()
	if ch != nil {
		<-ch
	}
}

// pausedStore is a lockStore of a process that p pauses.
type pausedStore struct {
	lockStore
	p *processPause
}

func (s pausedStore) read(ctx context.Context, name string) (row, error) {
	s.p.wait()
	return s.lockStore.read(ctx, name)
}

func (s pausedStore) glance(ctx context.Context, name string) (row, error) {
	s.p.wait()
	return s.lockStore.glance(ctx, name)
}

func (s pausedStore) readLock(ctx context.Context, name string, key queueKey) (lockView, error) {
	s.p.wait()
	return s.lockStore.readLock(ctx, name, key)
}

func (s pausedStore) renew(ctx context.Context, l *Lease) error {
	s.p.wait()
	return s.lockStore.renew(ctx, l)
}

func (s pausedStore) renewWaiter(ctx context.Context, name string, key queueKey, session string) error {
	s.p.wait()
	return s.lockStore.renewWaiter(ctx, name, key, session)
}

// pausedAfterLeave is a lockStore whose leaves commit and then find the
// process paused, for pause, before the answer is read.
type pausedAfterLeave struct {
	lockStore
	p     *processPause
	pause time.Duration
}

func (s pausedAfterLeave) leave(ctx context.Context, name, waiterID string) (handOff, error) {
	to, err := s.lockStore.leave(ctx, name, waiterID)
	s.p.pause(s.pause)
	return to, err
}

// An Unlock that hands the lock on for a waiter of its Scope whose call
// returned (an orphan) anchors the lease of the waiter it hands it to at
// the time it sent that hand-off, not at its answer: a process paused
// between the commit and the answer for longer than the lease has the
// lease taken over meanwhile, and the woken waiter must renew (and so find
// it lost) before its grant, not take the lease for fresh and hold the lock
// beside the new holder (issue 41, read fault 4; claims 8 and 11).
func TestOrphanHandOffAnchorsAtItsSend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := newSimEnv()
		ctx := context.Background()
		const name = "orphan"
		scope, st, paused := e.newScope(), e.store(t), &processPause{}
		a := e.newLock(t, name, "a", scope, pausedAfterLeave{lockStore: st, p: paused, pause: 3 * scenarioLease})
		o := e.newLock(t, name, "o", scope, unreachableLeave{st})
		w := e.newLock(t, name, "w", scope, pausedStore{lockStore: st, p: paused})
		c := e.process(t, name, "c")

		_, err := a.Lock(ctx)
		require.NoError(t, err)
		octx, cancel := context.WithCancel(ctx)
		gotO := make(chan error, 1)
		go func() { _, err := o.Lock(octx); gotO <- err }()
		e.waitQueued(t, name, 1)
		gotW := lockAsync(t, w)
		e.waitQueued(t, name, 2)
		gotC := lockAsync(t, c)
		e.waitQueued(t, name, 3)
		cancel()
		require.ErrorIs(t, <-gotO, ErrNotObtained) // its entry stays: an orphan
		require.NoError(t, a.Unlock(ctx))          // to o, then on for it to w; then paused

		lc := <-gotC
		require.NotNil(t, lc)
		assert.True(t, lc.TookOver(), "c took w's unrenewed lease over during the pause")
		synctest.Wait() // the pause is over, and w has acted on its wake-up
		var lw *Lease
		select {
		case lw = <-gotW:
			t.Errorf("w was granted token %d while c holds token %d", lw.Token(), lc.Token())
		default:
		}
		require.NoError(t, c.Unlock(ctx))
		if lw == nil {
			lw = <-gotW
			require.NotNil(t, lw)
			assert.Greater(t, lw.Token(), lc.Token(), "w waited again")
		}
		_ = w.Unlock(ctx) // fenced if w was granted the lease c took over
		settleBubble()
	})
}

// Observe, whose reader stops draining its channel for longer than the
// version retention while terms come and go, finds its reads of that gap
// refused as too old (as Spanner refuses them) and reports the current
// term once its reader is back, the skipped terms a gap in the tokens: it
// once asked for the same ever older interval forever (issue 41, fault 8).
func TestSimObserveAfterAGapLongerThanTheRetention(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := newSimEnv()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		const name = "elected"
		a, b := e.process(t, name, "a"), e.process(t, name, "b")
		cfg, err := configure(name, []LockOption{WithLease(scenarioLease)})
		require.NoError(t, err)
		el := &Election{name: name, cfg: cfg, rows: e.store(t).(*simConn), observeEvery: defaultObserveEvery}

		la, err := a.Lock(ctx)
		require.NoError(t, err)
		terms := el.Observe(ctx)
		first := <-terms
		assert.Equal(t, la.Token(), first.Token)
		// The reader looks away for two hours and a minute, while b leads,
		// then a and b take turns.
		require.NoError(t, a.Unlock(ctx))
		lb, err := b.Lock(ctx)
		require.NoError(t, err)
		time.Sleep(2*simVersionRetention + time.Minute)
		require.NoError(t, b.Unlock(ctx))
		for range 3 { // terms whose reports Observe must look for in the history
			l, err := a.Lock(ctx)
			require.NoError(t, err)
			require.NoError(t, a.Unlock(ctx))
			_, err = b.Lock(ctx)
			require.NoError(t, err)
			require.NoError(t, b.Unlock(ctx))
			assert.Greater(t, l.Token(), lb.Token())
		}
		la, err = a.Lock(ctx)
		require.NoError(t, err)
		time.Sleep(time.Second)

		var got []int64
		for len(got) == 0 || got[len(got)-1] != la.Token() {
			select {
			case info := <-terms:
				got = append(got, info.Token)
			case <-time.After(time.Minute):
				t.Fatalf("no report of the current term a minute after the reader came back; got %v", got)
			}
		}
		assert.Equal(t, lb.Token(), got[0], "the term whose report was waiting to be read")
		assert.Equal(t, la.Token(), got[len(got)-1])
		require.NoError(t, a.Unlock(ctx))
		cancel()
		settleBubble()
	})
}
