package lockbench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
	"google.golang.org/api/option"

	"github.com/spanmutex/spanmutex"
	"github.com/spanmutex/spanmutex/internal/bench"
	"github.com/spanmutex/spanmutex/internal/pace"
)

// idleSpec is what an idle child does, on top of its spec's Kind, backend
// and Name.
type idleSpec struct {
	Locks  int           // locks it holds, or Lock calls it makes that wait
	Lease  time.Duration // spanmutex's WithLease; etcd's session TTL (whole seconds, rounded up)
	Wait   bool          // a waiter: its Lock calls wait on locks another child holds
	Warmup time.Duration // from the last acquisition (or Lock call) to "ready"
	// Arrival, if not 0: also count from just before the Lock calls (or
	// acquisitions) start, for this long.
	Arrival time.Duration
}

// idleResult is an idle child's result: what its client sent in the
// window, by method.
type idleResult struct {
	Window time.Duration    // the window as this child measured it
	Calls  map[string]int64 // calls started: unary calls and streams opened
	Sent   map[string]int64 // messages sent: unary requests, and each on a stream
	// Broken counts what stopped being idle by the window's end: a
	// holder's leases lost, a waiter's Lock calls that returned.
	Broken   int
	FirstErr string
	// Arrival: what the client sent in the idleSpec's Arrival span.
	Arrival spanCount
	// Warnings counts the library's warnings, by message, from the start
	// to the window's end.
	Warnings map[string]int `json:",omitempty"`
}

// spanCount is what a client sent in a span, by method, and the span as
// the child measured it.
type spanCount struct {
	Span        time.Duration
	Calls, Sent map[string]int64
}

// idleSide is an idle child's locks, of one kind, on one client.
type idleSide struct {
	counter *msgCounter
	warns   *warnCounter                    // nil: the side logs nothing
	start   func(ctx context.Context) error // holder: acquire every lock; waiter: start the Lock calls
	broken  func() (int, string)
	close   func()
}

// tally counts failures safely from many goroutines, keeping the first.
type tally struct {
	mu    sync.Mutex
	n     int
	first string
}

// note counts err.
func (t *tally) note(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.n++
	if t.first == "" && err != nil {
		t.first = err.Error()
	}
}

// get returns the count and the first error.
func (t *tally) get() (int, string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n, t.first
}

// runIdleChild is an idle child: it holds sp.Idle.Locks locks (or makes as
// many Lock calls that wait), waits the warm-up, says "ready", and, told
// "go START END", counts what its client sends in the window, writes its
// idleResult to sp.Out and says "done". It keeps holding (or waiting) until
// its stdin closes; a child that only blocks others is never told "go".
func runIdleChild(sp spec, cmds <-chan string, say func(string)) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	side, err := newIdleSide(ctx, sp)
	if err != nil {
		return err
	}
	defer side.close()
	arrival := countSpan(ctx, side.counter, sp.Idle.Arrival)
	if err := side.start(ctx); err != nil {
		return err
	}
	if err := pace.Sleep(ctx, sp.Idle.Warmup); err != nil {
		return err
	}
	say("ready")
	line, ok := <-cmds
	if !ok {
		return nil // a blocker: the parent is done with it
	}
	start, end, err := parseGoLine(line)
	if err != nil {
		return err
	}
	res, err := measureIdle(ctx, side, start, end)
	if err != nil {
		return err
	}
	if res.Arrival, err = arrival(); err != nil {
		return err
	}
	if err := writeJSON(sp.Out, res); err != nil {
		return err
	}
	say("done")
	for range cmds { // hold until the parent closes stdin
	}
	return nil
}

// parseGoLine parses a "go START END" line.
func parseGoLine(line string) (start, end int64, err error) {
	one := make(chan string, 1)
	one <- line
	close(one)
	return awaitGo(one)
}

// measureIdle counts what side's client sends from start to end
// (CLOCK_MONOTONIC ns).
func measureIdle(ctx context.Context, side *idleSide, start, end int64) (idleResult, error) {
	if err := sleepUntil(ctx, start); err != nil {
		return idleResult{}, err
	}
	calls0, sent0 := side.counter.snapshot()
	t0 := mono()
	if err := sleepUntil(ctx, end); err != nil {
		return idleResult{}, err
	}
	calls1, sent1 := side.counter.snapshot()
	res := idleResult{Window: time.Duration(mono() - t0), Calls: bench.RPCsSince(calls1, calls0), Sent: bench.RPCsSince(sent1, sent0)}
	res.Broken, res.FirstErr = side.broken()
	if side.warns != nil {
		res.Warnings = side.warns.snapshot()
	}
	return res, nil
}

// countSpan counts what counter sees sent from now for span, in a
// goroutine of its own, and returns what waits for that count (a zero
// count at once if span is 0), or for ctx's error if ctx ends first.
func countSpan(ctx context.Context, counter *msgCounter, span time.Duration) func() (spanCount, error) {
	if span == 0 {
		return func() (spanCount, error) { return spanCount{}, nil }
	}
	type counted struct {
		c   spanCount
		err error
	}
	done := make(chan counted, 1)
	calls0, sent0 := counter.snapshot()
	t0 := mono()
	go func() {
		if err := sleepUntil(ctx, t0+int64(span)); err != nil {
			done <- counted{err: err}
			return
		}
		calls1, sent1 := counter.snapshot()
		done <- counted{c: spanCount{Span: time.Duration(mono() - t0), Calls: bench.RPCsSince(calls1, calls0), Sent: bench.RPCsSince(sent1, sent0)}}
	}()
	return func() (spanCount, error) {
		c := <-done
		return c.c, c.err
	}
}

// newIdleSide makes the locks of sp.Kind.
func newIdleSide(ctx context.Context, sp spec) (*idleSide, error) {
	switch sp.Kind {
	case Spanmutex, SpanmutexPoll, SpanmutexSessions, SpanmutexSessionsPoll:
		return spanmutexIdle(ctx, sp)
	case Etcd:
		return etcdIdle(ctx, sp)
	}
	return nil, fmt.Errorf("idle benchmark: unknown lock %q", sp.Kind)
}

// idleLockName names the i-th lock of a run.
func idleLockName(base string, i int) string { return fmt.Sprintf("%s-%04d", base, i) }

// spanmutexIdle makes sp.Idle.Locks spanmutex Locks of one Scope on one
// client: NewScope(), NewScope(WithoutWakeUps()) for spanmutex-poll,
// NewScope(WithSessions()) for spanmutex-sessions, and both options for
// spanmutex-sessions-poll.
func spanmutexIdle(ctx context.Context, sp spec) (*idleSide, error) {
	counter := newMsgCounter()
	var opts []option.ClientOption
	for _, o := range counter.dialOptions() {
		opts = append(opts, option.WithGRPCDialOption(o))
	}
	client, err := openSpanner(ctx, sp.Emulator, sp.Database, min(sp.Idle.Locks, 100), opts...)
	if err != nil {
		return nil, err
	}
	var scopeOpts []spanmutex.ScopeOption
	if sp.Kind == SpanmutexPoll || sp.Kind == SpanmutexSessionsPoll {
		scopeOpts = append(scopeOpts, spanmutex.WithoutWakeUps())
	}
	if sp.Kind == SpanmutexSessions || sp.Kind == SpanmutexSessionsPoll {
		scopeOpts = append(scopeOpts, spanmutex.WithSessions())
	}
	scope := spanmutex.NewScope(scopeOpts...)
	side := &idleSide{counter: counter, warns: newWarnCounter(), close: func() { scope.Close(); client.Close() }}
	locks := make([]*spanmutex.Lock, sp.Idle.Locks)
	for i := range locks {
		locks[i], err = spanmutex.NewLock(client, idleLockName(sp.Name, i), spanmutex.WithScope(scope),
			spanmutex.WithLease(sp.Idle.Lease), spanmutex.WithOwner(fmt.Sprintf("p%d-%d", sp.Proc, i)),
			spanmutex.WithLogger(slog.New(side.warns)))
		if err != nil {
			side.close()
			return nil, err
		}
	}
	if sp.Idle.Wait {
		side.start, side.broken = waitAll(len(locks), func(ctx context.Context, i int) error {
			_, err := locks[i].Lock(ctx)
			return err
		})
		return side, nil
	}
	var leases []*spanmutex.Lease
	side.start = func(ctx context.Context) error {
		for i, l := range locks {
			lease, err := l.Lock(ctx)
			if err != nil {
				return fmt.Errorf("hold lock %d of %d: %w", i+1, len(locks), err)
			}
			leases = append(leases, lease)
		}
		return nil
	}
	side.broken = func() (int, string) { return lostLeases(leases) }
	return side, nil
}

// lostLeases counts the leases that ended, with the first one's error.
func lostLeases(leases []*spanmutex.Lease) (int, string) {
	var t tally
	for _, l := range leases {
		select {
		case <-l.Done():
			t.note(l.Err())
		default:
		}
	}
	return t.get()
}

// waitAll returns a start that makes n Lock calls (lock(ctx, i)) in
// goroutines of their own, and a broken that counts those that returned
// while ctx was live: a waiter that stops waiting is no longer idle.
func waitAll(n int, lock func(ctx context.Context, i int) error) (start func(context.Context) error, broken func() (int, string)) {
	var t tally
	start = func(ctx context.Context) error {
		for i := range n {
			go func() {
				err := lock(ctx, i)
				if ctx.Err() == nil {
					t.note(cmpErr(err, errors.New("Lock returned holding the lock")))
				}
			}()
		}
		return nil
	}
	return start, t.get
}

// cmpErr returns err, or alt if err is nil.
func cmpErr(err, alt error) error {
	if err != nil {
		return err
	}
	return alt
}

// etcdTTL returns lease in whole seconds, rounded up: an etcd session's
// TTL.
func etcdTTL(lease time.Duration) int {
	return int(math.Ceil(lease.Seconds()))
}

// etcdIdle makes sp.Idle.Locks etcd Mutexes of one session on one client,
// each its own key prefix.
func etcdIdle(ctx context.Context, sp spec) (*idleSide, error) {
	counter := newMsgCounter()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{sp.Etcd}, DialTimeout: 10 * time.Second,
		Logger: zap.NewNop(), DialOptions: counter.dialOptions()})
	if err != nil {
		return nil, fmt.Errorf("etcd client of %s: %w", sp.Etcd, err)
	}
	session, err := concurrency.NewSession(cli, concurrency.WithTTL(etcdTTL(sp.Idle.Lease)))
	if err != nil {
		cli.Close()
		return nil, fmt.Errorf("etcd session: %w", err)
	}
	side := &idleSide{counter: counter, close: func() { _ = session.Close(); cli.Close() }}
	mutexes := make([]*concurrency.Mutex, sp.Idle.Locks)
	for i := range mutexes {
		mutexes[i] = concurrency.NewMutex(session, "/"+idleLockName(sp.Name, i))
	}
	if sp.Idle.Wait {
		side.start, side.broken = waitAll(len(mutexes), func(ctx context.Context, i int) error { return mutexes[i].Lock(ctx) })
		return side, nil
	}
	side.start = func(ctx context.Context) error {
		for i, m := range mutexes {
			if err := m.Lock(ctx); err != nil {
				return fmt.Errorf("hold etcd mutex %d of %d: %w", i+1, len(mutexes), err)
			}
		}
		return nil
	}
	side.broken = func() (int, string) {
		select {
		case <-session.Done():
			return len(mutexes), "the etcd session's lease expired"
		default:
			return 0, ""
		}
	}
	return side, nil
}
