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
// client. Armed, it dies at its next job: in the middle of it, holding the
// claim and the sheet's lease, before it touches the sheet.
type sheetsWorker struct {
	n       int
	client  *spanner.Client
	part    *partition // cuts the client off when the worker dies
	q       *queue.Queue
	w       *queue.Worker
	backend *sheets.Backend
	cancel  context.CancelFunc
	done    chan error // Run's result

	armed    atomic.Bool
	died     atomic.Bool
	crashed  chan struct{} // closed once it has died; death is then set
	death    death
	revive   chan struct{} // closed to wake the dead worker up
	wakeOnce sync.Once
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

// handle is the worker's queue.Handler: the back end's, unless the worker
// is armed to die.
func (sw *sheetsWorker) handle(ctx context.Context, job *queue.Job) error {
	if sw.armed.Load() && sw.died.CompareAndSwap(false, true) {
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
	close(sw.crashed)
	<-sw.revive
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
func (sw *sheetsWorker) didCrash() bool {
	select {
	case <-sw.crashed:
		return true
	default:
		return false
	}
}

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
	l.c.printf("%s%s", l.prefix, p)
	return len(p), nil
}
