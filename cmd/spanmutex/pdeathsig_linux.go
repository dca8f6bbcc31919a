//go:build linux

package main

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// startCommand starts cmd so that the kernel kills it with SIGKILL if this
// process dies first (Pdeathsig), and returns the function that waits for
// it in place of cmd.Wait.
//
// SIGKILL rather than SIGTERM: once this process is dead, nothing forwards
// signals, gives the row back or renews the lease, and after the lease
// another process takes over and starts COMMAND again. COMMAND may trap or
// ignore SIGTERM; only SIGKILL guarantees that two COMMANDs never run at once.
//
// The kernel sends Pdeathsig when the thread that forked COMMAND exits, not
// the process (go.dev/issue/27505), and the Go runtime may end an idle
// thread. So COMMAND is forked on a goroutine locked to its thread, which
// also waits for it: the thread lives until COMMAND has exited.
func startCommand(cmd *exec.Cmd) (wait func() error, err error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	started := make(chan error, 1)
	waited := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// Unlocked only once COMMAND is reaped: the thread may then end.
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		waited <- cmd.Wait()
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return sync.OnceValue(func() error { return <-waited }), nil
}
