//go:build linux

package main

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"testing"
)

// TestCommandOutlivesThreadChurn: the kernel sends Pdeathsig when the
// thread that forked COMMAND exits, and Go ends the thread of a goroutine
// that exits locked to it. After many such threads have ended, COMMAND,
// started by startCommand, must still run; then it dies of nothing but
// what it is sent.
func TestCommandOutlivesThreadChurn(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	wait, err := startCommand(cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = wait() })
	for range 50 {
		var wg sync.WaitGroup
		for range 2 * runtime.GOMAXPROCS(0) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
			}()
		}
		wg.Wait()
	}
	if !processAlive(cmd.Process.Pid) {
		t.Fatal("COMMAND died when threads ended: Pdeathsig fired while its spanmutex lives")
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if code, _ := commandStatus(wait()); code != 128+int(syscall.SIGTERM) {
		t.Errorf("COMMAND ended with status %d; want death by the SIGTERM sent", code)
	}
}
