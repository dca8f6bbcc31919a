package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spanmutex/spanmutex/internal/cmdline"
)

// topHelpAbout and topHelpAfter frame the list of subcommands in
// "spanmutex --help".
const (
	topHelpAbout = `spanmutex runs a command, or a block of code, at most once across every process
that shares a Cloud Spanner database: the first process to acquire the named
critical section runs it, the others wait and then report it done. A holder
that goes silent past the lease (by Spanner's clock) is taken over, with a
higher fencing token.`

	topHelpAfter = `Environment:
  SPANMUTEX_DATABASE     default for --database: projects/P/instances/I/databases/D
  SPANNER_EMULATOR_HOST  host:port of a Cloud Spanner emulator; when set, clients
                         connect there without credentials. Otherwise they use
                         Application Default Credentials.

Examples:
  spanmutex demo                     # see it work, on an embedded emulator
  spanmutex demo spreadsheets        # the request-queue example: HTTP load, a killed worker, checks
  spanmutex emulator                 # in one terminal; paste its export lines into another
  spanmutex run migrate-v42 -- ./migrate --to 42
  spanmutex lock --permits 4 render -- ./render.sh     # at most 4 at once
  spanmutex status migrate-v42

Run 'spanmutex help SUBCOMMAND' or 'spanmutex SUBCOMMAND --help' for details.`
)

// printTopHelp writes the help of spanmutex itself.
func printTopHelp(w io.Writer) {
	fmt.Fprintf(w, "Usage: spanmutex SUBCOMMAND [flags] [arguments]\n\n%s\n\nSubcommands:\n", topHelpAbout)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, c := range subcommands() {
		fmt.Fprintf(tw, "  %s\t%s\n", c.name, c.summary)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\n%s\n", topHelpAfter)
}

// helpHelp is the help of "spanmutex help".
var helpHelp = helpText{
	Usage: "spanmutex help [SUBCOMMAND]",
	About: "Shows the help of spanmutex, or of SUBCOMMAND (the same as 'spanmutex SUBCOMMAND --help').",
	After: `Examples:
  spanmutex help
  spanmutex help run`,
}

// cmdHelp is "spanmutex help [SUBCOMMAND]": the top help, or the help of
// one subcommand.
func cmdHelp(ctx context.Context, s streams, args []string) int {
	fs := newFlagSet("help")
	positional, code, done := parseFlags(s, "help", fs, helpHelp, args)
	if done {
		return code
	}
	switch {
	case len(positional) == 0:
		printTopHelp(s.Stdout)
		return exitOK
	case len(positional) > 1:
		return cmdline.ReportUsage(s, usage("help", fmt.Sprintf("too many arguments %q; want at most one subcommand", positional)))
	}
	for _, c := range subcommands() {
		if c.name == positional[0] {
			return c.run(ctx, s, []string{"--help"})
		}
	}
	return cmdline.ReportUsage(s, usage("help", fmt.Sprintf("unknown subcommand %q; want one of %s", positional[0], subcommandNames())))
}
