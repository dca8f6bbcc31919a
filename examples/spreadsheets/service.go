package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"cloud.google.com/go/spanner"

	"github.com/spanmutex/spanmutex"
	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/emulator"
	"github.com/spanmutex/spanmutex/examples/spreadsheets/sheets"
	"github.com/spanmutex/spanmutex/queue"
)

// run serves the front end and runs the workers until ctx ends, then shuts
// both down: the HTTP server first, so that nothing new is accepted, then
// the workers, which finish their jobs in flight.
func run(ctx context.Context, o options) error {
	level := slog.LevelInfo
	if o.verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	newClient, closeDB, err := connect(ctx, o.database, logger)
	if err != nil {
		return err
	}
	defer closeDB()

	front, err := newClient(ctx)
	if err != nil {
		return err
	}
	defer front.Close()
	q, err := queue.New(front)
	if err != nil {
		return err
	}
	store, err := sheets.NewStore(sheets.WithWriteDuration(o.write))
	if err != nil {
		return err
	}
	backend, err := sheets.NewBackend(store)
	if err != nil {
		return err
	}
	queues, workers, closeWorkers, err := newWorkers(ctx, newClient, backend, o, logger)
	if err != nil {
		return err
	}
	defer closeWorkers()

	srv, err := sheets.NewServer(q, store, sheets.WithNotify(func() {
		for _, wq := range queues {
			wq.Notify() // wake every worker at once, not only at its next poll
		}
	}))
	if err != nil {
		return err
	}
	server, url, served, err := serve(o.addr, srv)
	if err != nil {
		return err
	}
	logger.Info("serving", "url", url, "workers", o.workers, "lease", o.lease)
	stopWorkers := startWorkers(ctx, workers)

	select {
	case <-ctx.Done():
	case err := <-served:
		stopWorkers()
		return fmt.Errorf("HTTP server: %w", err)
	}
	logger.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	serr := server.Shutdown(sctx)
	<-served
	errs := stopWorkers()
	sum := store.Summary()
	logger.Info("stopped", "sheets", sum.Sheets, "updates", sum.Updates, "clicks", sum.Clicks, "violations", len(store.Violations()))
	return errors.Join(append(errs, serr)...)
}

// newWorkers makes o.workers workers that handle requests with backend,
// each on a queue of its own client, and returns their queues, the workers
// and a function that closes their clients. On an error it closes the
// clients it opened.
func newWorkers(ctx context.Context, newClient func(context.Context) (*spanner.Client, error), backend *sheets.Backend, o options, logger *slog.Logger) ([]*queue.Queue, []*queue.Worker, func(), error) {
	var (
		clients []*spanner.Client
		queues  []*queue.Queue
		workers []*queue.Worker
	)
	closeClients := func() {
		for _, c := range slices.Backward(clients) {
			c.Close()
		}
	}
	for n := 1; n <= o.workers; n++ {
		c, err := newClient(ctx)
		if err != nil {
			closeClients()
			return nil, nil, nil, err
		}
		clients = append(clients, c)
		wq, err := queue.New(c, queue.WithLockOptions(spanmutex.WithLease(o.lease), spanmutex.WithLogger(logger)))
		if err != nil {
			closeClients()
			return nil, nil, nil, err
		}
		w, err := wq.NewWorker(backend.Handle, queue.WithWorkerID(fmt.Sprintf("worker-%d-%d", n, os.Getpid())), queue.WithLogger(logger))
		if err != nil {
			closeClients()
			return nil, nil, nil, err
		}
		queues, workers = append(queues, wq), append(workers, w)
	}
	return queues, workers, closeClients, nil
}

// serve listens on addr and serves h in the background. It returns the
// server, its URL, and a channel that receives what Serve returned.
func serve(addr string, h http.Handler) (*http.Server, string, <-chan error, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	server := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- server.Serve(ln) }()
	return server, "http://" + ln.Addr().String(), served, nil
}

// startWorkers runs each worker in a goroutine of its own until the
// returned stop is called, even after ctx ends: the workers stop after the
// HTTP server. stop cancels them, waits until they have returned, and
// returns what each Run returned.
func startWorkers(ctx context.Context, workers []*queue.Worker) (stop func() []error) {
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	errs := make([]error, len(workers))
	for i, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = w.Run(wctx)
		}()
	}
	return func() []error {
		cancel()
		wg.Wait()
		return errs
	}
}

// connect returns how to open clients of the database: --database, or a
// database with the requests table on an embedded emulator it starts.
func connect(ctx context.Context, database string, logger *slog.Logger) (func(context.Context) (*spanner.Client, error), func(), error) {
	if database != "" {
		return func(ctx context.Context) (*spanner.Client, error) {
			return spanner.NewClient(ctx, database)
		}, func() {}, nil
	}
	reqs, err := ddl.RequestsStatements(ddl.DefaultRequestsTable)
	if err != nil {
		return nil, nil, err
	}
	emu, err := emulator.Start(ctx, emulator.WithDDL(reqs...))
	if err != nil {
		return nil, nil, err
	}
	logger.Info("emulator", "host", emu.Host(), "database", emu.Database(), "started", emu.Started())
	return func(ctx context.Context) (*spanner.Client, error) {
		return emu.NewClient(ctx, emu.Database())
	}, func() { _ = emu.Close() }, nil
}
