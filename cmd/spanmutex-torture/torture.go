package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"google.golang.org/grpc"

	"github.com/spanmutex/spanmutex"
	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/emulator"
	"github.com/spanmutex/spanmutex/internal/cmdline"
	"github.com/spanmutex/spanmutex/internal/defaults"
	"github.com/spanmutex/spanmutex/internal/history"
	"github.com/spanmutex/spanmutex/internal/pace"
)

// tortureHelp is the help of "spanmutex-torture".
var tortureHelp = cmdline.HelpText{
	Usage: "spanmutex-torture [flags]",
	About: `Runs a mixed workload against an embedded Cloud Spanner emulator with faults
on, records every operation, and checks the history. Each of --clients clients
stands for one process: it has its own Spanner client (its own sessions and
gRPC connection), its own faults, and its own spanmutex.Scope, given with
WithScope to every Lock it makes. For the Lock that is the same as separate
OS processes: a Scope is the only in-memory state Locks share (the library
keeps no mutable package-level state), and Locks of different Scopes coordinate only
through Spanner; what the clients still share is the Go runtime and its
scheduler. (Locks in real separate processes are tested by the library's
lock_process_test.go.) Each client does one thing at a time, at random:

  - Run a run-once section (Mutex.Run), on a name all clients share until it is
    done, then on a fresh one. The section makes a guarded write of its token
    (Lease.Guard in the same transaction), works for up to a lease (so that
    its lease is renewed), sometimes fails on purpose (so that others retry
    it), and writes again.
  - Lock (or TryLock) one of --locks reusable locks, waiting in its FIFO queue,
    make one to three guarded writes while holding it, and Unlock.

A section or holder that lost its lease keeps writing, as a process that
misses the news would; only the fence stops it. The faults (--faults):

  abort        the emulator aborts commits at random (--enable_fault_injection)
  unavailable  a call fails with UNAVAILABLE before it is sent (--fault-rate)
  drop-commit  a commit succeeds but its answer is lost (--fault-rate)
  delay        a call waits up to an eighth of its client's lease
               (--fault-rate)
  pause        now and then a client freezes for 1.3 to 2.5 of its leases,
               so that it is taken over while it believes it holds the lock
  impatient    three Lock calls in ten give up after 5 to 60 ms: they must
               return ErrNotObtained and leave no lock held behind them
  mismatched   every other client declares a lease of a third or three times
               --lease (at least 100ms): a takeover must wait for the
               lease its holder declared, whatever the taker's own

With --sessions, half the clients (c1, c3, c6, c8, c9, ...) make their Scope
WithSessions: the locks they take while free or by takeover are held through
one session row per client, renewed by one Commit every third of the lease
(paused, dropped, delayed, failed like any call), and lost with it. The
others renew each lock on their own, so locks pass between both kinds of
holder. The history's checks see lock rows' renewals, not sessions': a lease
held through a session is judged silent from its acquisition, which makes
their takeover check weaker for it, never wrong. A check of its own,
session-takeover, holds each takeover of a lease held through a session to
the lease its holder declared, counted from the later of its acquisition
and its session's last write before the takeover (both seen on the
session clients' wire, by commit timestamps).

The history is then checked (see internal/history): a linearizability check of
each name with porcupine against a model of what Spanner may commit, and direct
checks on commit timestamps: tokens increase, holders never overlap, a
resource's tokens never decrease, a run-once section is done at most once,
takeovers wait for the lease the previous holder declared, and the table
agrees with what clients were told; a Lock call that returns no lease returns
ErrNotObtained, an *ExhaustedError or (TryLock) a *HeldError, and after the
run no lock is held by a token no Lock call returned. Renewals, seen on the
wire, are attributed to the lease that held the row when they committed; a
lease a call was handed and renewed but did not return (a lease in limbo) is
listed, and is a violation if it lapsed (taken over, or handed on only past
its lease) while the call still waited and no pause of its client explains it
(pauses are recorded).

It also reports liveness: per lock, the longest stall, a stretch during which
the lock was free (or held by a token no Lock call returned) while a Lock call
waited, on the local clock, from when the previous hold had certainly ended
(its Unlock returned, or its lease expired) until the next Lock returned: an
upper bound, which includes the waiters' own latency (an impatient call's
clean-up after its deadline, say). A stall is a violation only past 4 × the
longest declared lease + 2s.

It prints the operations done, the faults injected, each check, the longest
stalls, and every violation with the sub-history that shows it.`,
	After: `SIGINT (Ctrl-C) or SIGTERM stops the workload early: what was recorded is still
checked, and the exit status is 1. Once the check has begun, a signal ends the
command at once. --seed repeats the random choices, not the timing of
concurrent clients, so a run cannot be replayed exactly: keep --history.

Exit status: 0 if no check found a violation, 1 if one did (or the run failed or
was stopped early), 2 on a usage error.

Examples:
  spanmutex-torture --duration 1m --clients 8 --faults abort,unavailable,drop-commit,delay,pause,impatient,mismatched
  spanmutex-torture --duration 10m --history /tmp/history.jsonl
  spanmutex-torture --duration 30s --dialect postgresql --sessions
  spanmutex-torture --faults none --clients 2 --duration 10s`,
}

// tortureWrites is the table the guarded writes go to.
const tortureWrites = "TortureWrites"

// tortureOptions are the flags of "spanmutex-torture".
type tortureOptions struct {
	duration     time.Duration
	clients      int
	faultList    string
	faults       []string
	rate         float64
	lease        time.Duration
	locks        int
	seed         uint64
	history      string
	checkTimeout time.Duration
	progress     time.Duration
	dialectName  string      // --dialect
	dialect      ddl.Dialect // of the emulator's database, parsed from dialectName by validate
	sessions     bool        // --sessions: half the clients hold through sessions (sessionClient)
}

// tortureFlags defines the flags of "spanmutex-torture" on a new flag set.
func tortureFlags() (*flag.FlagSet, *tortureOptions) {
	o := &tortureOptions{}
	fs := cmdline.NewFlagSet(command)
	fs.DurationVar(&o.duration, "duration", time.Minute, "how long to run the workload")
	fs.IntVar(&o.clients, "clients", 8, "how many clients, 2 to 64")
	fs.StringVar(&o.faultList, "faults", strings.Join(allFaults, ","), "the faults to inject, comma-separated, or none")
	fs.Float64Var(&o.rate, "fault-rate", 0.02, "the chance that each call meets each of unavailable, drop-commit and delay")
	fs.DurationVar(&o.lease, "lease", 2*time.Second, "the lease (declared lease) of every mutex and lock; with --faults mismatched, of every other client")
	fs.IntVar(&o.locks, "locks", 3, "how many reusable locks the clients share, 1 to 100")
	fs.Uint64Var(&o.seed, "seed", 0, "seed of the workload's and the faults' random choices (0: pick one)")
	fs.StringVar(&o.history, "history", "", "also write the recorded history to this file, as JSON lines (it is written to a temporary file anyway on a violation)")
	fs.DurationVar(&o.checkTimeout, "check-timeout", 5*time.Minute, "bound on the linearizability check of each name")
	fs.DurationVar(&o.progress, "progress", 30*time.Second, "print a progress line this often (0: never)")
	fs.StringVar(&o.dialectName, "dialect", ddl.GoogleSQL.String(), "the SQL dialect of the emulator's database: googlesql or postgresql")
	fs.BoolVar(&o.sessions, "sessions", false, "half the clients (c1, c3, c6, c8, c9, ...) hold their locks through their Scope's session (WithSessions)")
	return fs, o
}

// validate checks the flags of "spanmutex-torture".
func (o *tortureOptions) validate() error {
	faults, err := parseFaults(o.faultList)
	if err != nil {
		return cmdline.Usagef(command, "--faults %q: %v", o.faultList, err)
	}
	o.faults = faults
	if o.dialect, err = cmdline.ParseDialect(command, o.dialectName); err != nil {
		return err
	}
	switch {
	case o.duration <= 0:
		return cmdline.Usagef(command, "--duration %v: must be positive", o.duration)
	case o.clients < 2 || o.clients > 64:
		return cmdline.Usagef(command, "--clients %d: want 2 to 64", o.clients)
	case !(o.rate >= 0 && o.rate <= 1):
		return cmdline.Usagef(command, "--fault-rate %v: want 0 to 1", o.rate)
	case o.lease < 100*time.Millisecond:
		return cmdline.Usagef(command, "--lease %v: want at least 100ms", o.lease)
	case o.locks < 1 || o.locks > 100:
		return cmdline.Usagef(command, "--locks %d: want 1 to 100", o.locks)
	case o.checkTimeout <= 0:
		return cmdline.Usagef(command, "--check-timeout %v: must be positive", o.checkTimeout)
	case o.progress < 0:
		return cmdline.Usagef(command, "--progress %v: must not be negative", o.progress)
	}
	return nil
}

// has reports whether fault f is on.
func (o *tortureOptions) has(f string) bool { return slices.Contains(o.faults, f) }

// clientLease is the lease client i (from 0) declares:
// --lease, or with the mismatched fault, for every other
// client alternately a third of it (at least defaults.MinLease) and
// three times it.
func (o *tortureOptions) clientLease(i int) time.Duration {
	switch {
	case !o.has(faultMismatched) || i%2 == 0:
		return o.lease
	case i%4 == 1:
		return max(o.lease/3, defaults.MinLease)
	}
	return 3 * o.lease
}

// run is the whole command line of spanmutex-torture: it returns the exit status.
func run(ctx context.Context, s cmdline.Streams, args []string) int {
	fs, o := tortureFlags()
	if code, done := cmdline.ParseOnlyFlags(s, command, fs, tortureHelp, args); done {
		return code
	}
	if err := o.validate(); err != nil {
		return cmdline.ReportError(s, err, cmdline.ExitUsage)
	}
	if o.seed == 0 {
		o.seed = rand.Uint64()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	t := &torture{opts: o, out: &cmdline.Console{W: s.Stdout}, rec: history.NewRecorder(), began: time.Now()}
	faults := "none"
	if len(o.faults) > 0 {
		faults = strings.Join(o.faults, ",")
	}
	t.out.Printf("spanmutex-torture: %d clients for %v, faults %s (rate %v), lease %v, %d locks, seed %d\n",
		o.clients, o.duration, faults, o.rate, o.lease, o.locks, o.seed)
	closeAll, err := t.connect(ctx)
	if err != nil {
		return cmdline.ReportError(s, err, cmdline.ExitError)
	}
	defer closeAll()

	// Once the workload has stopped, a signal stops the check at once.
	ok, err := t.run(ctx, stop)
	if err != nil {
		return cmdline.ReportError(s, err, cmdline.ExitError)
	}
	if !ok {
		return cmdline.ExitError
	}
	return cmdline.ExitOK
}

// torture is one run of "spanmutex-torture".
type torture struct {
	opts    *tortureOptions
	out     *cmdline.Console
	rec     *history.Recorder
	began   time.Time
	emu     *emulator.Emulator
	clients []*tortureClient
	section atomic.Int64 // the run-once section clients currently share
	pauses  atomic.Int64
}

// tortureClient is one client of the workload, and stands for one process
// (see connect).
type tortureClient struct {
	*history.Client
	faults    *clientFaults
	lease     time.Duration    // the lease its Mutexes and Locks declare
	scope     *spanmutex.Scope // the one Scope of all its Locks
	rng       *rand.Rand       // used by the client's goroutine only
	locks     map[string]*spanmutex.Lock
	sessions  *sessionWrites // its session commits; nil unless its Scope has sessions
	holding   atomic.Bool    // holds (or believes it holds) a lease
	impatient atomic.Int64   // Lock calls cut short by the impatient fault
	gaveUp    atomic.Int64   // of those, the ones that returned ErrNotObtained
}

// connect starts the emulator, with the table of guarded writes, and opens
// one Spanner client per workload client, with its faults; it returns a
// function that closes everything it opened.
//
// Each workload client is one process for the Lock: its own Spanner client
// (own sessions, own gRPC connection), own fault injector and freezer, and
// its own Scope for all its Locks. A Scope is the only in-memory state
// Locks share (the library has no package-level mutable state), so Locks of
// different clients meet only in Spanner, exactly as in separate processes;
// only the Go runtime and its scheduler remain shared. The library's
// lock_process_test.go runs Locks in real separate processes.
func (t *torture) connect(ctx context.Context) (func(), error) {
	o := t.opts
	eopts := []emulator.Option{emulator.WithDialect(o.dialect), emulator.WithDDL(history.WritesDDLIn(o.dialect, tortureWrites))}
	if o.has(faultAbort) {
		eopts = append(eopts, emulator.WithFaultInjection())
	}
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	emu, err := emulator.Start(sctx, eopts...)
	if err != nil {
		return nil, err
	}
	t.emu = emu
	switch {
	case emu.Started() && o.has(faultAbort):
		t.out.Printf("Started the Cloud Spanner emulator at %s (pid %d), with --enable_fault_injection.\n", emu.Host(), emu.PID())
	case emu.Started():
		t.out.Printf("Started the Cloud Spanner emulator at %s (pid %d).\n", emu.Host(), emu.PID())
	default:
		t.out.Printf("Using the Cloud Spanner emulator at %s=%s.\n", cmdline.EmulatorHostEnv, emu.Host())
	}
	closeAll := func() {
		for _, c := range t.clients {
			c.Spanner.Close()
		}
		_ = emu.Close()
	}
	for i := range o.clients {
		c, err := t.newClient(ctx, i)
		if c != nil {
			t.clients = append(t.clients, c)
		}
		if err != nil {
			closeAll()
			return nil, err
		}
	}
	t.out.Printf("Created database %s (%s); opened %d clients, each with a Spanner client and a Scope of its own.\n", emu.Database(), emu.Dialect(), len(t.clients))
	if o.has(faultMismatched) {
		t.out.Printf("Declared leases: %s.\n", t.leases())
	}
	if o.sessions {
		t.out.Printf("Scopes WithSessions: %s.\n", t.sessionClients())
	}
	return closeAll, nil
}

// newClient opens workload client i: its faults, its Spanner client, its
// Scope and its Locks. If it returns a client with an error, the client
// must be closed.
func (t *torture) newClient(ctx context.Context, i int) (*tortureClient, error) {
	o := t.opts
	id := fmt.Sprintf("c%d", i+1)
	wm := o.clientLease(i)
	cf, err := newClientFaults(o.faults, o.rate, wm/8, o.seed+uint64(i)+1)
	if err != nil {
		return nil, err
	}
	inner := []grpc.UnaryClientInterceptor{t.rec.RenewalObserver(id, ddl.DefaultMutexTable)}
	var sw *sessionWrites
	scope := spanmutex.NewScope()
	if o.sessionClient(i) {
		sw, scope = newSessionWrites(), spanmutex.NewScope(spanmutex.WithSessions())
		inner = append(inner, sw.unary)
	}
	sc, err := t.emu.NewClient(ctx, t.emu.Database(), cf.clientOptions(inner...)...)
	if err != nil {
		return nil, err
	}
	c := &tortureClient{
		Client:   &history.Client{ID: id, Spanner: sc, Rec: t.rec, Writes: tortureWrites, Lease: wm},
		faults:   cf,
		lease:    wm,
		scope:    scope,
		rng:      rand.New(rand.NewPCG(o.seed, uint64(i))),
		locks:    map[string]*spanmutex.Lock{},
		sessions: sw,
	}
	for l := range o.locks {
		name := lockName(l)
		lk, err := spanmutex.NewLock(sc, name, spanmutex.WithOwner(id), spanmutex.WithLease(wm),
			spanmutex.WithMaxFailures(6), spanmutex.WithScope(c.scope))
		if err != nil {
			return c, err
		}
		c.locks[name] = lk
	}
	return c, nil
}

// leases lists the lease each client declares.
func (t *torture) leases() string {
	var parts []string
	for _, c := range t.clients {
		parts = append(parts, fmt.Sprintf("%s %v", c.ID, c.lease))
	}
	return strings.Join(parts, ", ")
}

// sessionClients lists the clients whose Scopes have sessions.
func (t *torture) sessionClients() string {
	var ids []string
	for _, c := range t.clients {
		if c.sessions != nil {
			ids = append(ids, c.ID)
		}
	}
	return strings.Join(ids, ", ")
}

func lockName(i int) string { return fmt.Sprintf("lock-%d", i+1) }

// run runs the workload, checks the history and prints the report. It
// reports whether the run was clean.
func (t *torture) run(ctx context.Context, stopSignals func()) (bool, error) {
	o := t.opts
	stopped, workload := t.runWorkload(ctx)
	interrupted := ctx.Err() != nil
	stopSignals()
	t.waitForClients(stopped)
	ops := t.rec.Ops()
	t.out.Printf("Workload stopped after %v; checking %d operations.\n", workload.Round(100*time.Millisecond), len(ops))
	written := ""
	if o.history != "" {
		if err := writeHistory(o.history, ops); err != nil {
			return false, err
		}
		written = o.history
	}
	rep, checked, err := t.check(ctx, ops)
	if err != nil {
		return false, err
	}
	sessionViolations := t.report(rep, ops, written)
	t.out.Printf("Elapsed: %v (workload %v, check %v)\n", time.Since(t.began).Round(100*time.Millisecond),
		workload.Round(100*time.Millisecond), checked.Round(100*time.Millisecond))
	if interrupted {
		t.out.Printf("Stopped early by a signal.\n")
		return false, nil
	}
	return rep.OK() && sessionViolations == 0, nil
}

// runWorkload runs the clients, and the pauses and progress reports, until
// the duration has passed or ctx ends. It returns how long that took and a
// channel closed once every client has returned: calls under way finish on
// their own.
func (t *torture) runWorkload(ctx context.Context) (stopped <-chan struct{}, workload time.Duration) {
	o := t.opts
	wctx, cancel := context.WithTimeout(ctx, o.duration)
	defer cancel()
	var wg sync.WaitGroup
	for _, c := range t.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.work(wctx, c)
		}()
	}
	var bg sync.WaitGroup
	bctx, stopBackground := context.WithCancel(wctx)
	if o.has(faultPause) {
		bg.Add(1)
		go func() {
			defer bg.Done()
			t.pauseNowAndThen(bctx)
		}()
	}
	if o.progress > 0 {
		bg.Add(1)
		go func() {
			defer bg.Done()
			t.reportProgress(bctx)
		}()
	}
	<-wctx.Done()
	stopBackground()
	bg.Wait()
	for _, c := range t.clients {
		c.faults.freezer.thaw()
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	return done, time.Since(t.began)
}

// waitForClients waits for the clients' calls under way: sections keep
// writing until their write timeouts, and Run and Unlock record their end
// within their finish timeout.
func (t *torture) waitForClients(stopped <-chan struct{}) {
	const stopTimeout = 3 * time.Minute
	select {
	case <-stopped:
	case <-time.After(stopTimeout):
		t.out.Printf("Some clients did not stop within %v; their calls are checked as of unknown outcome.\n", stopTimeout)
	}
}

// check reads the guarded writes back and checks the history ops; it
// returns the report and how long the check took.
func (t *torture) check(ctx context.Context, ops []history.Op) (*history.Report, time.Duration, error) {
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer rcancel()
	rb, err := history.ReadBack(rctx, t.emu.Client(), tortureWrites, "", ops)
	if err != nil {
		return nil, 0, err
	}
	checking := time.Now()
	rep := history.Check(ops, history.Config{Lease: t.opts.lease, Timeout: t.opts.checkTimeout, Readback: rb})
	return rep, time.Since(checking), nil
}

// report prints the report, and where the history is: written already, or
// written now to a temporary file because a check failed. It returns the
// violations of the sessions' check (writeSessions), which rep does not
// count.
func (t *torture) report(rep *history.Report, ops []history.Op, written string) (sessionViolations int) {
	var b strings.Builder
	rep.WriteOperations(&b)
	t.writeFaults(&b)
	sessionViolations = t.writeSessions(&b, ops)
	rep.WriteChecks(&b)
	rep.WriteLiveness(&b)
	rep.WriteViolations(&b)
	t.out.Printf("%s", b.String())
	if written == "" && (!rep.OK() || sessionViolations > 0) {
		f, err := os.CreateTemp("", "spanmutex-torture-history-*.jsonl")
		if err == nil {
			written = f.Name()
			f.Close()
			err = writeHistory(written, ops)
		}
		if err != nil {
			t.out.Printf("Could not write the history: %v\n", err)
			written = ""
		}
	}
	if written != "" {
		t.out.Printf("History: %s (%d operations, JSON lines)\n", written, len(ops))
	}
	return sessionViolations
}

// writeHistory writes ops to path, as JSON lines.
func writeHistory(path string, ops []history.Op) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := history.WriteJSON(f, ops); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writeFaults writes the faults injected, by kind.
func (t *torture) writeFaults(w *strings.Builder) {
	counts := map[string]int64{}
	var aborts int64
	for _, c := range t.clients {
		for name, n := range c.faults.injected() {
			counts[name] += n
		}
		aborts += c.faults.aborts.Load()
	}
	counts[faultPause] = t.pauses.Load()
	counts[faultAbort] = aborts
	var gaveUp int64
	for _, c := range t.clients {
		counts[faultImpatient] += c.impatient.Load()
		gaveUp += c.gaveUp.Load()
		if c.lease != t.opts.lease {
			counts[faultMismatched]++
		}
	}
	var total int64
	for _, f := range t.opts.faults {
		total += counts[f]
	}
	notes := map[string]string{
		faultAbort:       "ABORTED answers seen: the emulator's injected aborts, and contention",
		faultUnavailable: "calls failed before they were sent",
		faultDropCommit:  "commits whose answer was lost",
		faultDelay:       "calls delayed",
		faultPause:       "clients frozen past their lease",
		faultImpatient:   fmt.Sprintf("Lock calls with a deadline of %v to %v (%d gave up with ErrNotObtained)", impatientMin, impatientMax, gaveUp),
		faultMismatched:  fmt.Sprintf("clients declaring a lease other than --lease %v", t.opts.lease),
	}
	fmt.Fprintf(w, "Faults injected: %d\n", total)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, f := range t.opts.faults {
		fmt.Fprintf(tw, "  %s\t%d\t%s\n", f, counts[f], notes[f])
	}
	_ = tw.Flush()
}

// reportProgress prints a line every --progress until ctx ends.
func (t *torture) reportProgress(ctx context.Context) {
	tick := time.NewTicker(t.opts.progress)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		var faults int64
		for _, c := range t.clients {
			for _, n := range c.faults.injected() {
				faults += n
			}
		}
		t.out.Printf("  %v: %d operations, %d RPC faults, %d pauses\n",
			time.Since(t.began).Round(time.Second), t.rec.Len(), faults, t.pauses.Load())
	}
}

// pauseNowAndThen freezes a client every 2 to 5 leases, a holder if one
// holds, for 1.3 to 2.5 of that client's leases: past the lease it
// declared and any jitter, so that it is taken over while it believes it
// still holds its lease. Each pause is recorded in the history (Pause),
// from just before the freeze to just after the thaw.
func (t *torture) pauseNowAndThen(ctx context.Context) {
	wm := t.opts.lease
	rng := rand.New(rand.NewPCG(t.opts.seed, 1<<32))
	between := func(lo, hi float64) float64 { return lo + rng.Float64()*(hi-lo) }
	for {
		if pace.Sleep(ctx, time.Duration(between(2, 5)*float64(wm))) != nil {
			return
		}
		var holders []*tortureClient
		for _, c := range t.clients {
			if c.holding.Load() {
				holders = append(holders, c)
			}
		}
		if len(holders) == 0 {
			holders = t.clients
		}
		c := holders[rng.IntN(len(holders))]
		// Recorded, so that the checker can tell a lease that lapsed
		// because its process was frozen (history.CheckLimbo).
		paused := t.rec.Begin(history.Op{Client: c.ID, Kind: history.Pause})
		c.faults.freezer.freeze()
		t.pauses.Add(1)
		_ = pace.Sleep(ctx, time.Duration(between(1.3, 2.5)*float64(c.lease)))
		c.faults.freezer.thaw()
		paused.End(history.Result{Outcome: history.OK})
	}
}

// work is one client's loop: until ctx ends, a run-once section, a
// Lock or a TryLock at random.
func (t *torture) work(ctx context.Context, c *tortureClient) {
	for ctx.Err() == nil {
		switch r := c.rng.Float64(); {
		case r < 0.35:
			t.runOnce(ctx, c)
		case r < 0.45:
			t.lockCycle(ctx, c, true)
		default:
			t.lockCycle(ctx, c, false)
		}
	}
}

// holdTimeout bounds how long client c waits for a section or lock.
func (t *torture) holdTimeout(c *tortureClient) time.Duration { return 8 * c.lease }

// writeContext is the context of a holder's guarded write: not the
// section's, which is cancelled when the lease is lost, because the holder
// stands for one that does not notice; a frozen client's write waits for
// the thaw and then meets the fence.
func (t *torture) writeContext(ctx context.Context, c *tortureClient) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 4*c.lease)
}

// errOnPurpose is what a section returns when it fails on purpose.
var errOnPurpose = errors.New("torture: the section failed on purpose")

// runOnce runs the shared run-once section, and moves on to a fresh one
// once it is done (or given up).
func (t *torture) runOnce(ctx context.Context, c *tortureClient) {
	k := t.section.Load()
	name := fmt.Sprintf("section-%06d", k)
	m, err := spanmutex.New(c.Spanner, name, spanmutex.WithOwner(c.ID), spanmutex.WithLease(c.lease),
		spanmutex.WithMaxAttempts(4), spanmutex.WithMaxFailures(4))
	if err != nil {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, t.holdTimeout(c))
	defer cancel()
	out, err := c.Run(rctx, name, m, func(sctx context.Context, lease *spanmutex.Lease) error {
		c.holding.Store(true)
		defer c.holding.Store(false)
		if err := t.write(sctx, c, lease, name); err != nil {
			return err
		}
		// Work for up to a lease: long enough, half the time, for the
		// lease to be renewed.
		_ = pace.Sleep(context.WithoutCancel(sctx), time.Duration(c.rng.Int64N(int64(c.lease))))
		if c.rng.Float64() < 0.1 {
			return errOnPurpose
		}
		return t.write(sctx, c, lease, name)
	})
	if out == spanmutex.AlreadyDone || (out == spanmutex.Executed && err == nil) || errors.Is(err, spanmutex.ErrAttemptsExhausted) {
		t.section.CompareAndSwap(k, k+1)
	}
}

// write makes one guarded write of lease's token to resource.
func (t *torture) write(ctx context.Context, c *tortureClient, lease *spanmutex.Lease, resource string) error {
	wctx, cancel := t.writeContext(ctx, c)
	defer cancel()
	return c.Write(wctx, lease, resource, lease.Guard)
}

// lockCycle takes one of the locks, makes one to three guarded writes while
// holding it (the last one just before Unlock marks the end of its hold in
// Spanner's commit order), and unlocks it. With the impatient fault, some
// Lock calls give up after a few milliseconds.
func (t *torture) lockCycle(ctx context.Context, c *tortureClient, try bool) {
	name := lockName(c.rng.IntN(t.opts.locks))
	l := c.locks[name]
	timeout, impatient := t.holdTimeout(c), false
	if !try && t.opts.has(faultImpatient) && c.rng.Float64() < impatientShare {
		timeout, impatient = impatientMin+time.Duration(c.rng.Int64N(int64(impatientMax-impatientMin))), true
		c.impatient.Add(1)
	}
	lctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	lease, err := c.Lock(lctx, name, l, try)
	if err != nil {
		if impatient && errors.Is(err, spanmutex.ErrNotObtained) {
			c.gaveUp.Add(1)
		}
		if try || impatient {
			// Held: come back a little later rather than spin.
			_ = pace.Sleep(ctx, time.Duration(c.rng.Int64N(int64(c.lease/10))))
		}
		return
	}
	c.holding.Store(true)
	for i := range 1 + c.rng.IntN(3) {
		if i > 0 {
			_ = pace.Sleep(context.WithoutCancel(ctx), time.Duration(c.rng.Int64N(int64(c.lease/4))))
		}
		if err := t.write(ctx, c, lease, name); errors.Is(err, spanmutex.ErrLeaseLost) {
			break
		}
	}
	c.holding.Store(false)
	_ = c.Unlock(context.WithoutCancel(ctx), l, lease)
}
