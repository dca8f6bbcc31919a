package main

import (
	"context"
	"fmt"

	"cloud.google.com/go/spanner"

	"github.com/spanmutex/spanmutex"
	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/internal/cmdline"
	"github.com/spanmutex/spanmutex/internal/names"
)

// resizeHelp is the help of "spanmutex resize".
var resizeHelp = helpText{
	Usage: "spanmutex resize [flags] --permits N NAME",
	About: `Changes the size of the semaphore NAME ('spanmutex lock --permits') to N
permits, and grants the waiters that now fit, in one read-write transaction.
From then on, 'spanmutex lock --permits N NAME' holds it, and a holder that
gives the old size is refused (exit 1). Holders keep the permits they hold:
after a shrink below them, nobody new is granted until they fit in N.

It refuses a NAME that has no row (the first 'spanmutex lock --permits'
creates a semaphore, resize does not), a NAME that is not a semaphore (a
run-once section, a lock) and a reader-writer lock, which has no size to
change. A semaphore that already has N permits is left unchanged.`,
	After: `Exit status: 0 if NAME has N permits, 1 if it was refused or on any other error
(stderr says why), 2 on a usage error.

Examples:
  spanmutex resize --permits 8 render`,
}

// cmdResize is "spanmutex resize [flags] --permits N NAME".
func cmdResize(ctx context.Context, s streams, args []string) int {
	fs := newFlagSet("resize")
	database := cmdline.AddDatabaseFlag(fs)
	table := fs.String("table", ddl.DefaultMutexTable, "the mutex table")
	size := fs.Int64("permits", 0, "the semaphore's new size, in permits (at least 1)")
	connect := cmdline.AddConnectTimeoutFlag(fs)
	positional, code, done := parseFlags(s, "resize", fs, resizeHelp, args)
	if done {
		return code
	}
	if len(positional) != 1 {
		return cmdline.ReportUsage(s, usage("resize", fmt.Sprintf("want exactly one NAME, got %d argument(s)", len(positional))))
	}
	name := positional[0]
	switch err := names.Name(name); {
	case err != nil:
		return cmdline.ReportUsage(s, badName("resize", err))
	case !cmdline.FlagWasSet(fs, "permits"):
		return cmdline.ReportUsage(s, usage("resize", "missing --permits N: the size to give the semaphore"))
	case *size < 1:
		return cmdline.ReportUsage(s, usage("resize", fmt.Sprintf("--permits %d: must be at least 1: it is the semaphore's size", *size)))
	}
	client, err := connectFor(ctx, "resize", fs, *database, *table, *connect)
	if err != nil {
		return cmdline.ReportError(s, err, exitError)
	}
	defer client.Close()
	before, err := readSemaphore(ctx, client, *table, name)
	if err == nil && before.size != *size {
		err = resize(ctx, client, *table, name, *size)
	}
	if err != nil {
		return cmdline.ReportError(s, cmdline.ExplainConnection(err), exitError)
	}
	switch held := before.held(); {
	case before.size == *size:
		fmt.Fprintf(s.Stderr, "spanmutex: semaphore %q already has %d permits; nothing changed\n", name, *size)
	case held > *size:
		fmt.Fprintf(s.Stderr, "spanmutex: semaphore %q resized from %d to %d permits; its holders held %d when read just before: nobody new is granted until they fit\n",
			name, before.size, *size, held)
	default:
		fmt.Fprintf(s.Stderr, "spanmutex: semaphore %q resized from %d to %d permits\n", name, before.size, *size)
	}
	return exitOK
}

// readSemaphore reads the semaphore name of table, with its holders, and
// refuses a name that has no row, that is not a semaphore's, or that is
// an RWLock's.
func readSemaphore(ctx context.Context, client *spanner.Client, table, name string) (sharedRow, error) {
	rows, err := spanmutex.Inspect(ctx, client, name, spanmutex.WithTable(table))
	switch {
	case err != nil:
		return sharedRow{}, err
	case len(rows) == 0:
		return sharedRow{}, fmt.Errorf("no row for %q in table %s: it is no semaphore yet; 'spanmutex lock --permits N %s -- COMMAND' makes it one of N permits",
			name, table, shellQuote(name))
	case rows[0].State != spanmutex.StateShared:
		return sharedRow{}, fmt.Errorf("%q is not a semaphore: its row is %s, a run-once section's or a lock's", name, rows[0].State)
	}
	shared := sharedRows(rows)[0]
	if shared.rwLock() {
		return sharedRow{}, fmt.Errorf("%q is a reader-writer lock, which has no size to change", name)
	}
	return shared, nil
}

// resize stores size as the size of the semaphore name of table.
func resize(ctx context.Context, client *spanner.Client, table, name string, size int64) error {
	sem, err := spanmutex.NewSemaphore(client, name, size, spanmutex.WithTable(table))
	if err != nil {
		return err
	}
	return sem.Resize(ctx)
}
