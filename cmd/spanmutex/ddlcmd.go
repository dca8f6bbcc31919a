package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/internal/cmdline"
)

// ddlHelp is the help of "spanmutex ddl".
var ddlHelp = helpText{
	Usage: "spanmutex ddl [--table TABLE] [--dialect D] [--requests TABLE] [--change-stream NAME --watch T1,T2]\n       spanmutex ddl --upgrade [--table TABLE] [--dialect D] [--change-stream NAME]",
	About: `Prints the schema spanmutex needs, with comments that explain each column:
the mutex table (run-once sections and reusable locks), its waiters' queue
(TABLE followed by "Queue"), the fence table (Fences) and the sessions of
Scopes (TABLE followed by "Sessions", so TABLE may have at most 120
characters). With --requests,
also the request queue of package queue and its indexes. With
--change-stream, also the change stream over the --watch tables and the
checkpoint table (CaptureCheckpoints) of package queue's capture.
Statements end with ";". Apply them with your migration tool, or with gcloud.

With --dialect postgresql, prints the schema for a PostgreSQL-dialect
database: the same tables and columns, identifiers quoted so that they keep
their mixed-case names (the change stream and the checkpoint table too).

With --upgrade, prints instead the ALTER TABLE statements that bring tables
made by an earlier spanmutex up to date: the nullable columns added since
(LeaseMicros of declared leases, the queue's WakeAddr of wake-ups, Version of
'run --version', Queued of a lock's queue without a read, Permits and Token
of the Semaphore, Session of a Scope's session), then the CREATE TABLE of
the sessions table. Apply the ones whose column the table lacks (Spanner
refuses to add a column twice), and the CREATE TABLE if the sessions table
does not exist; rows already there keep working, a row without a declared
lease judged by each reader's own lease. With
--change-stream, also the checkpoint table's (LeaseMicros, where a
partition's owner declares its lease; the capture refuses a table without
it).`,
	After: `Examples:
  spanmutex ddl
  spanmutex ddl --table JobLocks > mutexes.sql
  spanmutex ddl --upgrade --table JobLocks
  spanmutex ddl --upgrade --change-stream OrdersStream
  spanmutex ddl --dialect postgresql --requests Requests
  spanmutex ddl --requests Requests
  spanmutex ddl --requests Requests --change-stream OrdersStream --watch Orders,OrderItems
  spanmutex ddl | gcloud spanner databases ddl update DATABASE --instance=INSTANCE --ddl-file=/dev/stdin
  spanmutex ddl --upgrade | gcloud spanner databases ddl update DATABASE --instance=INSTANCE --ddl-file=/dev/stdin`,
}

// cmdDDL is "spanmutex ddl [--table TABLE]".
func cmdDDL(_ context.Context, s streams, args []string) int {
	fs := newFlagSet("ddl")
	table := fs.String("table", ddl.DefaultMutexTable, "the mutex table's name")
	requests := fs.String("requests", "", "also print the request queue (package queue) under this table name, e.g. "+ddl.DefaultRequestsTable)
	stream := fs.String("change-stream", "", "also print this change stream over the --watch tables, and the capture's checkpoint table")
	watch := fs.String("watch", "", "comma-separated tables the --change-stream watches")
	upgrade := fs.Bool("upgrade", false, "print only the ALTER TABLE statements that upgrade tables made by an earlier spanmutex")
	dialectName := cmdline.AddDialectFlag(fs)
	positional, code, done := parseFlags(s, "ddl", fs, ddlHelp, args)
	if done {
		return code
	}
	if len(positional) > 0 {
		return cmdline.ReportUsage(s, usage("ddl", fmt.Sprintf("unexpected argument %q; ddl takes only flags", positional[0])))
	}
	if err := cmdline.ValidateTable(fullCommand("ddl"), *table); err != nil {
		return cmdline.ReportError(s, err, exitUsage)
	}
	d, err := cmdline.ParseDialect(fullCommand("ddl"), *dialectName)
	if err != nil {
		return cmdline.ReportError(s, err, exitUsage)
	}
	switch {
	case *upgrade && (*requests != "" || *watch != ""):
		return cmdline.ReportUsage(s, usage("ddl", "--upgrade prints the ALTER statements of the mutex tables, and with --change-stream of the capture's checkpoint table: leave out --requests and --watch"))
	case !*upgrade && (*stream == "") != (*watch == ""):
		return cmdline.ReportUsage(s, usage("ddl", "--change-stream and --watch go together: name the stream and the tables it watches"))
	}
	schema := func(table string) ([]string, error) { return d.Schema(table, ddl.DefaultFenceTable) }
	if *upgrade {
		schema = d.Upgrade
	}
	stmts, err := schema(*table)
	if err != nil { // the name is valid, but too long for its sessions table
		return cmdline.ReportUsage(s, usage("ddl", "--table: "+strings.TrimPrefix(err.Error(), "ddl: ")))
	}
	if *requests != "" {
		more, err := d.RequestsTable(*requests)
		if err != nil {
			return cmdline.ReportUsage(s, usage("ddl", "--requests: "+err.Error()))
		}
		stmts = append(stmts, more...)
	}
	if *upgrade && *stream != "" {
		more, err := d.CaptureUpgrade(ddl.DefaultCaptureTable)
		if err != nil {
			return cmdline.ReportError(s, err, exitError)
		}
		stmts = append(stmts, more...)
	} else if *stream != "" {
		cs, err := d.ChangeStream(*stream, strings.Split(*watch, ",")...)
		if err != nil {
			return cmdline.ReportUsage(s, usage("ddl", "--change-stream: "+err.Error()))
		}
		ct, err := d.CaptureTable(ddl.DefaultCaptureTable)
		if err != nil {
			return cmdline.ReportError(s, err, exitError)
		}
		stmts = append(stmts, cs, ct)
	}
	for i, stmt := range stmts {
		if i > 0 {
			fmt.Fprintln(s.Stdout)
		}
		fmt.Fprintln(s.Stdout, strings.TrimRight(stmt, "\n")+";")
	}
	return exitOK
}
