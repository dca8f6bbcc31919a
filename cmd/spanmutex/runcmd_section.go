package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/spanmutex/spanmutex"
	"github.com/spanmutex/spanmutex/internal/cmdline"
)

// runSection runs command as the critical section name and returns the exit
// status that "spanmutex run" documents.
func runSection(ctx context.Context, s streams, o *runOptions, name string, command []string) int {
	client, scopeOpts, closeAll, err := o.open(ctx, "run")
	if err != nil {
		return cmdline.ReportError(s, err, exitError)
	}
	defer closeAll()
	m, err := spanmutex.New(client, name, o.mutexOptions(s, scopeOpts)...)
	if errors.Is(err, spanmutex.ErrInvalidConfig) {
		return cmdline.ReportUsage(s, configUsage("run", err))
	}
	if err != nil {
		return cmdline.ReportError(s, err, exitError)
	}

	waitCtx, stopWait := context.WithCancel(ctx)
	defer stopWait()
	c := &child{argv: command, s: s, stopWait: stopWait, grace: o.grace}
	stop := c.forwardSignals()
	outcome, err := m.Run(waitCtx, c.section)
	stop()
	attempts := func() attemptsLeft {
		// Which attempt this was, as our acquisition committed it: reading
		// the row now could show a later run's attempt instead.
		var se *spanmutex.SectionError
		if errors.As(err, &se) && se.Attempt > 0 {
			return attemptsLeft{used: se.Attempt, max: o.maxAttempts, known: true}
		}
		// Read the row once to say whether a later run will retry.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.callTimeout)
		defer cancel()
		rows, rerr := spanmutex.Inspect(rctx, client, name, spanmutex.WithTable(o.table))
		if rerr != nil || len(rows) != 1 {
			return attemptsLeft{max: o.maxAttempts}
		}
		return attemptsLeft{used: rows[0].Attempts, max: o.maxAttempts, known: true}
	}
	return report(s, o, name, c, outcome, err, attempts)
}

// attemptsLeft is how many of its attempts a FAILED section has used, as
// read after the failure was recorded.
type attemptsLeft struct {
	used  int64
	max   int  // --max-attempts
	known bool // the row could be read
}

// retryNote says what a later run does with a section that failed here.
func (a attemptsLeft) retryNote(name string) string {
	switch {
	case !a.known:
		return fmt.Sprintf("a later run retries it if attempts remain (--max-attempts %d)", a.max)
	case a.used >= int64(a.max):
		return fmt.Sprintf("that was its last allowed attempt (%d of %d): a later run gives up (exit 75) until 'spanmutex reset %s' re-arms it", a.used, a.max, name)
	}
	return fmt.Sprintf("a later run retries it (%d of %d attempts used)", a.used, a.max)
}

// report tells on stderr how the run ended and returns the exit status.
// attempts is called only when COMMAND failed, to say whether a later run
// retries it.
func report(s streams, o *runOptions, name string, c *child, outcome spanmutex.Outcome, err error, attempts func() attemptsLeft) int {
	if err == nil {
		switch outcome {
		case spanmutex.Executed:
			l := c.acquired()
			fmt.Fprintf(s.Stderr, "spanmutex: %q ran here (token %d, owner %s) and is DONE\n", name, l.Token(), l.Owner())
		case spanmutex.AlreadyDone:
			fmt.Fprintf(s.Stderr, "spanmutex: %q was already done elsewhere; COMMAND did not run here\n", name)
		default:
			fmt.Fprintf(s.Stderr, "spanmutex: %q: %v; COMMAND did not run here\n", name, outcome)
		}
		return exitOK
	}
	if errors.Is(err, spanmutex.ErrLeaseLost) {
		// Whatever COMMAND did, another process may have taken over:
		// nothing was recorded for this run.
		how := "succeeded"
		if code, failed := commandStatus(err); failed {
			how = fmt.Sprintf("failed (exit status %d)", code)
		}
		fmt.Fprintf(s.Stderr, "spanmutex: COMMAND %s, but the lease on %q was lost meanwhile, so nothing was recorded\n%s\n", how, name, cmdline.ErrorLine(err))
		return exitError
	}
	if errors.Is(err, spanmutex.ErrInterrupted) {
		code := exitError
		if c, failed := commandStatus(err); failed {
			code = c
		}
		var ie *spanmutex.InterruptedError
		if errors.As(err, &ie) && ie == err {
			fmt.Fprintf(s.Stderr, "spanmutex: interrupted: %s; %q is given back: NEEDED, this attempt not counted, and the next run starts it again\n", ie.Reason, name)
		} else {
			// Giving the row back failed too: say everything.
			fmt.Fprintf(s.Stderr, "%s\nspanmutex: interrupted, and %q could not be given back (above); if it is still STARTED, it is taken over after the lease\n", cmdline.ErrorLine(err), name)
		}
		return code
	}
	if lostWhileRunning(c) != nil {
		return reportLostRun(s, name, o, err, attempts)
	}
	if code, failed := commandStatus(err); failed {
		how := fmt.Sprintf("COMMAND failed (exit status %d)", code)
		var se *startError
		if errors.As(err, &se) {
			how = fmt.Sprintf("could not %v (exit status %d)", se, code)
		}
		fmt.Fprintf(s.Stderr, "spanmutex: %s; %q is recorded FAILED; %s\n", how, name, attempts().retryNote(name))
		if _, only := err.(*spanmutex.SectionError); !only {
			// More went wrong than COMMAND's failure, such as recording it.
			fmt.Fprintln(s.Stderr, cmdline.ErrorLine(err))
		}
		return code
	}
	if code, outage := reportOutage(s, strconv.Quote(name), "and its attempts are untouched (no 'spanmutex reset' needed)", err); outage {
		return code
	}
	switch {
	case errors.Is(err, spanmutex.ErrAttemptsExhausted):
		fmt.Fprintf(s.Stderr, "%s\nspanmutex: not running COMMAND again; once its cause is fixed, re-arm it with 'spanmutex reset %s' (or raise --max-attempts)\n", cmdline.ErrorLine(err), name)
		return exitExhausted
	case errors.Is(err, spanmutex.ErrNotObtained):
		why := "stopped"
		if sig := c.interruptedBy(); sig != nil {
			why = "interrupted by " + signalName(sig)
		}
		fmt.Fprintf(s.Stderr, "spanmutex: %s while waiting for %q; COMMAND did not run\n", why, name)
		return exitError
	}
	return cmdline.ReportError(s, cmdline.ExplainConnection(err), exitError)
}
