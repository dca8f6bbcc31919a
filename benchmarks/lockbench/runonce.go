package lockbench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/spanmutex/spanmutex"
	"github.com/spanmutex/spanmutex/internal/bench"
)

// The run-once part: P processes start spanmutex.Mutex.Run of one section
// at once; one runs it (RunOnceSection long), the others wait for it and
// return AlreadyDone. It measures how soon after the winner's section ends
// the losers' Run calls return: with the README's configuration, a Mutex
// whose Scope listens for the wake-up the finishing transaction sends; with
// spanmutex-poll, a Scope made WithoutWakeUps, whose waiters back off.

// RunOnceSection is how long the winner's section runs.
const RunOnceSection = time.Second

// RunOnceResult is one run of the run-once part.
type RunOnceResult struct {
	Kind      Kind
	Procs     int
	Executed  int           // Run calls that ran the section: must be 1
	Losers    int           // Run calls that returned AlreadyDone
	P50, Max  time.Duration // losers' return after the winner's section ended
	FirstErr  string
	ErrorRuns int
}

// runOnceResult is a run-once child's result. Times are CLOCK_MONOTONIC
// nanoseconds.
type runOnceResult struct {
	Proc       int
	Outcome    string
	SectionEnd int64 // the winner's: when its section returned
	Returned   int64 // when Run returned
	Err        string
}

// runRunOnceChild makes this process one contender of the run-once race.
func runRunOnceChild(sp spec, cmds <-chan string, say func(string)) error {
	ctx := context.Background()
	client, err := openSpanner(ctx, sp.Emulator, sp.Database, 1, bench.NewRPCCounterWithLatency(sp.RPCLatency).ClientOptions()...)
	if err != nil {
		return err
	}
	defer client.Close()
	scope := spanmutex.NewScope()
	if sp.Kind == SpanmutexPoll {
		scope = spanmutex.NewScope(spanmutex.WithoutWakeUps())
	}
	defer scope.Close()
	m, err := spanmutex.New(client, sp.Name, spanmutex.WithScope(scope), spanmutex.WithOwner(fmt.Sprintf("p%d", sp.Proc)))
	if err != nil {
		return err
	}
	if _, _, err := readyThenStart(ctx, cmds, say); err != nil {
		return err
	}
	res := runOnceResult{Proc: sp.Proc}
	out, err := m.Run(ctx, func(ctx context.Context, _ *spanmutex.Lease) error {
		time.Sleep(sp.Hold) // the section's work
		res.SectionEnd = mono()
		return nil
	})
	res.Returned, res.Outcome = mono(), out.String()
	if err != nil {
		res.Err = err.Error()
	}
	if err := writeJSON(sp.Out, res); err != nil {
		return err
	}
	say("done")
	return nil
}

// runRunOnce races procs processes of kind to run one section once, on a
// fresh emulator.
func runRunOnce(ctx context.Context, b backends, kind Kind, procs int) (RunOnceResult, error) {
	res := RunOnceResult{Kind: kind, Procs: procs}
	dir, err := os.MkdirTemp("", "lockbench-runonce-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	base := spec{Role: roleRunOnce, Kind: kind, Name: "lockbench-runonce", Hold: RunOnceSection, Dir: dir, RPCLatency: b.rpcLatency}
	stop, err := freshBackend(ctx, b, kind, &base)
	if err != nil {
		return res, err
	}
	defer stop()
	specs, cs, finish, err := spawnProcs(ctx, base, procs)
	if err != nil {
		return res, err
	}
	defer finish()
	if _, _, err := goAll(cs, 0); err != nil {
		return res, err
	}
	results := make([]runOnceResult, len(cs))
	for i, c := range cs {
		if _, err := c.expect(ctx, "done", startLead+RunOnceSection+time.Minute); err != nil {
			return res, err
		}
		if err := readJSON(specs[i].Out, &results[i]); err != nil {
			return res, err
		}
	}
	return analyseRunOnce(res, results), nil
}

// analyseRunOnce fills res from the children's results.
func analyseRunOnce(res RunOnceResult, results []runOnceResult) RunOnceResult {
	var end int64
	for _, r := range results {
		if r.Err != "" {
			res.ErrorRuns++
			if res.FirstErr == "" {
				res.FirstErr = r.Err
			}
		}
		if r.Outcome == spanmutex.Executed.String() {
			res.Executed++
			end = r.SectionEnd
		}
	}
	var delays []time.Duration
	for _, r := range results {
		if r.Outcome == spanmutex.AlreadyDone.String() && end != 0 {
			delays = append(delays, time.Duration(r.Returned-end))
		}
	}
	slices.Sort(delays)
	res.Losers = len(delays)
	res.P50, _ = bench.Percentile(delays, 50)
	if len(delays) > 0 {
		res.Max = delays[len(delays)-1]
	}
	return res
}
