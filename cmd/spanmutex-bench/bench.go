package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"cloud.google.com/go/spanner"
	"google.golang.org/api/option"

	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/emulator"
	"github.com/spanmutex/spanmutex/internal/bench"
	"github.com/spanmutex/spanmutex/internal/cmdline"
)

// benchHelp is the help of "spanmutex-bench".
var benchHelp = cmdline.HelpText{
	Usage: "spanmutex-bench [flags]",
	About: `Measures what a lock costs under contention, for spanmutex's Lock and for the
naive lock most libraries implement: a read-write transaction that takes the
lock's row if it is free, and otherwise a retry after a randomised exponential
backoff (from 10ms, doubling, at most 1s, full jitter).

For each number of contenders N in --contenders, and for each lock, it runs N
goroutines spread over --clients Spanner clients, each acquiring one lock and
releasing it at once, again and again, for --duration. Lock calls still waiting
then get 5s to complete and are cancelled. Each run uses a lock name of its own
and fresh clients. It prints a line as each run starts and ends, then a table
per run: acquisitions and acquisitions per second; Commit RPCs, read RPCs and
all Spanner RPCs per acquisition, counted by gRPC method on the run's clients;
the p50 and p99 wait for the lock; FIFO violations (acquisitions made while
another contender that called Lock at least 100ms earlier was still waiting);
and the p50 and p99 hand-off latency, from the commit of a release to the next
holder's Lock returning. A second table gives, per N, the naive lock's commits
and RPCs per acquisition as multiples of spanmutex's, and spanmutex's
acquisitions per second as a multiple of the naive lock's.

It starts an embedded Cloud Spanner emulator for each run, unless --database
(or $SPANMUTEX_DATABASE) names a database that holds the mutex table and its
queue table, or $SPANNER_EMULATOR_HOST names a running emulator. The emulator
runs one read-write transaction at a time and aborts the others, so abort rates
exceed production Spanner's: compare the two locks within a run rather than the
absolute figures. Its commit timestamps also drift ahead of the real clock as it
commits, and its strong reads wait for them: a fresh emulator per run keeps one
run from slowing the next (the COMMIT TS AHEAD column shows the drift).

Each run takes --duration, plus up to a minute while the cancelled waiters of a
crowded run clean up; with the defaults the benchmark takes 5 to 10 minutes.
Ctrl-C stops it, printing the runs completed so far.`,
	After: `Exit status: 0 if every run completed without a Lock or Unlock error, 1 if one
failed or an error occurred (the tables are still printed), 2 on a usage error.

Examples:
  spanmutex-bench
  spanmutex-bench --contenders 1,10 --duration 5s
  spanmutex-bench --database "$SPANMUTEX_DATABASE" --clients 4   # e.g. from 'spanmutex emulator'`,
}

// benchOptions are the flags of "spanmutex-bench".
type benchOptions struct {
	database   string
	table      string
	contenders contenderList
	duration   time.Duration
	clients    int
}

// benchFlags defines the flags of "spanmutex-bench" on a new flag set.
func benchFlags() (*flag.FlagSet, *benchOptions) {
	o := &benchOptions{contenders: bench.DefaultContenders()}
	fs := cmdline.NewFlagSet(command)
	fs.Var(&o.contenders, "contenders", fmt.Sprintf("the numbers of contenders to run, as a comma-separated `list` of 1 to %d", bench.MaxContenders))
	fs.DurationVar(&o.duration, "duration", bench.DefaultDuration, "how long each run starts new Lock calls")
	fs.IntVar(&o.clients, "clients", bench.DefaultClients, "how many Spanner clients the contenders of a run are spread over, 1 to 100")
	fs.StringVar(&o.database, "database", "",
		"use this database, which must hold the mutex table and its queue table, instead of an embedded emulator (default $"+cmdline.DatabaseEnv+"; \"\": the embedded emulator)")
	fs.StringVar(&o.table, "table", ddl.DefaultMutexTable, "the mutex table (its queue table is named after it)")
	return fs, o
}

// validate checks the bench's flags.
func (o *benchOptions) validate() error {
	switch {
	case o.duration <= 0:
		return cmdline.Usagef(command, "--duration %v: must be positive", o.duration)
	case o.clients < 1 || o.clients > 100:
		return cmdline.Usagef(command, "--clients %d: want 1 to 100", o.clients)
	}
	return cmdline.ValidateTable(command, o.table)
}

// contenderList is the value of --contenders.
type contenderList []int

// String returns the list as it is written on the command line.
func (l *contenderList) String() string {
	s := make([]string, len(*l))
	for i, n := range *l {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

// Set parses a comma-separated list of numbers of contenders.
func (l *contenderList) Set(v string) error {
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > bench.MaxContenders {
			return fmt.Errorf("%q: want whole numbers from 1 to %d, separated by commas, as in 1,10,100", f, bench.MaxContenders)
		}
		out = append(out, n)
	}
	*l = out
	return nil
}

// run is the whole command line of spanmutex-bench: it returns the exit status.
func run(ctx context.Context, s cmdline.Streams, args []string) int {
	fs, o := benchFlags()
	if code, done := cmdline.ParseOnlyFlags(s, command, fs, benchHelp, args); done {
		return code
	}
	if err := o.validate(); err != nil {
		return cmdline.ReportError(s, err, cmdline.ExitUsage)
	}
	db, err := cmdline.OptionalDatabase(command, fs, o.database)
	if err != nil {
		return cmdline.ReportError(s, err, cmdline.ExitUsage)
	}
	o.database = db

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg := bench.Config{
		Contenders: o.contenders,
		Clients:    o.clients,
		Duration:   o.duration,
		Table:      o.table,
		Progress:   s.Stdout,
	}
	if o.database != "" {
		fmt.Fprintf(s.Stdout, "Using database %s (%s).\n", o.database, cmdline.ConnectionHint())
		cfg.NewClient = func(ctx context.Context, opts ...option.ClientOption) (*spanner.Client, error) {
			return cmdline.OpenClient(ctx, o.database, opts...)
		}
	} else {
		if os.Getenv(cmdline.EmulatorHostEnv) == "" {
			fmt.Fprintln(s.Stdout, "Each run gets an emulator of its own: the emulator's commit timestamps drift ahead of the real\n"+
				"clock as it commits, and its strong reads wait for them, so a long-used emulator slows later runs.")
		}
		cfg.PerRun = func(ctx context.Context) (bench.Opener, func(), error) {
			return runEmulator(ctx, s.Stdout)
		}
	}

	began := time.Now()
	results, err := bench.Run(ctx, cfg)
	if len(results) > 0 {
		fmt.Fprintln(s.Stdout)
		if ferr := bench.Format(s.Stdout, results); ferr != nil {
			return cmdline.ReportError(s, ferr, cmdline.ExitError)
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("bench stopped: %w: %w", context.Cause(ctx), err)
		}
		return cmdline.ReportError(s, cmdline.ExplainConnection(err), cmdline.ExitError)
	}
	failed := 0
	for _, r := range results {
		failed += r.Errors
	}
	if failed > 0 {
		fmt.Fprintf(s.Stderr, "spanmutex: %d Lock or Unlock calls failed during the runs; see ERRORS above\n", failed)
		return cmdline.ExitError
	}
	fmt.Fprintf(s.Stdout, "\nCompleted %d runs in %v.\n", len(results), time.Since(began).Round(time.Second))
	return cmdline.ExitOK
}

// runEmulator starts an emulator for one run (or, if $SPANNER_EMULATOR_HOST
// is set, attaches to that one), with a new database holding the mutex
// table. It says which on out, and returns how to open clients of the
// database and a function that stops what it started.
func runEmulator(ctx context.Context, out io.Writer) (bench.Opener, func(), error) {
	emu, err := emulator.Start(ctx)
	if err != nil {
		return nil, nil, err
	}
	db := emu.Database()
	if emu.Started() {
		fmt.Fprintf(out, "Started the Cloud Spanner emulator at %s (pid %d), with database %s.\n", emu.Host(), emu.PID(), db)
	} else {
		fmt.Fprintf(out, "Using the Cloud Spanner emulator at %s=%s (its clock drift carries over from run to run), with database %s.\n",
			cmdline.EmulatorHostEnv, emu.Host(), db)
	}
	return func(ctx context.Context, opts ...option.ClientOption) (*spanner.Client, error) {
		return emu.NewClient(ctx, db, opts...)
	}, func() { _ = emu.Close() }, nil
}
