// Command spreadsheets is the spreadsheet service of the request-queue
// example, runnable: an HTTP front end that records create and update
// requests in a queue on Cloud Spanner, and a pool of back-end workers that
// create and update the sheets in a stand-in spreadsheet store (package
// sheets), one worker per sheet at a time, creates before updates, and
// clicks grouped.
//
//	go run ./examples/spreadsheets                 # on an embedded emulator
//	go run ./examples/spreadsheets --database projects/P/instances/I/databases/D
//
// Then, in another terminal:
//
//	curl -s -XPOST localhost:8080/sheets -d '{"id":"budget"}'
//	curl -s -XPOST localhost:8080/sheets/budget/updates -d '{"payload":{"A1":42}}'
//	curl -s localhost:8080/sheets/budget
//
// With --database, the database must hold the spanmutex tables ('spanmutex
// ddl') and the requests table (ddl.RequestsTable); the client honours
// SPANNER_EMULATOR_HOST. "spanmutex demo spreadsheets" runs the same
// service under load and checks it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// options are the command's flags.
type options struct {
	database string
	addr     string
	workers  int
	lease    time.Duration
	write    time.Duration
	verbose  bool
}

func main() {
	o := options{}
	flag.StringVar(&o.database, "database", "", "the database, projects/P/instances/I/databases/D (default: an embedded emulator)")
	flag.StringVar(&o.addr, "addr", "127.0.0.1:8080", "where the HTTP front end listens")
	flag.IntVar(&o.workers, "workers", 4, "how many back-end workers to run, each with its own Spanner client")
	flag.DurationVar(&o.lease, "lease", 10*time.Second, "how long a silent worker keeps a sheet before another takes it over")
	flag.DurationVar(&o.write, "write", 50*time.Millisecond, "how long each write to the stand-in spreadsheet store takes")
	flag.BoolVar(&o.verbose, "verbose", false, "log every job and lock decision")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "spreadsheets: unexpected argument %q\n", flag.Arg(0))
		os.Exit(2)
	}
	if o.workers < 1 || o.lease <= 0 || o.write < 0 {
		fmt.Fprintln(os.Stderr, "spreadsheets: want --workers >= 1, --lease > 0 and --write >= 0")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "spreadsheets:", err)
		os.Exit(1)
	}
}
