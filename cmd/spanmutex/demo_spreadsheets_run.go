package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/spanmutex/spanmutex/queue"
)

// sheetsRun is what the run leaves for the checks.
type sheetsRun struct {
	load      *sheetsLoad
	drained   time.Time // when nothing was pending any more
	zombieErr error     // what the killed worker's Run returned when woken, if anything
}

// drainPoll is how often the demo reads the queue's counts while it waits
// for the queue to drain.
const drainPoll = 250 * time.Millisecond

// run starts the workers, drives the load through the HTTP API, kills a
// worker on the way, and waits until nothing is pending. It stops the
// workers before it returns.
func (d *sheetsDemo) run(ctx context.Context) (*sheetsRun, error) {
	o := d.opts
	d.out.Printf("\n== %d sheets, %d update clicks and %d duplicate creates through the HTTP API; %d workers, lease %v ==\n\n",
		o.sheets, o.clicks, o.duplicates, o.workers, o.lease)
	ops := sheetsPlan(rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())), o.sheets, o.clicks, o.duplicates)

	wctx, stopWorkers := context.WithCancel(ctx)
	defer stopWorkers()
	d.svc.start(wctx)
	res := &sheetsRun{}
	stopped := false
	stopAll := func() {
		if !stopped {
			stopped = true
			res.zombieErr = d.svc.stop(context.WithoutCancel(ctx))
		}
	}
	defer stopAll()

	load := newSheetsLoad(len(ops))
	res.load = load
	stopProgress := d.progress(ctx, load)
	defer stopProgress()

	if err := d.drive(ctx, load, ops); err != nil {
		return nil, err
	}
	d.out.Printf("  -- all %d calls answered in %v; waiting until nothing is pending --\n", len(ops), time.Since(load.began).Round(100*time.Millisecond))
	if err := d.drain(ctx); err != nil {
		return nil, err
	}
	res.drained = time.Now()
	stopProgress()
	d.out.Printf("  -- nothing pending after %v; stopping the workers --\n", res.drained.Sub(load.began).Round(100*time.Millisecond))
	stopAll()
	return res, nil
}

// drain waits until no request is new or in-progress.
func (d *sheetsDemo) drain(ctx context.Context) error {
	tick := time.NewTicker(drainPoll)
	defer tick.Stop()
	for {
		counts, err := d.svc.q.Counts(ctx)
		if err == nil && counts[queue.StatusNew]+counts[queue.StatusInProgress] == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("requests still pending (%v): %w", counts, ctx.Err())
		case <-tick.C:
		}
	}
}

// progress prints a line every second until the returned function is
// called, and says when a worker dies.
func (d *sheetsDemo) progress(ctx context.Context, load *sheetsLoad) (stop func()) {
	began := time.Now()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
				d.progressLine(ctx, time.Since(began), load)
			}
		}
	}()
	go func() {
		defer wg.Done()
		if !d.opts.kill {
			return
		}
		select {
		case <-d.svc.kill.dead:
			sw := d.svc.kill.victim
			dd := sw.death
			d.out.Printf("  -- worker %d DIED in the middle of the %s job of %s (token %d, %d request(s)): its Spanner client is cut off "+
				"and its handler hangs; the others may take the sheet over %v after its last renewal --\n",
				sw.n, dd.kind, dd.sheet, dd.token, len(dd.requests), d.opts.lease)
		case <-done:
		case <-ctx.Done():
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			wg.Wait()
		})
	}
}

// progressLine prints the calls sent, the queue's counts and each worker's
// jobs.
func (d *sheetsDemo) progressLine(ctx context.Context, elapsed time.Duration, load *sheetsLoad) {
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	counts, err := d.svc.q.Counts(cctx)
	cancel()
	var b strings.Builder
	fmt.Fprintf(&b, "  %3.0fs  sent %d/%d | ", elapsed.Seconds(), load.sent.Load(), load.total)
	if err != nil {
		fmt.Fprintf(&b, "queue unreadable (%s)", oneLine(err.Error(), 60))
	} else {
		enq := counts[queue.StatusNew] + counts[queue.StatusInProgress] + counts[queue.StatusComplete] + counts[queue.StatusError]
		fmt.Fprintf(&b, "enqueued %d  new %d  in-progress %d  complete %d  error %d",
			enq, counts[queue.StatusNew], counts[queue.StatusInProgress], counts[queue.StatusComplete], counts[queue.StatusError])
	}
	b.WriteString("  | jobs")
	for _, sw := range d.svc.workers {
		fmt.Fprintf(&b, "  w%d %d", sw.n, sw.w.Stats().Jobs)
		if sw.didCrash() {
			b.WriteString(" (dead)")
		}
	}
	d.out.Printf("%s\n", b.String())
}
