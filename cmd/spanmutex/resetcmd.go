package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/spanner"

	"github.com/spanmutex/spanmutex"
	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/internal/cmdline"
	"github.com/spanmutex/spanmutex/internal/defaults"
	"github.com/spanmutex/spanmutex/internal/names"
)

// resetHelp is the help of "spanmutex reset".
var resetHelp = helpText{
	Usage: "spanmutex reset [flags] NAME",
	About: `Re-arms the critical section NAME after it failed or gave up ("spanmutex run"
exited 75): its row becomes NEEDED with no attempt counted, so the next
"spanmutex run NAME" runs COMMAND again with --max-attempts fresh attempts.
The fencing token is kept, so the next run gets a higher one.

It is fenced like an acquisition, in one read-write transaction on Spanner's
clock: it refuses a row STARTED by a holder that renewed its lease within
--lease (a live holder is never cut off) and says who holds it; a
holder silent for longer is cut off, and its late result is rejected. It
refuses a DONE row (nothing to re-arm: use a new NAME or 'run --version'),
a NAME that has no row, and a semaphore or reader-writer lock ('spanmutex
lock --permits', '--shared', '--rw'), which needs no reset: a holder of
it silent past its lease loses it to the next waiter.

--force breaks the lease of a holder you know is dead (killed while holding
with a long --lease): it resets a STARTED row whatever its lease, bumps the
token so the evicted holder's fenced writes fail (its Guard at once, a
Fence once a newer token was admitted), and prints the evicted owner and
token. A holder that is alive after all loses its lease at its next
renewal, but may still be running COMMAND when the next holder starts it.`,
	After: `Exit status: 0 if the row was reset, 1 if it was refused or on any other
error (stderr says why), 2 on a usage error.

Examples:
  spanmutex reset migrate-v42
  spanmutex reset --lease 30m backfill-2024
  spanmutex reset --force deploy-prod`,
}

// cmdReset is "spanmutex reset [flags] NAME".
func cmdReset(ctx context.Context, s streams, args []string) int {
	fs := newFlagSet("reset")
	database := cmdline.AddDatabaseFlag(fs)
	table := fs.String("table", ddl.DefaultMutexTable, "the mutex table")
	lease := fs.Duration("lease", defaults.Lease,
		"a STARTED holder that renewed its lease within this long, by Spanner's clock, is live and is not reset; use the --lease NAME runs with")
	force := fs.Bool("force", false, "reset a STARTED row even within its lease: evict a holder known to be dead, bumping the token")
	connect := cmdline.AddConnectTimeoutFlag(fs)
	positional, code, done := parseFlags(s, "reset", fs, resetHelp, args)
	if done {
		return code
	}
	if len(positional) != 1 {
		return cmdline.ReportUsage(s, usage("reset", fmt.Sprintf("want exactly one NAME, got %d argument(s)", len(positional))))
	}
	name := positional[0]
	if err := names.Name(name); err != nil {
		return cmdline.ReportUsage(s, badName("reset", err))
	}
	if err := checkLease("reset", *lease); err != nil {
		return cmdline.ReportError(s, err, exitError)
	}
	client, err := connectFor(ctx, "reset", fs, *database, *table, *connect)
	if err != nil {
		return cmdline.ReportError(s, err, exitError)
	}
	defer client.Close()
	m, err := spanmutex.New(client, name, spanmutex.WithTable(*table), spanmutex.WithLease(*lease))
	if errors.Is(err, spanmutex.ErrInvalidConfig) {
		return cmdline.ReportUsage(s, configUsage("reset", err))
	}
	if err != nil {
		return cmdline.ReportError(s, err, exitError)
	}
	reset := m.Reset
	if *force {
		reset = m.ForceReset
	}
	res, err := reset(ctx)
	if errors.Is(err, spanmutex.ErrResetRefused) {
		fmt.Fprintf(s.Stderr, "%s\nspanmutex: the row of %q is unchanged\n", cmdline.ErrorLine(err), name)
		return exitError
	}
	if err != nil {
		err = explainResetKind(ctx, client, *table, name, *connect, err)
		return cmdline.ReportError(s, cmdline.ExplainConnection(err), exitError)
	}
	if res.Evicted != "" {
		how := "silent past its lease"
		if res.Forced {
			how = "forced out within its lease; the token is bumped past it"
		}
		fmt.Fprintf(s.Stderr, "spanmutex: %q: evicted holder %q (token %d), %s\n", name, res.Evicted, res.Token, how)
	}
	fmt.Fprintf(s.Stderr, "spanmutex: %q reset: it was %s after %d attempt(s) (token %d); it is now NEEDED with no attempt counted, and the next run starts it\n",
		name, res.Before, res.Attempts, res.Token)
	if res.LastError != "" {
		fmt.Fprintf(s.Stderr, "spanmutex: its last error was: %s\n", oneLine(res.LastError, 200))
	}
	return exitOK
}

// explainResetKind returns err, or a *kindError if reset failed because
// NAME (of table) is a semaphore's or reader-writer lock's row, which
// reset does not re-arm: the library says so in words that name neither
// kind and wraps them twice under "spanmutex:", with no type to tell them
// by, so the row is read, once within timeout.
func explainResetKind(ctx context.Context, client *spanner.Client, table, name string, timeout time.Duration, err error) error {
	if ctx.Err() != nil || errors.Is(err, spanmutex.ErrUnreachable) || errors.Is(err, spanmutex.ErrNotFound) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	rows, rerr := spanmutex.Inspect(rctx, client, name, spanmutex.WithTable(table))
	if rerr != nil || len(rows) != 1 || rows[0].State != spanmutex.StateShared {
		return err
	}
	const notRunOnce = "not a run-once section: reset re-arms only those ('spanmutex run')"
	if rows[0].Permits == rwLockSize {
		return &kindError{err: err, hint: fmt.Sprintf("%q is a reader-writer lock, %s; a reader-writer lock needs no reset: a holder silent past its lease loses it to the next waiter",
			name, notRunOnce)}
	}
	return &kindError{err: err, hint: fmt.Sprintf("%q is a semaphore of %d permits, %s; a semaphore needs no reset: a holder silent past its lease loses its permits to the next waiter",
		name, rows[0].Permits, notRunOnce)}
}
