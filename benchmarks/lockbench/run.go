package lockbench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/emulator"
	"github.com/spanmutex/spanmutex/internal/bench"
	"github.com/spanmutex/spanmutex/queue"
)

// Report is everything one Run measured.
type Report struct {
	Runs        []Result        // per shape, per lock
	Uncontended []Result        // 1 process, 1 goroutine, no hold, per lock
	Queue       []QueueResult   // per number of worker processes
	RunOnce     []RunOnceResult // per spanmutex kind
	EtcdVersion string
	Emulator    string // the emulator binary
}

// QueueResult is one run of queue workers as separate processes.
type QueueResult struct {
	Workers   int
	Requests  int
	Completed int64
	Failed    int64
	Took      time.Duration
	RPCs      int64 // every call, those owed to aborts included
	// RPCsByOp counts the calls by the operation their tag names,
	// AbortedByOp those of them owed to aborts: made in read-write
	// attempts Spanner aborted, or beginning their retries (bench's
	// AbortedAttempts).
	RPCsByOp, AbortedByOp map[string]int64
	Errors                []string
}

// Aborted returns the calls owed to aborts.
func (q QueueResult) Aborted() int64 { return bench.TotalRPCs(q.AbortedByOp) }

// backends finds what Run starts: the emulator always, etcd if asked for.
type backends struct {
	emulatorBin, etcdBin string
	dialect              ddl.Dialect // of every emulator database
	// rpcLatency delays every Spanner RPC of the children by its method's
	// figure (Config.RPCLatency); nil: none.
	rpcLatency map[string]time.Duration
}

// versions returns the emulator binary and etcd's version ("" without
// etcd), for a report.
func (b backends) versions() (emulator, etcd string) {
	if b.etcdBin != "" {
		etcd = EtcdVersion(b.etcdBin)
	}
	return b.emulatorBin, etcd
}

// Check returns an error, in one line, if a backend cfg needs is missing:
// the emulator binary or etcd.
func Check(cfg Config) error {
	_, err := findBackends(cfg)
	return err
}

func findBackends(cfg Config) (backends, error) {
	b := backends{dialect: cfg.Dialect, rpcLatency: cfg.RPCLatency}
	var err error
	if b.emulatorBin, err = emulator.FindBinary(); err != nil {
		return b, err
	}
	if cfg.needsEtcd() {
		if b.etcdBin, err = FindEtcd(); err != nil {
			return b, err
		}
	}
	return b, nil
}

// Run measures every lock at every shape, then the uncontended cycles, then
// the queue workers, each run on a fresh backend, with contenders in
// separate OS processes. It returns what it measured so far with any error.
func Run(ctx context.Context, cfg Config) (Report, error) {
	var rep Report
	cfg, err := cfg.withDefaults()
	if err != nil {
		return rep, err
	}
	b, err := findBackends(cfg)
	if err != nil {
		return rep, err
	}
	rep.Emulator, rep.EtcdVersion = b.versions()
	for _, shape := range cfg.Shapes {
		for _, kind := range cfg.Kinds {
			fmt.Fprintf(cfg.Progress, "%s %s: %d process(es) × %d goroutine(s), hold %v, for %v ...\n", shape, kind, shape.Procs, shape.Goroutines, cfg.Hold, cfg.Duration)
			r, err := runLock(ctx, b, kind, shape, cfg.Hold, cfg.Duration, cfg.Drain)
			if err != nil {
				return rep, fmt.Errorf("%s %s: %w", shape, kind, err)
			}
			fmt.Fprintf(cfg.Progress, "%s %s: %s\n", shape, kind, summary(r))
			rep.Runs = append(rep.Runs, r)
		}
	}
	if cfg.Uncontended > 0 {
		for _, kind := range cfg.Kinds {
			fmt.Fprintf(cfg.Progress, "uncontended %s: 1 process, 1 goroutine, no hold, for %v ...\n", kind, cfg.Uncontended)
			r, err := runLock(ctx, b, kind, Shape{1, 1}, 0, cfg.Uncontended, cfg.Drain)
			if err != nil {
				return rep, fmt.Errorf("uncontended %s: %w", kind, err)
			}
			fmt.Fprintf(cfg.Progress, "uncontended %s: %s\n", kind, summary(r))
			rep.Uncontended = append(rep.Uncontended, r)
		}
	}
	if cfg.QueueRequests > 0 {
		for _, w := range cfg.QueueWorkers {
			fmt.Fprintf(cfg.Progress, "queue: %d worker process(es) draining %d requests ...\n", w, cfg.QueueRequests)
			q, err := runQueue(ctx, b, w, cfg.QueueRequests)
			if err != nil {
				return rep, fmt.Errorf("queue with %d worker processes: %w", w, err)
			}
			fmt.Fprintf(cfg.Progress, "queue: %d worker process(es): %d requests in %v\n", w, q.Completed, q.Took.Round(time.Millisecond))
			rep.Queue = append(rep.Queue, q)
		}
	}
	if cfg.RunOnceProcs > 0 {
		for _, kind := range cfg.Kinds {
			if !kind.isSpanmutex() {
				continue
			}
			fmt.Fprintf(cfg.Progress, "run-once %s: %d processes start Run at once ...\n", kind, cfg.RunOnceProcs)
			r, err := runRunOnce(ctx, b, kind, cfg.RunOnceProcs)
			if err != nil {
				return rep, fmt.Errorf("run-once %s: %w", kind, err)
			}
			fmt.Fprintf(cfg.Progress, "run-once %s: %d executed, %d losers, p50 %v after the section ended\n", kind, r.Executed, r.Losers, r.P50.Round(time.Millisecond))
			rep.RunOnce = append(rep.RunOnce, r)
		}
	}
	return rep, nil
}

func summary(r Result) string {
	return fmt.Sprintf("%d acquisitions (%.1f/s), wait p50 %s, hand-off p50 %s, unlock p50 %s, %d overlaps, %d lost, %d errors",
		r.Acquisitions, r.PerSecond(), fmtDur(r.WaitP50, r.Acquisitions > 0), fmtDur(r.HandOffP50, r.HandOffs > 0),
		fmtDur(r.UnlockP50, r.Acquisitions > 0), r.Overlaps, r.Lost, r.Errors)
}

// freshBackend starts the backend of one run: a fresh emulator (with a
// fresh database holding the spanmutex schema, plus extra) for the Spanner
// locks and the queue, a fresh etcd for etcd. It fills in sp's address
// fields and returns how to stop it.
func freshBackend(ctx context.Context, b backends, kind Kind, sp *spec, extra ...string) (stop func(), err error) {
	if kind == Etcd {
		s, err := startEtcd(ctx, b.etcdBin)
		if err != nil {
			return nil, err
		}
		sp.Etcd = s.endpoint
		return s.stop, nil
	}
	// An emulator of its own per run: its commit timestamps drift ahead of
	// the real clock as it commits, and its strong reads wait for them, so
	// a long-used emulator slows later runs (see internal/bench).
	emu, err := emulator.Start(ctx, emulator.WithBinary(b.emulatorBin), emulator.WithDialect(b.dialect), emulator.WithDDL(extra...))
	if err != nil {
		return nil, err
	}
	sp.Emulator, sp.Database = emu.Host(), emu.Database()
	return func() { _ = emu.Close() }, nil
}

// runLock runs one lock at one shape and analyses it.
func runLock(ctx context.Context, b backends, kind Kind, shape Shape, hold, window, drain time.Duration) (Result, error) {
	dir, err := os.MkdirTemp("", "lockbench-run-")
	if err != nil {
		return Result{}, err
	}
	defer os.RemoveAll(dir)
	base := spec{Role: roleLock, Kind: kind, Goroutines: shape.Goroutines, Name: "lockbench-" + string(kind),
		Hold: hold, Drain: drain, Dir: dir, RPCLatency: b.rpcLatency}
	stop, err := freshBackend(ctx, b, kind, &base)
	if err != nil {
		return Result{}, err
	}
	defer stop()
	specs, cs, finish, err := spawnProcs(ctx, base, shape.Procs)
	if err != nil {
		return Result{}, err
	}
	defer finish()
	_, end, err := goAll(cs, window)
	if err != nil {
		return Result{}, err
	}
	// After the drain, cancelled waiters leave and Unlocks finish (each
	// bounded by unlockTimeout).
	limit := window + drain + startLead + unlockTimeout + 30*time.Second
	results := make([]lockResult, len(cs))
	for i, c := range cs {
		if _, err := c.expect(ctx, "done", limit); err != nil {
			return Result{}, err
		}
		if err := readJSON(specs[i].Out, &results[i]); err != nil {
			return Result{}, err
		}
	}
	counter, err := readCounter(dir)
	if err != nil {
		return Result{}, err
	}
	return analyse(kind, shape, hold, window, end, counter, results), nil
}

// runQueue enqueues requests (a create and 4 updates per resource, as
// queue/bench_test.go does) on a fresh emulator, then starts worker
// processes, one Worker each, and times them until all are complete.
func runQueue(ctx context.Context, b backends, workers, requests int) (QueueResult, error) {
	res := QueueResult{Workers: workers, Requests: requests}
	dir, err := os.MkdirTemp("", "lockbench-queue-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	reqDDL, err := b.dialect.RequestsStatements(ddl.DefaultRequestsTable)
	if err != nil {
		return res, err
	}
	emu, err := emulator.Start(ctx, emulator.WithBinary(b.emulatorBin), emulator.WithDialect(b.dialect), emulator.WithDDL(reqDDL...))
	if err != nil {
		return res, err
	}
	defer emu.Close()
	if err := enqueueRequests(ctx, emu, requests); err != nil {
		return res, err
	}
	base := spec{Role: roleQueue, Dir: dir, Emulator: emu.Host(), Database: emu.Database(), RPCLatency: b.rpcLatency}
	specs, cs, finish, err := spawnProcs(ctx, base, workers)
	if err != nil {
		return res, err
	}
	defer finish()
	if res.Took, err = drainQueue(ctx, cs, requests); err != nil {
		return res, err
	}
	return collectQueue(specs, res)
}

// enqueueRequests enqueues requests requests, five per resource (a create
// and four updates), a hundred per call.
func enqueueRequests(ctx context.Context, emu *emulator.Emulator, requests int) error {
	front, err := queue.New(emu.Client())
	if err != nil {
		return err
	}
	const perResource = 5
	for start := 0; start < requests; start += 100 {
		var reqs []queue.Request
		for i := start; i < min(start+100, requests); i++ {
			kind := queue.KindUpdate
			if i%perResource == 0 {
				kind = queue.KindCreate
			}
			reqs = append(reqs, queue.Request{Kind: kind, Resource: fmt.Sprintf("r%06d", i/perResource)})
		}
		if _, err := front.Enqueue(ctx, reqs...); err != nil {
			return err
		}
	}
	return nil
}

// drainQueue starts the worker processes cs together, waits until they
// report requests requests complete, tells them to stop and waits for
// them; it returns how long the requests took.
func drainQueue(ctx context.Context, cs []*child, requests int) (time.Duration, error) {
	start, _, err := goAll(cs, 0)
	if err != nil {
		return 0, err
	}
	updates := queueUpdates(cs)
	counts := make([]int64, len(cs))
	deadline := time.NewTimer(10 * time.Minute)
	defer deadline.Stop()
	var finished int64
	for sum := int64(0); sum < int64(requests); {
		select {
		case u := <-updates:
			if u[1] < 0 {
				return 0, fmt.Errorf("worker process %d stopped early: %s", u[0], cs[u[0]].stderr.tail(800))
			}
			counts[u[0]] = u[1]
			sum = 0
			for _, n := range counts {
				sum += n
			}
			finished = mono()
		case <-deadline.C:
			return 0, fmt.Errorf("only %v of %d requests complete after 10 minutes", counts, requests)
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	for _, c := range cs {
		_ = c.send("stop")
	}
	timeout := time.After(time.Minute)
	for dones := 0; dones < len(cs); {
		select {
		case u := <-updates:
			if u[1] < 0 {
				dones++
			}
		case <-timeout:
			return 0, errors.New("worker processes did not stop within a minute of being told to")
		}
	}
	return time.Duration(finished - start), nil
}

// queueUpdates turns the worker processes' lines into (process, count)
// pairs, as each says its count as it grows; a count of -1 says "done".
func queueUpdates(cs []*child) <-chan [2]int64 {
	updates := make(chan [2]int64, 256)
	for i, c := range cs {
		go func() {
			for line := range c.lines {
				if n, ok := strings.CutPrefix(line, "n "); ok {
					v, _ := strconv.ParseInt(n, 10, 64)
					updates <- [2]int64{int64(i), v}
				} else if line == "done" {
					updates <- [2]int64{int64(i), -1}
				}
			}
		}()
	}
	return updates
}

// collectQueue adds up the worker processes' result files into res.
func collectQueue(specs []spec, res QueueResult) (QueueResult, error) {
	for _, sp := range specs {
		var qr queueResult
		if err := readJSON(sp.Out, &qr); err != nil {
			return res, err
		}
		res.Completed += qr.Completed
		res.Failed += qr.Failed
		res.RPCs += bench.TotalRPCs(qr.RPCs)
		res.RPCsByOp, res.AbortedByOp = addCounts(res.RPCsByOp, qr.RPCsByOp), addCounts(res.AbortedByOp, qr.AbortedByOp)
		if qr.Err != "" {
			res.Errors = append(res.Errors, qr.Err)
		}
	}
	return res, nil
}

// addCounts adds b's counts into a (made if nil) and returns it.
func addCounts(a, b map[string]int64) map[string]int64 {
	if a == nil {
		a = map[string]int64{}
	}
	for k, n := range b {
		a[k] += n
	}
	return a
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("lockbench: a contender's result: %w", err)
	}
	return json.Unmarshal(b, v)
}
