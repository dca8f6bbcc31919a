package lockbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/internal/bench"
)

// The idle benchmark (issue 44) measures, from the wire, what holding
// locks and waiting on them costs while nothing happens: one child process
// holds N locks (or makes W Lock calls that wait on locks another child
// process holds) and stays idle; it counts what its client sends in a
// window that opens a warm-up after the last acquisition (or Lock call).
// spanmutex counts RPCs (calls started); etcd, messages sent (unary
// requests, and each message on its LeaseKeepAlive and Watch streams).

// Defaults of IdleConfig.
const (
	DefaultIdleWindow = 20 * time.Second
	DefaultIdleLease  = 6 * time.Second
	DefaultIdleWarmup = 5 * time.Second
	// DefaultIdleArrival is the span, from just before the Lock calls
	// start, over which a waiter run also counts: issue 44's hold of 10 s,
	// over which a waiting call without wake-ups costs at most 5 reads a
	// second, its join and fastest polls included.
	DefaultIdleArrival = 10 * time.Second
	// MaxIdleLocks bounds N and W.
	MaxIdleLocks = 10000
)

// DefaultIdleHolders returns the numbers of locks one process holds, a run
// each.
func DefaultIdleHolders() []int { return []int{1, 10, 100, 1000} }

// DefaultIdleWaiters returns the numbers of waiting Lock calls, a run each.
func DefaultIdleWaiters() []int { return []int{1, 10, 100} }

// IdleConfig says what RunIdle measures. Zero fields take their defaults.
type IdleConfig struct {
	Holders []int         // N: the locks one process holds, a run each
	Waiters []int         // W: the Lock calls one process makes that wait, a run each
	Window  time.Duration // how long the process is measured, idle
	Lease   time.Duration // spanmutex's WithLease; etcd's TTL, rounded up to whole seconds
	Warmup  time.Duration // from the last acquisition (or Lock call) to the window
	// Arrival is a waiter run's other span: from just before its Lock
	// calls start, counted whatever the warm-up and window.
	Arrival time.Duration
	// PlainHolder makes the process that holds the locks spanmutex's
	// waiters wait on a NewScope() without sessions whatever the waiters'
	// Scope (by default it has their WithSessions), to tell what a
	// waiter's own session costs from what its holder's does.
	PlainHolder bool
	// SkipEtcd measures spanmutex alone.
	SkipEtcd bool
	Dialect  ddl.Dialect
	Progress io.Writer
}

// withDefaults fills in c's zero fields and checks it.
func (c IdleConfig) withDefaults() (IdleConfig, error) {
	if len(c.Holders) == 0 {
		c.Holders = DefaultIdleHolders()
	}
	if len(c.Waiters) == 0 {
		c.Waiters = DefaultIdleWaiters()
	}
	if c.Window == 0 {
		c.Window = DefaultIdleWindow
	}
	if c.Lease == 0 {
		c.Lease = DefaultIdleLease
	}
	if c.Warmup == 0 {
		c.Warmup = DefaultIdleWarmup
	}
	if c.Arrival == 0 {
		c.Arrival = DefaultIdleArrival
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	if c.Window < 0 || c.Warmup < 0 || c.Arrival < 0 || c.Lease < time.Second {
		return c, errors.New("lockbench: the idle window, warm-up and arrival span must be positive and the lease at least 1s")
	}
	for _, n := range append(append([]int(nil), c.Holders...), c.Waiters...) {
		if n < 1 || n > MaxIdleLocks {
			return c, fmt.Errorf("lockbench: %d idle locks; want 1 to %d", n, MaxIdleLocks)
		}
	}
	return c, nil
}

// kinds returns the locks of the holder runs and of the waiter runs.
// Waiters run with and without wake-ups, each with and without sessions:
// through a session, a waiting entry needs no renewals of its own.
func (c IdleConfig) kinds() (holders, waiters []Kind) {
	holders = []Kind{Spanmutex, SpanmutexSessions}
	waiters = []Kind{Spanmutex, SpanmutexPoll, SpanmutexSessions, SpanmutexSessionsPoll}
	if !c.SkipEtcd {
		holders, waiters = append(holders, Etcd), append(waiters, Etcd)
	}
	return holders, waiters
}

// ParseCounts parses a comma-separated list of positive counts, as "1,10,100".
func ParseCounts(v string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > MaxIdleLocks {
			return nil, fmt.Errorf("count %q: want numbers from 1 to %d separated by commas", f, MaxIdleLocks)
		}
		out = append(out, n)
	}
	return out, nil
}

// IdleRun is one run: one process holding (or waiting on) Count locks of
// Kind, idle for Window.
type IdleRun struct {
	Kind    Kind
	Waiting bool // W Lock calls waiting, not N locks held
	Count   int
	Window  time.Duration    // as the measured process timed it
	Calls   map[string]int64 // calls started in the window, by method
	Sent    map[string]int64 // messages sent in the window, by method
	// Broken: leases lost by the window's end (holders), Lock calls that
	// returned (waiters); FirstErr the first one's error.
	Broken   int
	FirstErr string
	// Warnings counts the measured process's library warnings, by message.
	Warnings map[string]int
	// Arrival (waiters): what was sent from just before the Lock calls
	// started, for the IdleConfig's Arrival (Span: as the measured process
	// timed it); zero if not measured.
	Arrival spanCount
}

// Counted returns what the tables compare, by method: RPCs started for
// spanmutex, messages sent for etcd (its keepalives are messages on one
// stream).
func (r IdleRun) Counted() map[string]int64 {
	if r.Kind == Etcd {
		return r.Sent
	}
	return r.Calls
}

// ArrivalCounted is Counted, over the arrival span (nil if not measured).
func (r IdleRun) ArrivalCounted() map[string]int64 {
	if r.Kind == Etcd {
		return r.Arrival.Sent
	}
	return r.Arrival.Calls
}

// PerSecond returns Counted's total per second of the window.
func (r IdleRun) PerSecond() float64 {
	return float64(bench.TotalRPCs(r.Counted())) / r.Window.Seconds()
}

// PerLock returns PerSecond per lock held or Lock call waiting.
func (r IdleRun) PerLock() float64 { return r.PerSecond() / float64(r.Count) }

// IdleReport is everything one RunIdle measured.
type IdleReport struct {
	Dialect               ddl.Dialect
	Lease, Window, Warmup time.Duration
	Arrival               time.Duration
	PlainHolder           bool // IdleConfig's
	Runs                  []IdleRun
	EtcdVersion, Emulator string
}

// RunIdle runs the idle benchmark: for each N, one process holding N
// locks; for each W, one process making W Lock calls that wait on locks
// another process holds; each lock on a fresh backend. It returns what it
// measured so far with any error.
func RunIdle(ctx context.Context, cfg IdleConfig) (IdleReport, error) {
	cfg, err := cfg.withDefaults()
	rep := IdleReport{Dialect: cfg.Dialect, Lease: cfg.Lease, Window: cfg.Window, Warmup: cfg.Warmup, Arrival: cfg.Arrival, PlainHolder: cfg.PlainHolder}
	if err != nil {
		return rep, err
	}
	holderKinds, waiterKinds := cfg.kinds()
	b, err := findBackends(Config{Kinds: holderKinds, Dialect: cfg.Dialect})
	if err != nil {
		return rep, err
	}
	rep.Emulator, rep.EtcdVersion = b.versions()
	for _, n := range cfg.Holders {
		for _, k := range holderKinds {
			if err := idleStep(ctx, b, cfg, &rep, k, n, false); err != nil {
				return rep, err
			}
		}
	}
	for _, w := range cfg.Waiters {
		for _, k := range waiterKinds {
			if err := idleStep(ctx, b, cfg, &rep, k, w, true); err != nil {
				return rep, err
			}
		}
	}
	return rep, nil
}

// idleStep runs one idle run, with progress, and adds it to rep.
func idleStep(ctx context.Context, b backends, cfg IdleConfig, rep *IdleReport, kind Kind, n int, wait bool) error {
	what := fmt.Sprintf("idle %s: 1 process holding %d lock(s)", kind, n)
	if wait {
		what = fmt.Sprintf("idle %s: 1 process with %d Lock call(s) waiting on locks another process holds", kind, n)
	}
	fmt.Fprintf(cfg.Progress, "%s, lease %v, window %v ...\n", what, cfg.Lease, cfg.Window)
	r, err := runIdle(ctx, b, cfg, kind, n, wait)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	fmt.Fprintf(cfg.Progress, "%s: %.2f/s (%.3f per lock), %d broken\n", what, r.PerSecond(), r.PerLock(), r.Broken)
	rep.Runs = append(rep.Runs, r)
	return nil
}

// idleSetupLimit bounds how long an idle child may take to say "ready":
// acquiring a thousand locks on a loaded emulator takes a while.
const idleSetupLimit = 10 * time.Minute

// runIdle runs one idle run on a fresh backend: a child holding n locks of
// kind, or, with wait, a child holding n locks and one making n Lock calls
// on them; it measures the last.
func runIdle(ctx context.Context, b backends, cfg IdleConfig, kind Kind, n int, wait bool) (IdleRun, error) {
	run := IdleRun{Kind: kind, Waiting: wait, Count: n}
	dir, err := os.MkdirTemp("", "lockbench-idle-")
	if err != nil {
		return run, err
	}
	defer os.RemoveAll(dir)
	base := spec{Role: roleIdle, Kind: kind, Name: "lockbench-idle", Dir: dir, Idle: idleSpec{Locks: n, Lease: cfg.Lease}}
	stop, err := freshBackend(ctx, b, kind, &base)
	if err != nil {
		return run, err
	}
	defer stop()
	var cs []*child
	defer func() {
		for _, c := range cs {
			c.finish(5 * time.Second)
		}
	}()
	if wait {
		blocker := base
		blocker.Proc = 1
		blocker.Kind = holdingKind(kind)
		if cfg.PlainHolder && kind != Etcd {
			blocker.Kind = Spanmutex
		}
		c, err := startIdleChild(ctx, blocker)
		if err != nil {
			return run, fmt.Errorf("the holding process: %w", err)
		}
		cs = append(cs, c)
	}
	measured := base
	measured.Idle.Wait, measured.Idle.Warmup = wait, cfg.Warmup
	if wait {
		measured.Idle.Arrival = cfg.Arrival
	}
	measured.Out = filepath.Join(dir, "result.json")
	c, err := startIdleChild(ctx, measured)
	if err != nil {
		return run, err
	}
	cs = append(cs, c)
	return measureRun(ctx, c, measured.Out, cfg.Window, measured.Idle.Arrival, run)
}

// measureRun tells the measured child c the window, waits for its result
// in out (for the window, or past it for up to extra, its arrival span)
// and adds it to run.
func measureRun(ctx context.Context, c *child, out string, window, extra time.Duration, run IdleRun) (IdleRun, error) {
	if _, _, err := goAll([]*child{c}, window); err != nil {
		return run, err
	}
	if _, err := c.expect(ctx, "done", startLead+window+extra+time.Minute); err != nil {
		return run, err
	}
	var res idleResult
	if err := readJSON(out, &res); err != nil {
		return run, err
	}
	run.Window, run.Calls, run.Sent, run.Broken, run.FirstErr = res.Window, res.Calls, res.Sent, res.Broken, res.FirstErr
	run.Arrival, run.Warnings = res.Arrival, res.Warnings
	return run, nil
}

// holdingKind returns the kind of the process that holds the locks a
// waiter run of kind waits on: kind itself, less WithoutWakeUps (holding
// does not listen for wake-ups).
func holdingKind(kind Kind) Kind {
	switch kind {
	case SpanmutexPoll:
		return Spanmutex
	case SpanmutexSessionsPoll:
		return SpanmutexSessions
	}
	return kind
}

// startIdleChild starts an idle child of sp and waits until it is ready.
func startIdleChild(ctx context.Context, sp spec) (*child, error) {
	c, err := spawn(sp)
	if err != nil {
		return nil, err
	}
	if _, err := c.expect(ctx, "ready", idleSetupLimit); err != nil {
		c.kill()
		return nil, err
	}
	return c, nil
}
