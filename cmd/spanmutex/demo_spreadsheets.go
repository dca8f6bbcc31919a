package main

import (
	"context"
	"flag"
	"time"

	"github.com/google/uuid"

	"github.com/spanmutex/spanmutex/examples/spreadsheets/sheets"
	"github.com/spanmutex/spanmutex/internal/cmdline"
)

// sheetsDemoHelp is the help of "spanmutex demo spreadsheets".
var sheetsDemoHelp = helpText{
	Usage: "spanmutex demo spreadsheets [flags]",
	About: `Runs the spreadsheet service of examples/spreadsheets under load and checks the
request queue's guarantees from the outside. It starts an embedded Cloud Spanner
emulator (or uses --database), the HTTP front end on a loopback port, and
--workers back-end workers, each with its own Spanner client. Then it drives
load through the HTTP API: --sheets creates, --clicks update clicks on random
sheets, and --duplicates second creates of existing sheets, which must be
refused with 409. Mid-run it kills a worker while it holds a claim: its Spanner
client is cut off and its handler never returns, as if its process had died.
A line every second shows the queue's progress.

When nothing is pending it prints a table of checks: every request finished
(complete, or error with a reason), none lost or stuck, no sheet created twice,
updated before its create, written by two workers at once, or written with a
stale fencing token (the stand-in spreadsheet store detects these), duplicates
refused, how the clicks were grouped into updates, the killed worker's claim
recovered by another worker with a higher token, and the throughput.

Each run uses fresh sheet ids, so it can be repeated against one database.`,
	After: `Exit status: 0 if every check passed, 1 if one failed or an error occurred,
2 on a usage error.

Examples:
  spanmutex demo spreadsheets
  spanmutex demo spreadsheets --sheets 50 --clicks 500 --workers 2
  spanmutex demo spreadsheets --database "$SPANMUTEX_DATABASE"   # with the schema of 'spanmutex ddl --requests Requests'`,
}

// sheetsDemoOptions are the flags of "spanmutex demo spreadsheets".
type sheetsDemoOptions struct {
	database   string
	sheets     int
	clicks     int
	duplicates int
	workers    int
	senders    int
	kill       bool
	lease      time.Duration
	write      time.Duration
	timeout    time.Duration
	verbose    bool

	// zombieWrites breaks the demo on purpose, for its tests: the killed
	// worker, when woken, carries on with its job and writes to the sheet
	// with its old token, as a handler that ignores its lost lease would.
	// The checks must catch it.
	zombieWrites bool
}

// sheetsDemoFlags defines the flags of "spanmutex demo spreadsheets".
func sheetsDemoFlags() (*flag.FlagSet, *sheetsDemoOptions) {
	o := &sheetsDemoOptions{}
	fs := newFlagSet("demo spreadsheets")
	fs.StringVar(&o.database, "database", "",
		"use this database, which must hold the mutex and requests tables, instead of an embedded emulator (default $"+cmdline.DatabaseEnv+"; \"\": the embedded emulator)")
	fs.IntVar(&o.sheets, "sheets", 200, "how many sheets to create, 1 to 100000")
	fs.IntVar(&o.clicks, "clicks", 2000, "how many update clicks to send, spread at random over the sheets")
	fs.IntVar(&o.duplicates, "duplicates", 20, "how many second creates of existing sheets to send; each must get 409")
	fs.IntVar(&o.workers, "workers", 4, "how many back-end workers to run, each with its own Spanner client, 2 to 64")
	fs.IntVar(&o.senders, "senders", 32, "how many HTTP requests to have in flight at once, 1 to 256 (the front end enqueues those that arrive together in one transaction)")
	fs.BoolVar(&o.kill, "kill", true, "kill a worker mid-run, in the middle of a job, while it holds the claim")
	fs.DurationVar(&o.lease, "lease", 2*time.Second, "how long a silent worker keeps a sheet's lock before another takes over")
	fs.DurationVar(&o.write, "write", 2*time.Millisecond, "how long each write to the stand-in spreadsheet store takes")
	fs.DurationVar(&o.timeout, "timeout", 3*time.Minute, "give up if the demo has not finished by then")
	fs.BoolVar(&o.verbose, "verbose", false, "also show the workers' logs")
	return fs, o
}

// validate checks the flags.
func (o *sheetsDemoOptions) validate() error {
	const cmd = "demo spreadsheets"
	switch {
	case o.sheets < 1 || o.sheets > 100000:
		return usagef(cmd, "--sheets %d: want 1 to 100000", o.sheets)
	case o.clicks < 0 || o.clicks > 1000000:
		return usagef(cmd, "--clicks %d: want 0 to 1000000", o.clicks)
	case o.duplicates < 0 || o.duplicates > o.sheets*10:
		return usagef(cmd, "--duplicates %d: want 0 to ten times --sheets (%d)", o.duplicates, o.sheets*10)
	case o.workers < 2 || o.workers > 64:
		return usagef(cmd, "--workers %d: want 2 to 64 (one may be killed; another must recover its claim)", o.workers)
	case o.senders < 1 || o.senders > 256:
		return usagef(cmd, "--senders %d: want 1 to 256", o.senders)
	case o.lease <= 0:
		return usagef(cmd, "--lease %v: must be positive", o.lease)
	case o.write < 0 || o.write >= o.lease:
		return usagef(cmd, "--write %v: must be at least 0 and below --lease (%v)", o.write, o.lease)
	case o.timeout <= 0:
		return usagef(cmd, "--timeout %v: must be positive", o.timeout)
	}
	return nil
}

// cmdDemoSpreadsheets is "spanmutex demo spreadsheets [flags]".
func cmdDemoSpreadsheets(ctx context.Context, s streams, args []string) int {
	const cmd = "demo spreadsheets"
	fs, o := sheetsDemoFlags()
	if code, done := parseOnlyFlags(s, cmd, fs, sheetsDemoHelp, args); done {
		return code
	}
	if err := o.validate(); err != nil {
		return cmdline.ReportError(s, err, exitUsage)
	}
	db, err := cmdline.OptionalDatabase(fullCommand(cmd), fs, o.database)
	if err != nil {
		return cmdline.ReportError(s, err, exitUsage)
	}
	o.database = db

	return runSheetsDemo(ctx, s, o)
}

// runSheetsDemo runs the demo with validated options and returns the exit
// status.
func runSheetsDemo(ctx context.Context, s streams, o *sheetsDemoOptions) int {
	ctx, cancel := demoContext(ctx, o.timeout)
	defer cancel()
	d := &sheetsDemo{out: newConsole(s.Stdout), opts: o, suffix: uuid.NewString()[:8]}
	closeAll, err := d.setUp(ctx)
	if err != nil {
		return cmdline.ReportError(s, err, exitError)
	}
	defer closeAll()

	res, err := d.run(ctx)
	if err != nil {
		return cmdline.ReportError(s, demoStopped(ctx, err), exitError)
	}
	ok, err := d.verify(ctx, res)
	if err != nil {
		return cmdline.ReportError(s, err, exitError)
	}
	if !ok {
		d.out.Printf("\nSummary: FAILED: at least one check did not hold. See the FAIL rows above.\n")
		return exitError
	}
	d.out.Printf("\nSummary: all %d checks passed: %d requests, none lost, none stuck, no sheet harmed.\n", d.passed, res.load.accepted())
	return exitOK
}

// sheetsDemo is one run of the spreadsheet demo.
type sheetsDemo struct {
	out    *console
	opts   *sheetsDemoOptions
	suffix string // makes this run's sheet ids unique

	svc    *sheetsService
	passed int // checks that passed
}

// newSheetsStore returns the demo's stand-in spreadsheet store.
func (d *sheetsDemo) newSheetsStore() (*sheets.Store, error) {
	return sheets.NewStore(sheets.WithWriteDuration(d.opts.write))
}
