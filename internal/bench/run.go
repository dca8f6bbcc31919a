package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/google/uuid"

	"github.com/spanmutex/spanmutex"
	"github.com/spanmutex/spanmutex/internal/pace"
	"github.com/spanmutex/spanmutex/internal/spanerr"
)

// Run measures both locks at every number of contenders in cfg, one run at
// a time, and returns a Result per run: for each number of contenders,
// spanmutex first, then the naive lock. Each run opens new clients, of the
// database cfg.PerRun gives it or else of cfg.NewClient's. It writes a line
// to cfg.Progress as each run starts and ends.
//
// It returns an error wrapping ErrInvalidConfig for a bad cfg, a
// *spanmutex.SchemaError if the tables are missing, and ctx's error if ctx
// ends; a run that fails ends the benchmark, with the results of the runs
// before it. Lock and Unlock errors during a run are no reason to stop: they
// are counted in Result.Errors.
func Run(ctx context.Context, cfg Config) ([]Result, error) {
	if ctx == nil {
		return nil, errNilContext
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	suffix := uuid.NewString()[:8]
	total := len(cfg.Contenders) * len(kinds())
	var results []Result
	for _, n := range cfg.Contenders {
		for _, kind := range kinds() {
			r, err := runOn(ctx, cfg, kind, n, fmt.Sprintf("%d/%d", len(results)+1, total), suffix)
			if err != nil {
				return results, err
			}
			results = append(results, r)
		}
	}
	return results, nil
}

// runOn makes one run on the database cfg gives it, first checking that
// the schema is there, so that a missing table is reported once, with how
// to create it, before any contender starts.
func runOn(ctx context.Context, cfg Config, kind Kind, n int, seq, suffix string) (Result, error) {
	open, release, err := cfg.database(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("bench: database for %s with %d contender(s): %w", kind, n, err)
	}
	defer release()
	if err := checkSchema(ctx, open, cfg.Table); err != nil {
		return Result{}, err
	}
	clients := min(n, cfg.Clients)
	fmt.Fprintf(cfg.Progress, "[%s] %s, %d contender(s) on %d client(s), for %v ...\n", seq, kind, n, clients, cfg.Duration)
	name := fmt.Sprintf("bench-%s-%d-%s", kind, n, suffix)
	r, err := runOne(ctx, cfg, open, kind, n, clients, name)
	if err != nil {
		return Result{}, fmt.Errorf("bench: %s with %d contender(s): %w", kind, n, err)
	}
	fmt.Fprintf(cfg.Progress, "[%s] %s, %d contender(s): %s\n", seq, kind, n, summaryLine(r))
	return r, nil
}

// checkSchema reads the mutex table once, returning a *spanmutex.SchemaError
// if it or its columns are missing.
func checkSchema(ctx context.Context, open Opener, table string) error {
	c, err := open(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = spanmutex.Inspect(ctx, c, "bench-schema-check", spanmutex.WithTable(table))
	return err
}

// summaryLine is a run's result in one line, for the progress output.
func summaryLine(r Result) string {
	s := fmt.Sprintf("%d acquisitions (%.1f/s), wait p50 %s p99 %s, %s commits/acq, %s RPCs/acq, %d FIFO violations",
		r.Acquisitions, r.PerSecond(), formatDuration(r.WaitP50, r.Acquisitions > 0), formatDuration(r.WaitP99, r.Acquisitions > 0),
		formatFloat(r.PerAcquisition(r.Commits())), formatFloat(r.PerAcquisition(r.RPCs)), r.FIFOViolations)
	if r.Cancelled > 0 {
		s += fmt.Sprintf(", %d cancelled waiting", r.Cancelled)
	}
	if r.Errors > 0 {
		s += fmt.Sprintf(", %d errors (first: %s)", r.Errors, r.FirstError)
	}
	return s + fmt.Sprintf("; all stopped %v after the window", r.Stopped.Round(10*time.Millisecond))
}

// errDrained is the cause with which a run cancels the Lock calls still
// waiting when the drain ends.
var errDrained = errors.New("bench: the drain ended")

// runOne runs n contenders of kind on lock name, over the given number of
// new clients opened with open, and measures them.
func runOne(ctx context.Context, cfg Config, open Opener, kind Kind, n, clients int, name string) (Result, error) {
	rpcs := newRPCCounter()
	cs, closeClients, err := openClients(ctx, open, rpcs, clients)
	if err != nil {
		return Result{}, err
	}
	defer closeClients()
	f, err := newFleet(kind, n, cs, cfg.Table, name)
	if err != nil {
		return Result{}, err
	}
	settle(ctx, rpcs)

	// runCtx ends when the drain ends (cause errDrained), when a contender
	// meets an error that makes the run meaningless, or with ctx.
	runCtx, cancelRun := context.WithCancelCause(ctx)
	defer cancelRun(nil)
	rpcsBefore := rpcs.snapshot()
	windowEnd := time.Now().Add(cfg.Duration)
	rec := newRecorder(windowEnd)
	stopped, running := startContenders(runCtx, cancelRun, f.contenders, rec)

	waitFor(runCtx, stopped, time.Until(windowEnd))
	waitFor(runCtx, stopped, time.Until(windowEnd.Add(cfg.Drain)))
	rec.close()
	cancelRun(errDrained)
	if err := awaitStopped(stopped, running, n, closeClients); err != nil {
		return Result{}, err
	}
	if cause := context.Cause(runCtx); !errors.Is(cause, errDrained) {
		return Result{}, cause // ctx ended, or a contender met a fatal error
	}
	r := measure(f, rpcs, rpcsBefore, rec, windowEnd)
	r.Kind, r.Contenders, r.Clients, r.Duration = kind, n, clients, cfg.Duration
	return r, nil
}

// openClients opens n clients with open, their RPCs counted by rpcs, and
// returns them with a function that closes them (at its first call only).
// On an error it closes those it opened.
func openClients(ctx context.Context, open Opener, rpcs *rpcCounter, n int) ([]*spanner.Client, func(), error) {
	cs := make([]*spanner.Client, 0, n)
	closeAll := sync.OnceFunc(func() {
		for _, c := range cs {
			c.Close()
		}
	})
	for range n {
		c, err := open(ctx, rpcs.clientOptions()...)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		cs = append(cs, c)
	}
	return cs, closeAll, nil
}

// startContenders starts a goroutine per contender, all at once, each
// running contend on ctx and cancelling the run (cancel) with the error
// that makes it meaningless, if one does. It returns a channel closed once
// every contender has stopped, and how many are still running.
func startContenders(ctx context.Context, cancel context.CancelCauseFunc, contenders []contender, rec *recorder) (<-chan struct{}, *atomic.Int64) {
	var (
		wg      sync.WaitGroup
		running atomic.Int64
	)
	gate := make(chan struct{})
	for i, c := range contenders {
		wg.Add(1)
		running.Add(1)
		go func() {
			defer wg.Done()
			defer running.Add(-1)
			<-gate
			if err := contend(ctx, i, c, rec); err != nil {
				cancel(err)
			}
		}()
	}
	stopped := make(chan struct{})
	go func() {
		wg.Wait()
		close(stopped)
	}()
	close(gate) // all contenders start at once
	return stopped, &running
}

// awaitStopped waits, once the drain has ended, for the contenders to stop
// (stopped closed), closing the clients if they have not within
// stopTimeout. It returns an error if running of the n contenders are still
// running closeTimeout after that.
func awaitStopped(stopped <-chan struct{}, running *atomic.Int64, n int, closeClients func()) error {
	if waitFor(context.Background(), stopped, stopTimeout) {
		return nil
	}
	// Closing the clients fails every RPC still under way.
	closeClients()
	if waitFor(context.Background(), stopped, closeTimeout) {
		return nil
	}
	return fmt.Errorf("%d of %d contenders were still running %v after the drain, even with their clients closed; giving up on them",
		running.Load(), n, stopTimeout+closeTimeout)
}

// measure sums up a run whose contenders have all stopped: the RPCs rpcs
// counted since before, the warnings of fleet f, what rec observed, and
// how long after windowEnd the run stopped. The caller fills in what the
// run was (Kind, Contenders, Clients, Duration).
func measure(f *fleet, rpcs *rpcCounter, before rpcCounts, rec *recorder, windowEnd time.Time) Result {
	spent := rpcs.snapshot().since(before)
	obs := rec.summary()
	r := Result{
		Acquisitions: obs.acquisitions, InWindow: obs.inWindow, Cancelled: obs.cancels,
		RPCs: spent.total(), RPCsByMethod: spent,
		FIFOViolations: obs.fifoViolations, MaxOvertaken: obs.maxOvertaken, HandOffs: len(obs.handOffs),
		Errors: obs.errors, Warnings: f.warnings(), Stopped: time.Since(windowEnd),
	}
	r.WaitP50, _ = percentile(obs.waits, 50)
	r.WaitP99, _ = percentile(obs.waits, 99)
	r.HandOffP50, _ = percentile(obs.handOffs, 50)
	r.HandOffP99, _ = percentile(obs.handOffs, 99)
	leads := rpcs.commitLeads()
	r.CommitLeadP50, _ = percentile(leads, 50)
	r.CommitLeadMax, _ = percentile(leads, 100)
	if obs.firstErr != nil {
		r.FirstError = obs.firstErr.Error()
	}
	return r
}

// contend is one contender's loop: acquire, release at once, again, until
// the window is over or ctx ends. It returns an error only when the run
// cannot go on (the schema is wrong, or the configuration).
func contend(ctx context.Context, id int, c contender, rec *recorder) error {
	for ctx.Err() == nil && time.Now().Before(rec.windowEnd) {
		called := rec.begin(id)
		a, err := c.lock(ctx)
		if err != nil {
			cancelled := ctx.Err() != nil
			rec.gaveUp(id, err, cancelled)
			if cancelled {
				return nil
			}
			if fatal(err) {
				return err
			}
			// Whatever failed may fail again at once: do not spin.
			if pace.Sleep(ctx, errorPause) != nil {
				return nil
			}
			continue
		}
		rec.acquired(id, called, a)
		releaseCalled := time.Now()
		err = c.unlock(ctx)
		if err != nil {
			rec.failed(err)
			if fatal(err) {
				return err
			}
			continue
		}
		rec.released(a.token, releaseCalled)
	}
	return nil
}

// errorPause is how long a contender waits after a failed Lock call.
const errorPause = 100 * time.Millisecond

// fatal reports whether err means that no Lock call of the run can succeed.
func fatal(err error) bool {
	return errors.Is(err, spanmutex.ErrSchema) || errors.Is(err, spanmutex.ErrInvalidConfig) || spanerr.Permanent(err)
}

// waitFor waits until done is closed, d has passed, or ctx ends, and
// reports whether done was closed.
func waitFor(ctx context.Context, done <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(max(d, 0))
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// New clients open their session pools in the background. settle waits
// until the run's clients have started no RPC for settleQuiet (at most
// settleMax), so that the window's counts are not those of the start-up.
const (
	settleQuiet = 100 * time.Millisecond
	settleMax   = 2 * time.Second
)

// settle waits until rpcs stops growing, or settleMax has passed, or ctx
// ends.
func settle(ctx context.Context, rpcs *rpcCounter) {
	tick := time.NewTicker(settleQuiet)
	defer tick.Stop()
	limit := time.NewTimer(settleMax)
	defer limit.Stop()
	last := rpcs.snapshot().total()
	for {
		select {
		case <-ctx.Done():
			return
		case <-limit.C:
			return
		case <-tick.C:
			now := rpcs.snapshot().total()
			if now == last {
				return
			}
			last = now
		}
	}
}
