package main

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/spanmutex/spanmutex"
	"github.com/spanmutex/spanmutex/internal/cmdline"
	"github.com/spanmutex/spanmutex/internal/defaults"
)

// How "run" and "lock" tell a Spanner outage: a wait that gives up because
// Spanner calls kept failing exits exitOutage with what failed and where,
// within the bound outageBound states; a holder whose renewals fail loses
// its lease (--lease) and says what was, and was not, recorded.

// exitOutage (EX_UNAVAILABLE) is the exit status of "run" and "lock" when
// they gave up waiting because Spanner kept failing (--max-failures calls
// in a row): COMMAND did not run, and nothing was recorded for it.
const exitOutage = 69

// defaultCallTimeout is the default of --call-timeout: how long one Spanner
// call may take. It also bounds recording how COMMAND ended, within the
// 30 s a Kubernetes pod gets (see defaultGrace).
const defaultCallTimeout = recordTimeout

// outageFlags are the flags of "run" and "lock" that bound how long a
// Spanner outage goes unnoticed.
type outageFlags struct {
	maxFailures int
	callTimeout time.Duration
}

// registerOutage defines --max-failures and --call-timeout on fs.
func (f *outageFlags) registerOutage(fs *flag.FlagSet) {
	fs.IntVar(&f.maxFailures, "max-failures", defaults.MaxFailures,
		"give up waiting (exit 69) once this many Spanner calls in a row have failed")
	fs.DurationVar(&f.callTimeout, "call-timeout", defaultCallTimeout,
		"how long one Spanner call may take before it counts as failed; also bounds recording how COMMAND ended and releasing NAME")
}

// checkOutage refuses values the library would refuse, as usage errors of sub.
func (f *outageFlags) checkOutage(sub string) error {
	if f.maxFailures < 1 {
		return usagef(sub, "--max-failures %d: must be at least 1", f.maxFailures)
	}
	if f.callTimeout <= 0 {
		return usagef(sub, "--call-timeout %v: must be positive", f.callTimeout)
	}
	return nil
}

// outageOptions are the library's options for the flags: failed calls in a row,
// and the timeout of each call (which the library takes from the finish
// timeout).
func (f *outageFlags) outageOptions() []spanmutex.LeaseOption {
	return []spanmutex.LeaseOption{spanmutex.WithMaxFailures(f.maxFailures), spanmutex.WithFinishTimeout(f.callTimeout)}
}

// maxBackOffWait is the longest wait of the library's default backoff
// between two calls: defaults.MaxBackOff, randomised by half.
const maxBackOffWait = defaults.MaxBackOff * 3 / 2

// outageBound is how long after Spanner stops answering a wait gives up:
// until its next call (poll: at most maxBackOffWait for "run", lockPoll
// for "lock"), then --max-failures calls that each time out after
// --call-timeout, with a backoff after each, then one more --call-timeout
// to leave the queue. doc/cli.md states it; the outage tests check it.
func (f *outageFlags) outageBound(poll time.Duration) time.Duration {
	return poll + time.Duration(f.maxFailures+1)*(f.callTimeout+maxBackOffWait)
}

// lockPoll is the longest a waiting "lock" with --lease lease goes between
// two reads: a quarter lease, at most 10 s.
func lockPoll(lease time.Duration) time.Duration {
	return min(lease/4, 10*time.Second)
}

// reportOutage says on stderr that the wait for what ended because Spanner
// kept failing, where it was reached and how to go on (after, when set,
// what else is left as it was), and returns exitOutage; it returns false if
// err is no outage.
func reportOutage(s streams, what, after string, err error) (int, bool) {
	if !errors.Is(err, spanmutex.ErrOutage) {
		return 0, false
	}
	fmt.Fprintf(s.Stderr, "spanmutex: gave up waiting for %s (--max-failures): %s\n",
		what, strings.TrimPrefix(cmdline.ErrorLine(err), "spanmutex: "))
	if after != "" {
		after = " " + after
	}
	fmt.Fprintf(s.Stderr, "spanmutex: Spanner was unreachable or failing (%s); COMMAND did not run%s: run this again once Spanner answers\n",
		cmdline.ConnectionHint(), after)
	return exitOutage, true
}

// lostWhileRunning returns the error that ended c's lease while COMMAND
// ran (renewals that failed for a whole lease, or a takeover), or nil.
func lostWhileRunning(c *child) error {
	l := c.acquired()
	if l == nil {
		return nil
	}
	if err := l.Err(); errors.Is(err, spanmutex.ErrLeaseLost) {
		return err
	}
	return nil
}

// reportLostRun tells how a "run" ended whose lease was lost while COMMAND
// ran (COMMAND was sent SIGTERM), given Run's error err, and returns
// exitError, as for every lease lost while COMMAND ran. It says what was
// recorded: FAILED (Spanner answered again in time), or nothing, so that
// the row stays STARTED until a later run takes it over.
func reportLostRun(s streams, name string, o *runOptions, err error, attempts func() attemptsLeft) int {
	how := "COMMAND succeeded"
	if code, failed := commandStatus(err); failed {
		how = fmt.Sprintf("COMMAND failed (exit status %d)", code)
	}
	if _, only := err.(*spanmutex.SectionError); only {
		fmt.Fprintf(s.Stderr, "spanmutex: %s after it was sent SIGTERM for the lost lease; %q is recorded FAILED; %s\n",
			how, name, attempts().retryNote(name))
		return exitError
	}
	fmt.Fprintf(s.Stderr, "spanmutex: %s after it was sent SIGTERM for the lost lease, and how it ended could not be recorded (below): "+
		"%q stays STARTED until a later run takes it over, once it has gone unrenewed for its lease (%v), as a new attempt (--max-attempts %d)\n%s\n",
		how, name, o.lease, o.maxAttempts, cmdline.ErrorLine(cmdline.ExplainConnection(err)))
	return exitError
}
