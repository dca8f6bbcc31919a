package lockbench

import (
	"context"
	"fmt"
	"time"

	"github.com/spanmutex/spanmutex"
	"github.com/spanmutex/spanmutex/internal/bench"
	"github.com/spanmutex/spanmutex/queue"
)

// Queue workers are set up as queue/bench_test.go sets them up: a lock
// lease of 5s and polls every 20ms to 200ms, a handler that does
// nothing.
const (
	queueLease   = 5 * time.Second
	queuePollMin = 20 * time.Millisecond
	queuePollMax = 200 * time.Millisecond
)

// runQueueChild runs one queue worker in this process until told to stop,
// saying how many requests it has completed as the count grows.
func runQueueChild(sp spec, cmds <-chan string, say func(string)) error {
	ctx := context.Background()
	rpcs := bench.NewRPCCounterWithLatency(sp.RPCLatency)
	client, err := openSpanner(ctx, sp.Emulator, sp.Database, 4, rpcs.ClientOptions()...)
	if err != nil {
		return err
	}
	defer client.Close()
	q, err := queue.New(client, queue.WithLockOptions(spanmutex.WithLease(queueLease)))
	if err != nil {
		return err
	}
	w, err := q.NewWorker(func(context.Context, *queue.Job) error { return nil },
		queue.WithPollInterval(queuePollMin, queuePollMax), queue.WithWorkerID(fmt.Sprintf("worker-%d", sp.Proc)))
	if err != nil {
		return err
	}
	settle(ctx, rpcs.Counts)
	if _, _, err := readyThenStart(ctx, cmds, say); err != nil {
		return err
	}
	before, abortedBefore := rpcs.Counts(), rpcs.AbortedAttempts()
	opsBefore, _ := rpcs.OpCounts()
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	runErr := make(chan error, 1)
	go func() { runErr <- w.Run(runCtx) }()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var said int64 = -1
	res := queueResult{Proc: sp.Proc}
	for running := true; running; {
		select {
		case <-tick.C:
			if n := w.Stats().RequestsCompleted; n != said {
				say(fmt.Sprintf("n %d", n))
				said = n
			}
		case <-cmds: // "stop", or stdin closed
			running = false
		case err := <-runErr:
			res.Err = fmt.Sprintf("worker stopped early: %v", err)
			runErr <- err
			running = false
		}
	}
	cancel()
	if err := <-runErr; err != nil && res.Err == "" && runCtx.Err() == nil {
		res.Err = err.Error()
	}
	st := w.Stats()
	res.Completed, res.Failed, res.RPCs = st.RequestsCompleted, st.RequestsFailed, bench.RPCsSince(rpcs.Counts(), before)
	ops, _ := rpcs.OpCounts()
	res.RPCsByOp, res.AbortedByOp = bench.RPCsSince(ops, opsBefore), bench.RPCsSince(rpcs.AbortedAttempts(), abortedBefore)
	if err := writeJSON(sp.Out, res); err != nil {
		return err
	}
	say("done")
	return nil
}
