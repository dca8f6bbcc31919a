// Command spanmutex runs a command, or a block of code, at most once across
// every process that shares a Cloud Spanner database, using the spanmutex
// library. It also shows the mutex table, prints its schema, starts a local
// emulator, and demonstrates the library against it.
//
// Run "spanmutex help" for the subcommands.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spanmutex/spanmutex/internal/cmdline"
)

// main runs the command line and exits with its status.
func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// subcommand is one of spanmutex's subcommands.
type subcommand struct {
	name    string
	summary string
	run     func(ctx context.Context, s streams, args []string) int
}

// subcommands returns the subcommands in the order help lists them.
func subcommands() []subcommand {
	return []subcommand{
		{"run", "run COMMAND as critical section NAME, at most once across all processes", cmdRun},
		{"lock", "hold the lock NAME while COMMAND runs, every time, FIFO (also a semaphore or a reader-writer lock)", cmdLock},
		{"lead", "campaign in the election NAME and run COMMAND while this process leads", cmdLead},
		{"reset", "re-arm NAME after it failed or gave up, so that the next run starts it (refuses a live holder)", cmdReset},
		{"resize", "change the size of the semaphore NAME ('lock --permits')", cmdResize},
		{"status", "show the mutex table: state, owner, token, attempts, age; a semaphore's holders", cmdStatus},
		{"ddl", "print the schema of the mutex table", cmdDDL},
		{"emulator", "start a local Cloud Spanner emulator with the schema applied", cmdEmulator},
		{"demo", "race instances on one mutex, with a takeover; 'demo spreadsheets': a queue under load", cmdDemo},
		{"help", "show the help of spanmutex or of a subcommand", cmdHelp},
	}
}

// subcommandNames lists the subcommands for usage errors: "run, lock, ...".
func subcommandNames() string {
	var names []string
	for _, c := range subcommands() {
		names = append(names, c.name)
	}
	return strings.Join(names, ", ")
}

// run is the whole command line: it dispatches args to a subcommand and
// returns the exit status. It writes only to stdout and stderr, so tests can
// call it in-process.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	s := streams{Stdout: stdout, Stderr: stderr}
	if len(args) == 0 {
		return cmdline.ReportUsage(s, usage("", "no subcommand given; want one of "+subcommandNames()))
	}
	switch args[0] {
	case "-h", "-help", "--help":
		printTopHelp(stdout)
		return exitOK
	}
	for _, c := range subcommands() {
		if c.name == args[0] {
			return c.run(ctx, s, args[1:])
		}
	}
	if strings.HasPrefix(args[0], "-") {
		return cmdline.ReportUsage(s, usage("", fmt.Sprintf("unknown flag %s: flags go after the subcommand, as in 'spanmutex run --table T NAME -- COMMAND'", args[0])))
	}
	switch args[0] {
	case "torture", "bench":
		// They left the operator binary, which links no test machinery.
		return cmdline.ReportUsage(s, usage("", fmt.Sprintf("%s is a command of its own: spanmutex-%s (go run ./cmd/spanmutex-%s)", args[0], args[0], args[0])))
	}
	return cmdline.ReportUsage(s, usage("", fmt.Sprintf("unknown subcommand %q; want one of %s", args[0], subcommandNames())))
}
