package main

import (
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// forwardSignals routes SIGINT and SIGTERM to deliver until the returned stop
// function is called; stop returns once the routing goroutine has ended.
func (c *child) forwardSignals() (stop func()) {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
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
