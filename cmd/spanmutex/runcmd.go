package main

import (
	"context"
	"flag"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spanmutex/spanmutex"
	"github.com/spanmutex/spanmutex/internal/defaults"
	"github.com/spanmutex/spanmutex/internal/names"
)

// runHelp is the help of "spanmutex run".
var runHelp = helpText{
	Usage: "spanmutex run [flags] NAME -- COMMAND [ARGS...]",
	About: `Runs COMMAND as the critical section NAME, at most once across every process
that runs NAME against the same database and table. The first process to
acquire NAME runs COMMAND; the others wait until it is DONE and exit 0
without running it. If COMMAND fails, NAME is recorded FAILED and the next
run of NAME retries it, until --max-attempts runs have failed.

While COMMAND runs, its lease is renewed. A holder that stops renewing (it
crashed, froze, or lost its connection) for --lease, by Spanner's clock,
is taken over by another process, with a higher fencing token. If this
process finds that it lost its lease while COMMAND runs, it sends COMMAND
SIGTERM, since another process may now be running it.

COMMAND runs with stdin, stdout and stderr inherited, and with these
environment variables added:
  SPANMUTEX_NAME   NAME
  SPANMUTEX_TOKEN  the fencing token of this run: pass it with every write
                   COMMAND makes, so that writes of a taken-over holder can
                   be rejected
  SPANMUTEX_OWNER  the owner identity recorded in the row
SIGHUP, SIGINT, SIGTERM and SIGQUIT received while COMMAND runs are
forwarded to it. If COMMAND then fails (or does not exit within --grace and
is killed), the run was interrupted, not failed: NAME is given back (NEEDED,
this attempt not counted, the signal recorded as its last error) for the
next run to start again. If COMMAND exits 0 anyway, NAME is DONE. Received
while waiting, the signals stop the wait. On Linux, COMMAND is killed
(SIGKILL) if this process dies first, even of SIGKILL; elsewhere it runs
on, and only its fenced writes protect the data (see doc/cli.md).

Flags go before NAME or between NAME and "--".`,
	After: `Exit status:
  0    COMMAND ran here and succeeded, or NAME was already done elsewhere
       (stderr says which)
  N    COMMAND failed with exit status N (128+signal if a signal killed it;
       127 if it was not found, 126 if it could not be started); NAME is FAILED
  N    interrupted: SIGHUP, SIGINT, SIGTERM or SIGQUIT was forwarded to
       COMMAND, which then
       exited with status N (128+signal if it died of it); NAME is NEEDED again
  75   gave up: NAME failed on its last allowed attempt (--max-attempts);
       'spanmutex reset NAME' re-arms it
  69   gave up waiting because Spanner kept failing (--max-failures calls in
       a row, each given --call-timeout): COMMAND did not run, NAME's
       attempts are untouched; stderr names the host and the last error
  2    usage error
  1    any other error, stated on stderr; among them: interrupted while
       waiting (COMMAND did not run), and a lease lost while COMMAND ran
       (COMMAND was sent SIGTERM; stderr says whether FAILED was recorded
       or NAME stays STARTED until a later run takes it over)

Environment:
  SPANMUTEX_DATABASE     default for --database
  SPANNER_EMULATOR_HOST  connect to the Cloud Spanner emulator at host:port

Examples:
  spanmutex run migrate-v42 -- ./migrate --to 42
  spanmutex run --lease 30m --max-attempts 5 backfill-2024 -- ./backfill.sh
  spanmutex run --version "$RELEASE" migrate -- ./migrate up     # once per release
  SPANMUTEX_DATABASE=projects/my-project/instances/my-instance/databases/my-db spanmutex run seed -- make seed`,
}

// defaultGrace and recordTimeout fit an interrupted run into the 30 s a
// Kubernetes pod gets by default between SIGTERM and SIGKILL: COMMAND has
// defaultGrace to exit, then recording how it ended takes at most
// recordTimeout.
const (
	defaultGrace  = 20 * time.Second
	recordTimeout = 10 * time.Second
)

// runOptions are the flags of "spanmutex run".
type runOptions struct {
	holdFlags
	outageFlags
	staleness   time.Duration
	maxAttempts int
	version     string
}

// runFlags defines the flags of "spanmutex run" on a new flag set.
func runFlags() (*flag.FlagSet, *runOptions) {
	o := &runOptions{}
	fs := newFlagSet("run")
	o.register(fs,
		"after forwarding SIGHUP, SIGINT, SIGTERM or SIGQUIT to COMMAND, wait this long for it to exit, then kill it (SIGKILL) and give NAME back; 0: wait for ever",
		"log the mutex's decisions to stderr")
	o.registerOwner(fs)
	o.registerOutage(fs)
	fs.DurationVar(&o.staleness, "staleness", 0,
		"run NAME again once its DONE or FAILED row is older than this (0: never); must be above --lease")
	fs.IntVar(&o.maxAttempts, "max-attempts", defaults.MaxAttempts,
		"give up (exit 75) once NAME has been started this many times without success")
	fs.StringVar(&o.version, "version", "",
		"run NAME once per version (a release): a row DONE at another version runs again, with fresh attempts; the same version stays DONE")
	return fs, o
}

// cmdRun is "spanmutex run [flags] NAME -- COMMAND [ARGS...]".
func cmdRun(ctx context.Context, s streams, args []string) int {
	fs, o := runFlags()
	name, command, code, done := parseHoldArgs(s, "run", fs, runHelp, &o.holdFlags, args, o.checkRunFlags)
	if done {
		return code
	}
	return runSection(ctx, s, o, name, command)
}

// splitCommand splits args at the first "--" into the part with the flags
// and NAME, and COMMAND with its arguments.
func splitCommand(args []string) (flagArgs, command []string, hasDash bool) {
	i := slices.Index(args, "--")
	if i < 0 {
		return args, nil, false
	}
	return args[:i], args[i+1:], true
}

// checkHoldArgs checks the positional arguments of "run", "lock" or "lead"
// (sub) and returns NAME.
func checkHoldArgs(sub string, positional, command []string, hasDash bool) (string, error) {
	switch {
	case len(positional) == 0:
		return "", usagef(sub, "missing NAME: want '%s [flags] NAME -- COMMAND [ARGS...]'", fullCommand(sub))
	case len(positional) > 1 && !hasDash:
		return "", usagef(sub, "missing \"--\" between NAME and COMMAND: want: %s [flags] %s -- %s", fullCommand(sub), shellQuote(positional[0]), shellJoin(positional[1:]))
	case len(positional) > 1:
		return "", usagef(sub, "more than one NAME (%q): put COMMAND after \"--\"", positional)
	case !hasDash:
		return "", usagef(sub, "missing \"-- COMMAND\": want '%s [flags] NAME -- COMMAND [ARGS...]'", fullCommand(sub))
	case len(command) == 0:
		return "", usagef(sub, "missing COMMAND after \"--\"")
	case command[0] == "":
		return "", usagef(sub, "COMMAND is empty")
	}
	name := positional[0]
	if err := names.Name(name); err != nil {
		return "", badName(sub, err)
	}
	return name, nil
}

// shellJoin quotes args for a shell and joins them with spaces, so that a
// suggested command line keeps every argument as it was given.
func shellJoin(args []string) string {
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = shellQuote(a)
	}
	return strings.Join(quoted, " ")
}

// shellQuote returns a as a shell would need it: unchanged if it holds only
// safe characters, else in single quotes.
func shellQuote(a string) string {
	if a != "" && strings.IndexFunc(a, func(r rune) bool {
		return !(r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("-_./=:,+@%", r)))
	}) < 0 {
		return a
	}
	return "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
}

// checkRunFlags checks the flags of "run" that "lock" and "lead" do not
// have, after holdFlags.validate, before anything connects, so that a bad
// command line never touches the database. New checks them again.
func (o *runOptions) checkRunFlags() error {
	if o.staleness < 0 || (o.staleness > 0 && o.staleness <= o.lease) {
		return usagef("run", "--staleness %v: must be 0 (never) or above --lease (%v)", o.staleness, o.lease)
	}
	if o.maxAttempts < 1 {
		return usagef("run", "--max-attempts %d: must be at least 1", o.maxAttempts)
	}
	if err := o.checkOutage("run"); err != nil {
		return err
	}
	if o.version != "" {
		if err := validateOwner(o.version); err != nil {
			return usagef("run", "--version: %v", err)
		}
	}
	return nil
}

// validateOwner applies the rules the library applies to owner identities
// (names.Text).
func validateOwner(owner string) error {
	return names.Text("owner", owner, names.MaxLength)
}

// mutexOptions turns the flags, and those of --listen (scopeOpts), into
// library options.
func (o *runOptions) mutexOptions(s streams, scopeOpts []spanmutex.ElectionOption) []spanmutex.MutexOption {
	var opts []spanmutex.MutexOption
	for _, lo := range o.lockOptions(s.Stderr, scopeOpts) {
		opts = append(opts, lo)
	}
	for _, lo := range o.outageOptions() {
		opts = append(opts, lo)
	}
	opts = append(opts,
		spanmutex.WithStaleness(o.staleness),
		spanmutex.WithMaxAttempts(o.maxAttempts),
	)
	if o.version != "" {
		opts = append(opts, spanmutex.WithVersion(o.version))
	}
	return opts
}
