package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spanmutex/spanmutex"
	"github.com/spanmutex/spanmutex/internal/cmdline"
)

// child runs COMMAND as the body of the critical section and routes the
// terminating signals (SIGHUP, SIGINT, SIGTERM, SIGQUIT): to COMMAND while
// it runs, and to the wait for the lease before it starts. Its methods are
// safe for concurrent use.
type child struct {
	argv     []string
	s        streams
	stopWait context.CancelFunc // ends Run's wait for the lease
	// grace is how long COMMAND has to exit after a forwarded signal before
	// it is killed (0: never killed).
	grace     time.Duration
	mu        sync.Mutex
	proc      *os.Process      // COMMAND, once started
	lease     *spanmutex.Lease // the lease COMMAND runs under, once acquired
	interrupt os.Signal        // the first signal received before COMMAND started
	forwarded os.Signal        // the first signal forwarded to COMMAND
	killer    *time.Timer      // kills COMMAND once the grace after forwarded is over
	killed    bool             // the killer fired
}

// section is the critical section handed to Mutex.Run: it runs COMMAND with
// the lease in its environment and returns how COMMAND ended.
func (c *child) section(ctx context.Context, lease *spanmutex.Lease) error {
	proc, wait, err := c.start(ctx, lease)
	if err != nil {
		return err
	}
	stopWatch := c.terminateOnCancel(ctx, proc)
	err = wait()
	if cause := stopWatch(); cause != nil {
		fmt.Fprintln(c.s.Stderr, sigtermNote(cause))
	}
	return c.ended(err)
}

// sigtermNote says on one line why COMMAND was sent SIGTERM, without
// repeating the "spanmutex:" prefix that the library's errors carry.
func sigtermNote(cause error) string {
	return "spanmutex: sent COMMAND SIGTERM: " + strings.TrimPrefix(cmdline.ErrorLine(cause), "spanmutex: ")
}

// ended turns how COMMAND ended into the section's result. COMMAND that
// failed after a signal was forwarded to it was stopped from outside (a pod
// eviction, a Ctrl-C), not failing by itself: the row is given back rather
// than recorded FAILED. COMMAND that exited 0 despite the signal finished.
func (c *child) ended(err error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.proc = nil
	if c.killer != nil {
		c.killer.Stop()
	}
	if c.forwarded == nil || err == nil {
		return err
	}
	how := "exited"
	if code, failed := commandStatus(err); failed {
		how = fmt.Sprintf("exited with status %d", code)
	}
	if c.killed {
		how = fmt.Sprintf("was killed (SIGKILL) after the %v grace", c.grace)
	}
	return spanmutex.Interrupt(fmt.Sprintf("%s was sent to spanmutex run (%s) while COMMAND ran; it was forwarded to COMMAND, which %s",
		signalName(c.forwarded), whoRuns(c.lease), how), err)
}

// whoRuns names this process, and the owner of lease if there is one, for
// the reason an interruption records.
func whoRuns(lease *spanmutex.Lease) string {
	if lease == nil {
		return fmt.Sprintf("pid %d", os.Getpid())
	}
	return fmt.Sprintf("owner %s, pid %d", lease.Owner(), os.Getpid())
}

// start starts COMMAND under the lock, so that a signal is either seen here
// (and COMMAND never starts) or forwarded to the started COMMAND. It
// returns COMMAND's process and the function that waits for it to exit.
// Where the OS allows, COMMAND is killed if this process dies
// (startCommand).
func (c *child) start(ctx context.Context, lease *spanmutex.Lease) (proc *os.Process, wait func() error, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lease = lease
	if c.interrupt != nil {
		return nil, nil, spanmutex.Interrupt(fmt.Sprintf("%s was sent to spanmutex run (%s) before COMMAND started",
			signalName(c.interrupt), whoRuns(lease)), nil)
	}
	if ctx.Err() != nil {
		return nil, nil, fmt.Errorf("interrupted before COMMAND started: %w", context.Cause(ctx))
	}
	cmd := exec.Command(c.argv[0], c.argv[1:]...)
	cmd.Env = append(os.Environ(),
		"SPANMUTEX_NAME="+lease.Name(),
		"SPANMUTEX_TOKEN="+strconv.FormatInt(lease.Token(), 10),
		"SPANMUTEX_OWNER="+lease.Owner(),
	)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, c.s.Stdout, c.s.Stderr
	wait, err = startCommand(cmd)
	if err != nil {
		return nil, nil, &startError{argv0: c.argv[0], err: err}
	}
	c.proc = cmd.Process
	return cmd.Process, wait, nil
}

// terminateOnCancel sends proc SIGTERM if ctx ends while it runs: Run
// cancels the section's context when the lease is lost, and another process
// may then take over and run COMMAND too. The returned stop ends the watch
// and returns why COMMAND was terminated, or nil.
func (c *child) terminateOnCancel(ctx context.Context, proc *os.Process) (stop func() error) {
	done := make(chan struct{})
	var (
		wg    sync.WaitGroup
		cause error
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-ctx.Done():
			cause = context.Cause(ctx)
			_ = proc.Signal(syscall.SIGTERM)
			c.mu.Lock()
			if c.proc == proc {
				c.armKiller("SIGTERM")
			}
			c.mu.Unlock()
		case <-done:
		}
	}()
	return func() error {
		close(done)
		wg.Wait()
		return cause
	}
}

// acquired returns the lease COMMAND ran under, or nil if it never did.
func (c *child) acquired() *spanmutex.Lease {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lease
}

// interruptedBy returns the signal that stopped the wait, or nil.
func (c *child) interruptedBy() os.Signal {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.interrupt
}

// signalled reports whether a terminating signal reached this process,
// while it waited for the lease or while COMMAND ran.
func (c *child) signalled() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.interrupt != nil || c.forwarded != nil
}
