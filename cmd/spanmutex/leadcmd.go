package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"

	"github.com/spanmutex/spanmutex"
	"github.com/spanmutex/spanmutex/internal/cmdline"
)

// leadHelp is the help of "spanmutex lead".
var leadHelp = helpText{
	Usage: "spanmutex lead [flags] NAME -- COMMAND [ARGS...]",
	About: `Campaigns in the election NAME and runs COMMAND while this process
leads (like 'etcdctl elect'): one leader at a time across every process that
campaigns for NAME against the same database and table. Candidates lead in
the order they began to campaign; the leader's --value is what
'spanmutex status' shows as NAME's owner and what Election.Leader returns.

While COMMAND runs, leadership is renewed. A leader that stops renewing (it
crashed, froze, or lost its connection) for --lease, by Spanner's clock,
is replaced by the next candidate, with a higher fencing token. If this
process finds that it lost leadership while COMMAND runs, it sends COMMAND
SIGTERM (and SIGKILL after --grace), says so, and campaigns again: when it
leads again, it runs COMMAND again with the new term's token. When COMMAND
exits on its own, this process resigns, and the next candidate leads at
once.

COMMAND runs with stdin, stdout and stderr inherited, and with these
environment variables added:
  SPANMUTEX_NAME   NAME
  SPANMUTEX_TOKEN  the fencing token of this term: pass it with every write
                   COMMAND makes, so that writes of a replaced leader can be
                   rejected
  SPANMUTEX_OWNER  this leader's --value
SIGHUP, SIGINT, SIGTERM and SIGQUIT received while COMMAND runs are
forwarded to it (and COMMAND is killed if it has not exited --grace later);
received while campaigning, they stop the campaign. On Linux, COMMAND is
killed (SIGKILL) if this process dies first, even of SIGKILL.

Flags go before NAME or between NAME and "--".`,
	After: `Exit status:
  N    COMMAND's own exit status (0 when it succeeded; 128+signal if a signal
       killed it; 127 if it was not found, 126 if it could not be started)
  76   leadership was lost while COMMAND ran and this process received
       SIGHUP, SIGINT, SIGTERM or SIGQUIT meanwhile, so it did not campaign
       again
  69   gave up campaigning because Spanner kept failing (--max-failures
       calls in a row, each given --call-timeout); stderr names the host and
       the last error
  2    usage error
  1    any other error, stated on stderr; among them: interrupted while
       campaigning (COMMAND did not run)

Environment:
  SPANMUTEX_DATABASE     default for --database
  SPANNER_EMULATOR_HOST  connect to the Cloud Spanner emulator at host:port

Examples:
  spanmutex lead --value "$(hostname):8080" scheduler -- ./scheduler
  spanmutex lead --lease 10s sweeper -- ./sweep.sh "$SPANMUTEX_TOKEN"`,
}

// leadOptions are the flags of "spanmutex lead".
type leadOptions struct {
	holdFlags
	outageFlags
	value string
}

// leadFlags defines the flags of "spanmutex lead" on a new flag set.
func leadFlags() (*flag.FlagSet, *leadOptions) {
	o := &leadOptions{}
	fs := newFlagSet("lead")
	o.register(fs,
		"after forwarding a signal to COMMAND, or sending it SIGTERM because leadership was lost, kill it (SIGKILL) if it has not exited this long later; 0: never",
		"log the election's decisions to stderr")
	fs.StringVar(&o.value, "value", "", "what this process publishes while it leads, e.g. its address (default host:pid)")
	o.registerOutage(fs)
	return fs, o
}

// cmdLead is "spanmutex lead [flags] NAME -- COMMAND [ARGS...]".
func cmdLead(ctx context.Context, s streams, args []string) int {
	fs, o := leadFlags()
	name, command, code, done := parseHoldArgs(s, "lead", fs, leadHelp, &o.holdFlags, args, o.checkValue)
	if done {
		return code
	}
	if o.value == "" {
		host, _ := os.Hostname()
		o.value = host + ":" + strconv.Itoa(os.Getpid())
	}
	return lead(ctx, s, o, name, command)
}

// checkValue checks --value, and --max-failures and --call-timeout.
func (o *leadOptions) checkValue() error {
	if err := o.checkOutage("lead"); err != nil {
		return err
	}
	if o.value != "" {
		if err := validateOwner(o.value); err != nil {
			return usagef("lead", "--value: %v", err)
		}
	}
	return nil
}

// lead campaigns, runs COMMAND while leading, resigns, and returns the exit
// status that "spanmutex lead" documents.
func lead(ctx context.Context, s streams, o *leadOptions, name string, command []string) int {
	client, scopeOpts, closeAll, err := o.open(ctx, "lead")
	if err != nil {
		return cmdline.ReportError(s, err, exitError)
	}
	defer closeAll()
	opts := o.libraryOptions(s.Stderr, scopeOpts)
	for _, lo := range o.outageOptions() {
		opts = append(opts, lo)
	}
	e, err := spanmutex.NewElection(client, name, opts...)
	if errors.Is(err, spanmutex.ErrInvalidConfig) {
		return cmdline.ReportUsage(s, configUsage("lead", err))
	}
	if err != nil {
		return cmdline.ReportError(s, err, exitError)
	}
	campaign := func(ctx context.Context) (*spanmutex.Lease, func(context.Context) error, error) {
		ld, err := e.Campaign(ctx, o.value)
		if err != nil {
			return nil, nil, err
		}
		return ld.Lease(), ld.Resign, nil
	}
	// Like client-go's RunOrDie under a supervisor: a term lost while COMMAND
	// ran (COMMAND was stopped) is followed by a new campaign.
	for {
		code, signalled := holdWhile(ctx, s, o.grace, command, campaign, fmt.Sprintf("leadership of %q", name))
		if code != exitLeaseLost || signalled || ctx.Err() != nil {
			return code
		}
		fmt.Fprintf(s.Stderr, "spanmutex: campaigning for %q again\n", name)
	}
}
