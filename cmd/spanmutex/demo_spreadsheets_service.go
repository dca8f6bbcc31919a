package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"cloud.google.com/go/spanner"
	"google.golang.org/api/option"
	"google.golang.org/grpc/codes"

	"github.com/spanmutex/spanmutex"
	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/emulator"
	"github.com/spanmutex/spanmutex/examples/spreadsheets/sheets"
	"github.com/spanmutex/spanmutex/internal/cmdline"
	"github.com/spanmutex/spanmutex/queue"
)

// sheetsService is the spreadsheet service the demo runs in-process: the
// front end (its own Spanner client and Queue, behind a real HTTP server on
// a loopback port), the stand-in spreadsheet store, and the workers.
type sheetsService struct {
	front   *spanner.Client
	q       *queue.Queue // the front end's; the checks read through it too
	store   *sheets.Store
	backend *sheets.Backend
	server  *http.Server
	api     *sheets.Server // the front end's handler
	url     string         // the front end's base URL
	workers []*sheetsWorker
	kill    *killSwitch // shared by the workers
	serving chan error  // Serve's result
}

// Timings of the demo's workers: the front end wakes them (WithNotify), so
// polling only backs that up; a handler gets little grace at shutdown.
const (
	sheetsMinPoll       = 50 * time.Millisecond
	sheetsMaxPoll       = 500 * time.Millisecond
	sheetsShutdownGrace = time.Second
)

// setUp connects to the embedded emulator or --database, checks the
// schema, and builds the service: clients, queues, workers, store, and the
// HTTP server, listening. It returns a function that closes everything.
func (d *sheetsDemo) setUp(ctx context.Context) (_ func(), err error) {
	var closers []func()
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	defer func() {
		if err != nil {
			closeAll()
		}
	}()
	newClient, err := d.connect(ctx, func(f func()) { closers = append(closers, f) })
	if err != nil {
		return nil, err
	}
	svc := &sheetsService{kill: newKillSwitch()}
	if svc.front, err = newClient(ctx); err != nil {
		return nil, err
	}
	closers = append(closers, svc.front.Close)
	if svc.q, err = queue.New(svc.front); err != nil {
		return nil, err
	}
	if err := checkRequestsTable(ctx, svc.q); err != nil {
		return nil, err
	}
	if svc.store, err = d.newSheetsStore(); err != nil {
		return nil, err
	}
	if svc.backend, err = sheets.NewBackend(svc.store); err != nil {
		return nil, err
	}
	for n := 1; n <= d.opts.workers; n++ {
		sw, err := d.newWorker(ctx, n, svc, newClient)
		if err != nil {
			return nil, err
		}
		closers = append(closers, sw.client.Close)
		svc.workers = append(svc.workers, sw)
	}
	d.out.Printf("Opened %d Spanner clients: the front end's and one per worker.\n", len(svc.workers)+1)

	srv, err := sheets.NewServer(svc.q, svc.store, sheets.WithNotify(func() {
		for _, sw := range svc.workers {
			sw.q.Notify() // the seed's NOTIFY: wake every worker, not only the front end's queue's
		}
	}))
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen on a loopback port: %w", err)
	}
	svc.api = srv
	svc.server = &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	svc.url = "http://" + ln.Addr().String()
	svc.serving = make(chan error, 1)
	go func() { svc.serving <- svc.server.Serve(ln) }()
	closers = append(closers, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = svc.server.Shutdown(sctx)
		<-svc.serving
	})
	d.out.Printf("The front end serves %s (POST /sheets, POST /sheets/{id}/updates, GET /sheets/{id}).\n", svc.url)
	d.svc = svc
	return closeAll, nil
}

// connect starts the embedded emulator, with the requests table in its
// database, or uses --database, and returns how to open a client of it.
// Whatever must be closed is handed to onClose.
func (d *sheetsDemo) connect(ctx context.Context, onClose func(func())) (func(context.Context, ...option.ClientOption) (*spanner.Client, error), error) {
	if db := d.opts.database; db != "" {
		d.out.Printf("Using database %s (%s).\n", db, cmdline.ConnectionHint())
		return func(ctx context.Context, opts ...option.ClientOption) (*spanner.Client, error) {
			return cmdline.OpenClient(ctx, db, opts...)
		}, nil
	}
	reqs, err := ddl.RequestsStatements(ddl.DefaultRequestsTable)
	if err != nil {
		return nil, err
	}
	emu, err := emulator.Start(ctx, emulator.WithDDL(reqs...))
	if err != nil {
		return nil, err
	}
	onClose(func() { _ = emu.Close() })
	if emu.Started() {
		d.out.Printf("Started the Cloud Spanner emulator at %s (pid %d).\n", emu.Host(), emu.PID())
	} else {
		d.out.Printf("Using the Cloud Spanner emulator at %s=%s.\n", cmdline.EmulatorHostEnv, emu.Host())
	}
	db := emu.Database()
	d.out.Printf("Created database %s with the mutex and requests tables.\n", db)
	return func(ctx context.Context, opts ...option.ClientOption) (*spanner.Client, error) {
		return emu.NewClient(ctx, db, opts...)
	}, nil
}

// checkRequestsTable reads the queue once, so that a database without the
// requests table is reported once, with how to create it.
func checkRequestsTable(ctx context.Context, q *queue.Queue) error {
	_, err := q.Counts(ctx)
	if err == nil {
		return nil
	}
	if spanner.ErrCode(err) == codes.NotFound || spanner.ErrCode(err) == codes.InvalidArgument {
		return fmt.Errorf("%w\nthe database needs the requests table %s of package queue and the mutex tables: "+
			"print their schema with 'spanmutex ddl --requests %s'", err, q.Table(), q.Table())
	}
	return cmdline.ExplainConnection(err)
}

// newWorker opens worker n's own client, cut off from Spanner by its
// partition when it is killed, and its queue and worker.
func (d *sheetsDemo) newWorker(ctx context.Context, n int, svc *sheetsService,
	newClient func(context.Context, ...option.ClientOption) (*spanner.Client, error)) (*sheetsWorker, error) {
	sw := &sheetsWorker{n: n, part: &partition{}, backend: svc.backend, kill: svc.kill, revive: make(chan struct{}),
		done: make(chan error, 1), zombie: d.opts.zombieWrites}
	c, err := newClient(ctx, sw.part.clientOption()...)
	if err != nil {
		return nil, err
	}
	sw.client = c
	id := fmt.Sprintf("worker-%d-%s", n, d.suffix)
	q, err := queue.New(c, queue.WithLockOptions(
		spanmutex.WithLease(d.opts.lease),
		spanmutex.WithLogger(d.out.workerLogger(n, d.opts.verbose)),
	))
	if err == nil {
		sw.q = q
		sw.w, err = q.NewWorker(sw.handle,
			queue.WithWorkerID(id),
			queue.WithPollInterval(sheetsMinPoll, sheetsMaxPoll),
			queue.WithShutdownGrace(sheetsShutdownGrace),
			queue.WithLogger(d.out.workerLogger(n, d.opts.verbose)),
		)
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	return sw, nil
}

// start runs every worker until ctx ends.
func (s *sheetsService) start(ctx context.Context) {
	for _, sw := range s.workers {
		wctx, cancel := context.WithCancel(ctx)
		sw.cancel = cancel
		go func() { sw.done <- sw.w.Run(wctx) }()
	}
}

// stop stops every worker and waits for them. The killed one is first
// reconnected and woken up, as a crashed process that comes back: its
// handler returns without touching the sheet, and its worker tries to
// record the outcome of a claim it no longer holds, which the queue's
// fencing must reject. It returns the killed worker's Run error, if any.
func (s *sheetsService) stop(ctx context.Context) error {
	var zombieErr error
	for _, sw := range s.workers {
		sw.cancel()
	}
	for _, sw := range s.workers {
		sw.wake()
	}
	for _, sw := range s.workers {
		select {
		case err := <-sw.done:
			if err != nil && sw.didCrash() {
				zombieErr = err
			} else if err != nil && !errors.Is(err, context.Canceled) {
				return fmt.Errorf("worker %d: %w", sw.n, err)
			}
		case <-ctx.Done():
			return fmt.Errorf("worker %d did not stop: %w", sw.n, ctx.Err())
		}
	}
	return zombieErr
}
