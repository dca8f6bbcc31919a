//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/spanmutex/spanmutex"
)

// startSleeper starts a process that runs until it is signalled.
func startSleeper(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return cmd
}

// TestDeliverBeforeStart checks that a signal received before COMMAND
// starts stops the wait and keeps COMMAND from starting.
func TestDeliverBeforeStart(t *testing.T) {
	noLeak(t)
	ctx, cancel := context.WithCancel(context.Background())
	c := &child{argv: []string{"true"}, stopWait: cancel}
	stop := c.forwardSignals()
	c.deliver(syscall.SIGTERM)
	stop()
	if ctx.Err() == nil {
		t.Error("the wait was not stopped")
	}
	if c.interruptedBy() != syscall.SIGTERM {
		t.Errorf("interruptedBy() = %v, want SIGTERM", c.interruptedBy())
	}
	err := c.section(ctx, nil)
	if !errors.Is(err, spanmutex.ErrInterrupted) || !strings.Contains(err.Error(), "SIGTERM was sent to spanmutex run") ||
		!strings.Contains(err.Error(), "before COMMAND started") {
		t.Errorf("section after the signal = %v; want it not to start COMMAND", err)
	}
}

// TestDeliverForwards checks that a signal received while COMMAND runs goes
// to COMMAND and leaves the wait alone.
func TestDeliverForwards(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := startSleeper(t)
	c := &child{stopWait: cancel, proc: cmd.Process}
	c.deliver(syscall.SIGTERM)
	err := cmd.Wait()
	if code, _ := commandStatus(err); code != 128+int(syscall.SIGTERM) {
		t.Errorf("COMMAND ended with %v; want death by SIGTERM", err)
	}
	if ctx.Err() != nil {
		t.Error("the wait was stopped")
	}
}

// TestTerminateOnCancel checks that COMMAND gets SIGTERM when the section's
// context ends (the lease was lost), and that the cause is reported.
func TestTerminateOnCancel(t *testing.T) {
	noLeak(t)
	cmd := startSleeper(t)
	ctx, cancel := context.WithCancelCause(context.Background())
	c := &child{}
	stop := c.terminateOnCancel(ctx, cmd.Process)
	lost := fmt.Errorf("%w: n", spanmutex.ErrLeaseLost)
	cancel(lost)
	err := cmd.Wait()
	if cause := stop(); !errors.Is(cause, spanmutex.ErrLeaseLost) {
		t.Errorf("stop() = %v, want the lease-lost cause", cause)
	}
	if code, _ := commandStatus(err); code != 128+int(syscall.SIGTERM) {
		t.Errorf("COMMAND ended with %v; want death by SIGTERM", err)
	}

	// A COMMAND that ends by itself is left alone and nothing is reported.
	done := exec.Command("true")
	if err := done.Start(); err != nil {
		t.Fatal(err)
	}
	stop = c.terminateOnCancel(context.Background(), done.Process)
	if err := done.Wait(); err != nil {
		t.Fatal(err)
	}
	if cause := stop(); cause != nil {
		t.Errorf("stop() = %v for a COMMAND that ended by itself", cause)
	}
}
