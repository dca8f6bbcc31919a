package main

import (
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// terminating lists the signals with which a shell, a terminal or a
// supervisor ends a process: each is handled as SIGTERM always was. Left to
// their default action, they would kill this process and leave COMMAND
// running, or a waiter's queue entry behind.
var terminating = []os.Signal{syscall.SIGHUP, os.Interrupt, syscall.SIGTERM, syscall.SIGQUIT}

// forwardSignals routes the terminating signals to deliver until the
// returned stop function is called; stop returns once the routing goroutine
// has ended. A signal this process was started with ignored (nohup ignores
// SIGHUP; a shell without job control starts "cmd &" with SIGINT and
// SIGQUIT ignored) stays ignored, for COMMAND too.
func (c *child) forwardSignals() (stop func()) {
	sigs := make(chan os.Signal, 4)
	for _, sig := range terminating {
		if !signal.Ignored(sig) {
			signal.Notify(sigs, sig)
		}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case sig := <-sigs:
				c.deliver(sig)
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(sigs)
		close(done)
		wg.Wait()
	}
}

// deliver sends sig to COMMAND if it has started, so that COMMAND decides how
// to end and its exit status is recorded; before that, it stops the wait for
// the lease. (A Ctrl-C on a terminal reaches COMMAND directly too, as it is
// in our process group; most programs treat a second SIGINT like the first.)
func (c *child) deliver(sig os.Signal) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.proc != nil {
		_ = c.proc.Signal(sig) // fails only if COMMAND has already exited
		if c.forwarded == nil {
			c.forwarded = sig
			c.armKiller(signalName(sig))
		}
		return
	}
	if c.interrupt == nil {
		c.interrupt = sig
	}
	c.stopWait()
}

// signalName names the signals run handles as a shell user writes them.
func signalName(sig os.Signal) string {
	switch sig {
	case os.Interrupt:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGQUIT:
		return "SIGQUIT"
	}
	return sig.String()
}

// armKiller kills COMMAND if it has not exited within the grace after it
// was told to stop (why). It is called with c.mu held, once COMMAND runs.
func (c *child) armKiller(why string) {
	if c.grace <= 0 || c.killer != nil {
		return
	}
	proc := c.proc
	c.killer = time.AfterFunc(c.grace, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.proc == proc {
			c.killed = true
			fmt.Fprintf(c.s.Stderr, "spanmutex: COMMAND did not exit within the %v grace after %s; sending it SIGKILL\n", c.grace, why)
			_ = proc.Kill()
		}
	})
}
