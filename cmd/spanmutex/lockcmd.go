package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"sync"
	"time"

	"github.com/spanmutex/spanmutex"
	"github.com/spanmutex/spanmutex/internal/cmdline"
)

// exitLeaseLost is the exit status of "lock" when the lock was lost while
// COMMAND ran: another holder may have run meanwhile.
const exitLeaseLost = 76

// lockHelp is the help of "spanmutex lock".
var lockHelp = helpText{
	Usage: "spanmutex lock [flags] NAME -- COMMAND [ARGS...]",
	About: `Holds the reusable lock NAME while COMMAND runs, every time (like
'etcdctl lock'): one holder at a time across every process that locks NAME
against the same database and table. Waiters queue and are served first
come, first served; when COMMAND exits, the lock is released and handed to
the oldest live waiter.

While COMMAND runs, the lease is renewed. A holder that stops renewing (it
crashed, froze, or lost its connection) for --lease, by Spanner's clock,
is taken over by a waiter with a higher fencing token. If this process finds
that it lost the lock while COMMAND runs, it sends COMMAND SIGTERM (and
SIGKILL after --grace), says so, and exits 76.

COMMAND runs with stdin, stdout and stderr inherited, and with these
environment variables added:
  SPANMUTEX_NAME   NAME
  SPANMUTEX_TOKEN  the fencing token of this hold: pass it with every write
                   COMMAND makes, so that writes of a taken-over holder can
                   be rejected
  SPANMUTEX_OWNER  the owner identity recorded in the row
SIGHUP, SIGINT, SIGTERM and SIGQUIT received while COMMAND runs are
forwarded to it (and COMMAND is killed if it has not exited --grace later);
received while waiting, they stop the wait. On Linux, COMMAND is
killed (SIGKILL) if this process dies first, even of SIGKILL.

With --permits N, NAME is a semaphore of N permits instead: COMMANDs run
together while the permits they hold (--weight each, default 1) fit in N.
Waiters are served first come, first served, and none overtakes one that
needs more permits than are free. N is stored with NAME by its first
holder: a holder that gives another N is refused (exit 1) until
'spanmutex resize' changes it.

With --shared or --rw, NAME is a reader-writer lock: COMMANDs that hold
it with --shared run together, one that holds it with --rw (without
--shared) runs alone, and a waiting --rw holder blocks new --shared ones.

Whatever NAME is, the lease, the fencing token, the signals and the exit
statuses are as for the lock.

Flags go before NAME or between NAME and "--".`,
	After: `Exit status:
  N    COMMAND's own exit status (0 when it succeeded; 128+signal if a signal
       killed it; 127 if it was not found, 126 if it could not be started)
  76   the lock (the permits, the read or write lock) was lost while
       COMMAND ran: COMMAND was sent SIGTERM, and another holder may have
       run meanwhile
  69   gave up waiting because Spanner kept failing (--max-failures calls in
       a row, each given --call-timeout): COMMAND did not run; stderr names
       the host and the last error
  2    usage error
  1    any other error, stated on stderr; among them: interrupted while
       waiting, and a NAME that is another kind or size of lock than the
       flags say (COMMAND did not run)

Environment:
  SPANMUTEX_DATABASE     default for --database
  SPANNER_EMULATOR_HOST  connect to the Cloud Spanner emulator at host:port

Examples:
  spanmutex lock nightly-report -- ./report.sh
  spanmutex lock --lease 1m deploy-prod -- ./deploy.sh "$SPANMUTEX_TOKEN"
  spanmutex lock --permits 4 render -- ./render.sh          # at most 4 at once
  spanmutex lock --permits 4 --weight 2 render -- ./render-big.sh
  spanmutex lock --shared index -- ./query.sh                # readers together
  spanmutex lock --rw index -- ./reindex.sh                  # a writer alone`,
}

// lockOptions are the flags of "spanmutex lock".
type lockOptions struct {
	holdFlags
	outageFlags
	kindFlags
}

// lockFlags defines the flags of "spanmutex lock" on a new flag set.
func lockFlags() (*flag.FlagSet, *lockOptions) {
	o := &lockOptions{}
	fs := newFlagSet("lock")
	o.register(fs,
		"after forwarding a signal to COMMAND, or sending it SIGTERM because the lock was lost, kill it (SIGKILL) if it has not exited this long later; 0: never",
		"log the lock's decisions to stderr")
	o.registerOwner(fs)
	o.registerOutage(fs)
	o.registerKind(fs)
	return fs, o
}

// cmdLock is "spanmutex lock [flags] NAME -- COMMAND [ARGS...]".
func cmdLock(ctx context.Context, s streams, args []string) int {
	fs, o := lockFlags()
	name, command, code, done := parseHoldArgs(s, "lock", fs, lockHelp, &o.holdFlags, args, func() error {
		if err := o.checkOutage("lock"); err != nil {
			return err
		}
		return o.checkKind("lock", fs)
	})
	if done {
		return code
	}
	return holdLock(ctx, s, o, name, command)
}

// holdLock takes NAME as the flags say (a lock, permits of a semaphore, a
// side of a reader-writer lock), runs COMMAND under it, releases it, and
// returns the exit status that "spanmutex lock" documents.
func holdLock(ctx context.Context, s streams, o *lockOptions, name string, command []string) int {
	client, scopeOpts, closeAll, err := o.open(ctx, "lock")
	if err != nil {
		return cmdline.ReportError(s, err, exitError)
	}
	defer closeAll()
	opts := o.lockOptions(s.Stderr, scopeOpts)
	for _, lo := range o.outageOptions() {
		opts = append(opts, lo)
	}
	l, err := o.newLocker(client, name, opts)
	if errors.Is(err, spanmutex.ErrInvalidConfig) {
		return cmdline.ReportUsage(s, configUsage("lock", err))
	}
	if err != nil {
		return cmdline.ReportError(s, err, exitError)
	}
	take := func(ctx context.Context) (*spanmutex.Lease, func(context.Context) error, error) {
		lease, err := l.Lock(ctx)
		unlock := func(ctx context.Context) error {
			// With this deadline Unlock keeps trying for --call-timeout;
			// without one it would keep trying for the lease, past the
			// bound doc/cli.md states for an outage.
			ctx, cancel := context.WithTimeout(ctx, o.callTimeout)
			defer cancel()
			return l.Unlock(ctx)
		}
		return lease, unlock, o.explainKind(ctx, client, o.table, name, o.callTimeout, err)
	}
	code, _ := holdWhile(ctx, s, o.grace, command, take, o.what(name))
	return code
}

// holdWhile waits for take to give a lease (what, e.g. "the lock \"x\"",
// names it in messages), runs COMMAND while it is held, stopping COMMAND
// if it is lost, then releases it, and returns the exit status that "lock"
// and "lead" document, and whether this process received SIGINT or
// SIGTERM meanwhile.
func holdWhile(ctx context.Context, s streams, grace time.Duration, command []string,
	take func(context.Context) (*spanmutex.Lease, func(context.Context) error, error), what string) (code int, signalled bool) {
	waitCtx, stopWait := context.WithCancel(ctx)
	defer stopWait()
	c := &child{argv: command, s: s, stopWait: stopWait, grace: grace}
	stopSignals := sync.OnceFunc(c.forwardSignals())
	defer stopSignals()
	lease, release, err := take(waitCtx)
	if err != nil {
		if sig := c.interruptedBy(); sig != nil {
			fmt.Fprintf(s.Stderr, "spanmutex: interrupted by %s while waiting for %s; COMMAND did not run\n", signalName(sig), what)
			return exitError, true
		}
		if code, outage := reportOutage(s, what, "", err); outage {
			return code, false
		}
		return cmdline.ReportError(s, cmdline.ExplainConnection(err), exitError), false
	}

	// COMMAND's context ends when the lease is lost, with why as its cause:
	// the child then sends COMMAND SIGTERM.
	runCtx, stopRun := context.WithCancelCause(ctx)
	go func() {
		select {
		case <-lease.Done():
			stopRun(lease.Err())
		case <-runCtx.Done():
		}
	}()
	cmdErr := c.section(runCtx, lease)
	// A lease lost before COMMAND ended made the child send it SIGTERM and
	// say why.
	told := context.Cause(runCtx) != nil
	stopRun(nil)
	stopSignals()
	lost := lease.Err()

	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	releaseErr := release(uctx)
	return holdExitStatus(s, what, lease, lost, told, cmdErr, releaseErr), c.signalled()
}

// holdExitStatus says how the hold of what ended, on stderr, and returns
// the exit status: whether the lease was lost while COMMAND ran (told: and
// COMMAND was sent SIGTERM, saying why), how COMMAND ended, and whether
// releasing failed.
func holdExitStatus(s streams, what string, lease *spanmutex.Lease, lost error, told bool, cmdErr, releaseErr error) int {
	switch {
	case lost != nil && told:
		fmt.Fprintf(s.Stderr, "spanmutex: %s (token %d) was lost while COMMAND ran (above), so another holder may have run meanwhile\n",
			what, lease.Token())
		return exitLeaseLost
	case lost != nil:
		fmt.Fprintf(s.Stderr, "spanmutex: %s (token %d) was lost as COMMAND ended, so another holder may have run meanwhile\n%s\n",
			what, lease.Token(), cmdline.ErrorLine(lost))
		return exitLeaseLost
	}
	if releaseErr != nil {
		fmt.Fprintf(s.Stderr, "spanmutex: COMMAND ended, but releasing %s failed; waiters take it over after the lease\n%s\n", what, cmdline.ErrorLine(releaseErr))
	}
	if cmdErr == nil {
		if releaseErr != nil {
			return exitError
		}
		return exitOK
	}
	if code, failed := commandStatus(cmdErr); failed {
		var se *startError
		if errors.As(cmdErr, &se) {
			fmt.Fprintf(s.Stderr, "spanmutex: could not %v\n", se)
		}
		return code
	}
	return cmdline.ReportError(s, cmdErr, exitError)
}
