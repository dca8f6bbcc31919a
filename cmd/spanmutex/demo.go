package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/google/uuid"

	"github.com/spanmutex/spanmutex"
	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/emulator"
	"github.com/spanmutex/spanmutex/internal/cmdline"
)

// demoHelp is the help of "spanmutex demo".
var demoHelp = helpText{
	Usage: "spanmutex demo [flags]\n       spanmutex demo spreadsheets [flags]",
	About: `Shows spanmutex at work. It starts an embedded Cloud Spanner emulator (or uses
--database):

  1. --instances replicas of a service, each a separate OS process (this
     program, started again) with its own Spanner client, start at the same
     moment and each runs the schema migrations of release 1 (DDL, a seed and
     a backfill) with golang-migrate and its spanner driver, under the
     spanmutex lock of package migrations. One applies them; the others wait
     their turn and find nothing to do. It checks the version, that it is not
     dirty, and that the backfill ran once.
  2. Release 2 adds a DDL migration and a backfill; its replicas race again,
     and it too is applied exactly once.
  3. Instances race on a run-once mutex and the first holder crashes
     mid-migration. After the lease, by Spanner's clock, another instance
     takes over with a higher fencing token and completes it; when the
     crashed holder wakes up, its late result is rejected.

The migrations run on a database of their own (on --database, a new one in
the same instance, dropped at the end), and mutex names are fresh, so the demo
can be repeated. It checks what it shows and exits 1 if any check fails.

"spanmutex demo spreadsheets" runs the request-queue example instead: an HTTP
front end and several workers create and update hundreds of spreadsheets while
one worker is killed; see 'spanmutex demo spreadsheets --help'.`,
	After: `Exit status: 0 if every check passed, 1 if one failed or an error occurred,
2 on a usage error.

Examples:
  spanmutex demo
  spanmutex demo --instances 16 --lease 3s
  spanmutex demo --database "$SPANMUTEX_DATABASE"   # e.g. from 'spanmutex emulator'
  spanmutex demo spreadsheets                       # the request queue under load, with a killed worker`,
}

// demoOptions are the flags of "spanmutex demo".
type demoOptions struct {
	database  string
	table     string
	instances int
	lease     time.Duration
	work      time.Duration
	timeout   time.Duration
	verbose   bool
}

// demoFlags defines the flags of "spanmutex demo" on a new flag set.
func demoFlags() (*flag.FlagSet, *demoOptions) {
	o := &demoOptions{}
	fs := newFlagSet("demo")
	fs.StringVar(&o.database, "database", "",
		"use this database, which must hold the mutex table, instead of an embedded emulator (default $"+cmdline.DatabaseEnv+"; \"\": the embedded emulator)")
	fs.StringVar(&o.table, "table", ddl.DefaultMutexTable, "the mutex table")
	fs.IntVar(&o.instances, "instances", 8, "how many service instances to simulate, 3 to 100")
	fs.DurationVar(&o.lease, "lease", 2*time.Second, "how long a silent holder keeps the mutex before a takeover")
	fs.DurationVar(&o.work, "work", 300*time.Millisecond, "how long the migration takes; below --lease")
	fs.DurationVar(&o.timeout, "timeout", time.Minute, "give up if the demo has not finished by then")
	fs.BoolVar(&o.verbose, "verbose", false, "also show every decision the mutexes log")
	return fs, o
}

// validate checks the demo's flags.
func (o *demoOptions) validate() error {
	switch {
	case o.instances < 3 || o.instances > 100:
		return usagef("demo", "--instances %d: want 3 to 100 (one crashes, one takes over, the rest must see AlreadyDone)", o.instances)
	case o.lease <= 0:
		return usagef("demo", "--lease %v: must be positive", o.lease)
	case o.work < 0 || o.work >= o.lease:
		return usagef("demo", "--work %v: must be at least 0 and below --lease (%v), or the migration is taken over while it runs", o.work, o.lease)
	case o.timeout <= 0:
		return usagef("demo", "--timeout %v: must be positive", o.timeout)
	}
	return cmdline.ValidateTable(fullCommand("demo"), o.table)
}

// cmdDemo is "spanmutex demo [flags]", or "spanmutex demo spreadsheets
// [flags]" (demo_spreadsheets.go).
func cmdDemo(ctx context.Context, s streams, args []string) int {
	if len(args) > 0 && args[0] == "spreadsheets" {
		return cmdDemoSpreadsheets(ctx, s, args[1:])
	}
	if len(args) > 0 && args[0] == "replica" {
		return cmdDemoReplica(ctx, s, args[1:])
	}
	fs, o := demoFlags()
	positional, code, done := parseFlags(s, "demo", fs, demoHelp, args)
	if done {
		return code
	}
	if len(positional) > 0 && positional[0] == "spreadsheets" {
		return cmdline.ReportUsage(s, usage("demo", "put the scenario first, before its flags: spanmutex demo spreadsheets [flags]"))
	}
	if len(positional) > 0 {
		return cmdline.ReportUsage(s, usage("demo", fmt.Sprintf("unexpected argument %q", positional[0])))
	}
	if err := o.validate(); err != nil {
		return cmdline.ReportError(s, err, exitUsage)
	}
	db, err := cmdline.OptionalDatabase(fullCommand("demo"), fs, o.database)
	if err != nil {
		return cmdline.ReportError(s, err, exitUsage)
	}
	o.database = db

	ctx, cancel := demoContext(ctx, o.timeout)
	defer cancel()
	began := time.Now()
	d := &demo{out: newConsole(s.Stdout), opts: o, suffix: uuid.NewString()[:8]}
	closeClients, err := d.connect(ctx)
	if err != nil {
		return cmdline.ReportError(s, err, exitError)
	}
	defer closeClients()

	ok, err := d.run(ctx)
	if err != nil {
		return cmdline.ReportError(s, demoStopped(ctx, err), exitError)
	}
	elapsed := time.Since(began).Round(100 * time.Millisecond)
	if !ok {
		d.out.Printf("\nSummary: FAILED: at least one check did not hold (%v). See the FAIL lines above.\n", elapsed)
		return exitError
	}
	d.out.Printf("\nSummary: each release's migrations were applied exactly once by golang-migrate, and the crashed holder was taken over; all %d checks passed (%v).\n", d.checks, elapsed)
	return exitOK
}

// demoContext is ctx, cancelled also by SIGINT or SIGTERM and after timeout.
func demoContext(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	return ctx, func() { cancel(); stop() }
}

// demoStopped says why a demo failed with err: if its ctx ended, that is
// why (a signal or the timeout).
func demoStopped(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("demo stopped: %w: %w", context.Cause(ctx), err)
	}
	return err
}

// demo is one run of the demonstration.
type demo struct {
	out        *console
	opts       *demoOptions
	suffix     string             // makes this run's mutex names unique
	emu        *emulator.Emulator // the embedded emulator; nil with --database
	clients    []*spanner.Client  // one per simulated instance
	partitions []*partition       // one per client, to simulate a crash
	checks     int                // how many checks passed
}

// run plays both scenarios and reports whether every check held.
func (d *demo) run(ctx context.Context) (bool, error) {
	// Inspect checks the table first: a missing schema is reported once,
	// with how to create it, instead of by every instance.
	if _, err := spanmutex.Inspect(ctx, d.clients[0], "demo-"+d.suffix, spanmutex.WithTable(d.opts.table)); err != nil {
		return false, cmdline.ExplainConnection(err)
	}
	ok1, err := d.migrationScenarios(ctx)
	if err != nil {
		return false, err
	}
	ok2, err := d.takeoverScenario(ctx)
	if err != nil {
		return false, err
	}
	return ok1 && ok2, nil
}

// mutex returns instance i's Mutex for name, with the demo's settings.
func (d *demo) mutex(i int, name string) (*spanmutex.Mutex, error) {
	return spanmutex.New(d.clients[i-1], name,
		spanmutex.WithTable(d.opts.table),
		spanmutex.WithOwner(ownerOf(i)),
		spanmutex.WithLease(d.opts.lease),
		spanmutex.WithJitter(0.1),
		spanmutex.WithLogger(d.out.logger(i, d.opts.verbose)),
	)
}

// ownerOf is the owner identity of simulated instance i.
func ownerOf(i int) string { return fmt.Sprintf("instance-%d", i) }

// migrate stands for the migration's work: it takes d.opts.work, or until
// ctx ends. The timer is the work being simulated, not synchronisation.
func (d *demo) migrate(ctx context.Context) error {
	t := time.NewTimer(d.opts.work)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return errors.Join(errors.New("migration interrupted"), ctx.Err())
	}
}
