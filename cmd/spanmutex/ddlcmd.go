package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spanmutex/spanmutex"
	"github.com/spanmutex/spanmutex/ddl"
)

// ddlHelp is the help of "spanmutex ddl".
var ddlHelp = helpText{
	usage: "spanmutex ddl [--table TABLE]",
	about: `Prints the schema spanmutex needs, with comments that explain each column:
the mutex table (run-once sections and reusable locks), its waiters' queue
(TABLE followed by "Queue") and the fence table (Fences). Statements end with
";". Apply them with your migration tool, or with gcloud.`,
	after: `Examples:
  spanmutex ddl
  spanmutex ddl --table JobLocks > mutexes.sql
  spanmutex ddl | gcloud spanner databases ddl update DATABASE --instance=INSTANCE --ddl-file=/dev/stdin`,
}

// cmdDDL is "spanmutex ddl [--table TABLE]".
func cmdDDL(_ context.Context, s streams, args []string) int {
	fs := newFlagSet("ddl")
	table := fs.String("table", spanmutex.DefaultTable, "the mutex table's name")
	positional, code, done := parseFlags(s, "ddl", fs, ddlHelp, args)
	if done {
		return code
	}
	if len(positional) > 0 {
		return reportUsage(s, &usageError{cmd: "ddl", msg: fmt.Sprintf("unexpected argument %q; ddl takes only --table", positional[0])})
	}
	if err := validateTable("ddl", *table); err != nil {
		return reportError(s, err, exitUsage)
	}
	stmts, err := ddl.Schema(*table, ddl.DefaultFenceTable)
	if err != nil {
		return reportError(s, err, exitError)
	}
	for i, stmt := range stmts {
		if i > 0 {
			fmt.Fprintln(s.stdout)
		}
		fmt.Fprintln(s.stdout, strings.TrimRight(stmt, "\n")+";")
	}
	return exitOK
}
