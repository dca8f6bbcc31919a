package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/spanner"

	"github.com/spanmutex/spanmutex/examples/spreadsheets/sheets"
	"github.com/spanmutex/spanmutex/queue"
)

// sheetsWorker is one back-end worker of the demo, with its own Spanner
// client. Once the kill switch is armed, the first worker to start a job
// dies in the middle of it: holding the claim and the sheet's lease, before
// it touches the sheet.
type sheetsWorker struct {
	n       int
	client  *spanner.Client
	part    *partition // cuts the client off when the worker dies
	q       *queue.Queue
	w       *queue.Worker
	backend *sheets.Backend
	cancel  context.CancelFunc
	done    chan error // Run's result

	kill     *killSwitch
	death    death         // set before kill.dead is closed, if this worker died
	revive   chan struct{} // closed to wake the dead worker up
	wakeOnce sync.Once
	zombie   bool // when woken, do the job anyway (sheetsDemoOptions.zombieWrites)
}

// killSwitch kills one worker: armed, it kills the first worker that starts
// a job.
type killSwitch struct {
	armed  atomic.Bool
	victim *sheetsWorker // set before dead is closed
	dead   chan struct{} // closed once a worker has died
}

// newKillSwitch returns a kill switch, disarmed.
func newKillSwitch() *killSwitch { return &killSwitch{dead: make(chan struct{})} }

// killed returns the worker that died, or nil.
func (k *killSwitch) killed() *sheetsWorker {
	select {
	case <-k.dead:
		return k.victim
	default:
		return nil
	}
}

// death is what a worker held when it died.
type death struct {
	sheet    string
	kind     queue.Kind
	token    int64
	requests []string
	at       time.Time // by the local clock, for display
}

// errWorkerDied is what a dead worker's handler returns when it is woken
// up at the end of the demo: it did nothing.
var errWorkerDied = errors.New("demo: this worker died mid-job and did nothing")

// handle is the worker's queue.Handler: the back end's, unless the kill
// switch picks this worker to die.
func (sw *sheetsWorker) handle(ctx context.Context, job *queue.Job) error {
	if sw.kill.armed.CompareAndSwap(true, false) {
		return sw.die(job)
	}
	return sw.backend.Handle(ctx, job)
}

// die is a crash in the middle of job: the worker's client is cut off from
// Spanner, so it can neither renew its lease nor record anything, and its
// handler hangs, ignoring its context as a dead process would, until the
// demo wakes it up at the end.
func (sw *sheetsWorker) die(job *queue.Job) error {
	sw.part.cut.Store(true)
	d := death{sheet: job.Resource, kind: job.Kind, token: job.Token(), at: time.Now()}
	for _, r := range job.Requests {
		d.requests = append(d.requests, r.ID)
	}
	sw.death = d
	sw.kill.victim = sw
	close(sw.kill.dead)
	<-sw.revive
	if sw.zombie {
		// Broken on purpose: the lease is long gone, but the handler
		// writes with its old token all the same.
		return sw.backend.Handle(context.Background(), job)
	}
	return errWorkerDied
}

// wake reconnects the worker and wakes its hung handler, if it died.
func (sw *sheetsWorker) wake() {
	sw.wakeOnce.Do(func() {
		sw.part.cut.Store(false)
		close(sw.revive)
	})
}

// didCrash reports whether the worker has died.
func (sw *sheetsWorker) didCrash() bool { return sw.kill.killed() == sw }

// workerLogger returns worker n's logger: its lines on the console with
// verbose, nowhere otherwise.
func (c *console) workerLogger(n int, verbose bool) *slog.Logger {
	if !verbose {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return slog.New(slog.NewTextHandler(&linePrefixer{c: c, prefix: "  [worker " + strconv.Itoa(n) + "] "}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// linePrefixer writes each line given to it on the console, prefixed.
type linePrefixer struct {
	c      *console
	prefix string
}

// Write prints p (whole lines, as slog writes them) with the prefix.
func (l *linePrefixer) Write(p []byte) (int, error) {
	l.c.Printf("%s%s", l.prefix, p)
	return len(p), nil
}
