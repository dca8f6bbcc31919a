// Command lockbench runs the benchmark of issue 10: spanmutex's Lock,
// etcd's concurrency.Mutex and a naive Spanner lock, with contenders in
// separate OS processes, side by side; then queue workers as separate
// processes. It starts the Cloud Spanner emulator and etcd itself.
//
//	cd benchmarks && go run ./cmd/lockbench --shapes 2x1 --duration 3s
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spanmutex/spanmutex/benchmarks/lockbench"
	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/internal/bench"
)

func main() {
	lockbench.MaybeChild() // a contender process does its part and exits here
	os.Exit(run())
}

func run() int {
	var cfg lockbench.Config
	shapes := flag.String("shapes", lockbench.DefaultShapes, "comma-separated `PxG` shapes: P processes × G goroutines each")
	locks := flag.String("locks", "spanmutex,spanmutex-poll,etcd,naive", "comma-separated locks to measure (spanmutex listens for wake-ups; spanmutex-poll does not)")
	workers := flag.String("queue-workers", "1,4,16", "comma-separated numbers of queue worker processes")
	flag.DurationVar(&cfg.Hold, "hold", lockbench.DefaultHold, "critical section length")
	flag.DurationVar(&cfg.Duration, "duration", lockbench.DefaultDuration, "window of each run")
	flag.DurationVar(&cfg.Drain, "drain", lockbench.DefaultDrain, "after the window, how long waiting Lock calls may still return")
	flag.DurationVar(&cfg.Uncontended, "uncontended", lockbench.DefaultUncontended, "window of the uncontended lock+unlock runs (negative: skip)")
	flag.IntVar(&cfg.QueueRequests, "queue-requests", lockbench.DefaultQueueRequests, "requests each queue run drains (negative: skip the queue part)")
	flag.IntVar(&cfg.RunOnceProcs, "run-once", lockbench.DefaultRunOnceProcs, "processes that race to run one section once (negative: skip the run-once part)")
	dialect := flag.String("dialect", "googlesql", "SQL dialect of the emulator's databases: googlesql or postgresql")
	var idle lockbench.IdleConfig
	idleOnly := flag.Bool("idle", false, "run only the idle-cost benchmark: one process holding N locks, then W Lock calls waiting, idle (flags --idle-*)")
	idleHolders := flag.String("idle-holders", "1,10,100,1000", "with --idle: comma-separated numbers of locks one process holds")
	idleWaiters := flag.String("idle-waiters", "1,10,100", "with --idle: comma-separated numbers of Lock calls one process makes that wait")
	flag.DurationVar(&idle.Window, "idle-window", lockbench.DefaultIdleWindow, "with --idle: how long each process is measured, idle")
	flag.DurationVar(&idle.Lease, "idle-lease", lockbench.DefaultIdleLease, "with --idle: spanmutex's lease and etcd's session TTL (whole seconds, rounded up)")
	flag.DurationVar(&idle.Warmup, "idle-warmup", lockbench.DefaultIdleWarmup, "with --idle: from the last acquisition (or Lock call) to the window")
	flag.BoolVar(&idle.PlainHolder, "idle-plain-holder", false, "with --idle: the locks spanmutex's waiters wait on are held by a Scope without sessions, whatever the waiters' (default: with WithSessions if theirs has it)")
	flag.DurationVar(&idle.Arrival, "idle-arrival", lockbench.DefaultIdleArrival, "with --idle: a waiter run also counts this long from just before its Lock calls start")
	latency := flag.String("rpc-latency", "", "make each Spanner RPC take at least as long as on production: `production` (doc/benchmarks.md's figures) or METHOD=DURATION pairs, e.g. Commit=8ms,Read=2ms")
	flag.Parse()

	var err error
	if cfg.Shapes, err = lockbench.ParseShapes(*shapes); err != nil {
		return usage(err)
	}
	if cfg.Dialect, err = ddl.ParseDialect(*dialect); err != nil {
		return usage(fmt.Errorf("--dialect: %w", err))
	}
	if cfg.RPCLatency, err = bench.ParseLatency(*latency); err != nil {
		return usage(fmt.Errorf("--rpc-latency: %w", err))
	}
	if *idleOnly {
		if idle.Holders, err = lockbench.ParseCounts(*idleHolders); err != nil {
			return usage(fmt.Errorf("--idle-holders: %w", err))
		}
		if idle.Waiters, err = lockbench.ParseCounts(*idleWaiters); err != nil {
			return usage(fmt.Errorf("--idle-waiters: %w", err))
		}
		idle.Dialect, idle.SkipEtcd = cfg.Dialect, !strings.Contains(*locks, "etcd")
		return runIdle(idle)
	}
	for _, k := range strings.Split(*locks, ",") {
		cfg.Kinds = append(cfg.Kinds, lockbench.Kind(strings.TrimSpace(k)))
	}
	for _, w := range strings.Split(*workers, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(w))
		if err != nil {
			return usage(fmt.Errorf("--queue-workers %q: want numbers separated by commas", *workers))
		}
		cfg.QueueWorkers = append(cfg.QueueWorkers, n)
	}
	if err := lockbench.Check(cfg); err != nil {
		fmt.Fprintln(os.Stderr, err) // one line, saying what to install
		return 1
	}
	cfg.Progress = os.Stderr

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	host, _ := os.Hostname()
	fmt.Printf("Machine: %s, %d CPUs, %s/%s; load average at start: %s; Spanner dialect: %s; modelled RPC latency: %s\n", host, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, loadAvg(), cfg.Dialect, bench.FormatLatency(cfg.RPCLatency))
	began := time.Now()
	rep, err := lockbench.Run(ctx, cfg)
	return report(began, rep.EtcdVersion, rep.Emulator, func(w io.Writer) error { return lockbench.Format(w, rep) }, err)
}

// runIdle runs the idle-cost benchmark alone and prints its tables.
func runIdle(cfg lockbench.IdleConfig) int {
	cfg.Progress = os.Stderr
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	host, _ := os.Hostname()
	fmt.Printf("Machine: %s, %d CPUs, %s/%s; load average at start: %s; %s\n", host, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, loadAvg(), time.Now().UTC().Format(time.RFC3339))
	began := time.Now()
	rep, err := lockbench.RunIdle(ctx, cfg)
	return report(began, rep.EtcdVersion, rep.Emulator, func(w io.Writer) error { return lockbench.FormatIdle(w, rep) }, err)
}

// report prints what a run begun at began used (etcd's version and the
// emulator, if any), its tables (format), how long it took and its error
// err, and returns the exit status: 1 if err or format failed.
func report(began time.Time, etcdVersion, emulator string, format func(io.Writer) error, err error) int {
	if etcdVersion != "" {
		fmt.Printf("etcd server: %s (client go.etcd.io/etcd/client/v3 %s); emulator: %s\n", etcdVersion, depVersion("go.etcd.io/etcd/client/v3"), emulator)
	}
	fmt.Println()
	if ferr := format(os.Stdout); ferr != nil {
		fmt.Fprintln(os.Stderr, "lockbench:", ferr)
		return 1
	}
	fmt.Printf("\nTook %v; load average at the end: %s\n", time.Since(began).Round(time.Second), loadAvg())
	if err != nil {
		fmt.Fprintln(os.Stderr, "lockbench:", err)
		return 1
	}
	return 0
}

func usage(err error) int {
	fmt.Fprintln(os.Stderr, "lockbench:", err)
	flag.Usage()
	return 2
}

// depVersion returns the version of module path built into this binary.
func depVersion(path string) string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == path {
				return d.Version
			}
		}
	}
	return "(unknown version)"
}

// loadAvg returns /proc/loadavg's three load averages, or "unknown".
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
