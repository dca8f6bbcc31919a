//go:build unix

package main

import (
	"bytes"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// process is a spanmutex binary started by a test, in a process group of its
// own so that it can be killed together with COMMAND.
type process struct {
	cmd    *exec.Cmd
	stdout bytes.Buffer
	stderr bytes.Buffer
	done   chan struct{} // closed once the process has exited
	exited time.Time     // when Wait returned; read after done is closed
}

// startProcess starts the binary with args, pointed at the test emulator,
// with env added to its environment. The test's clean-up kills whatever is
// left of it.
func startProcess(t *testing.T, env []string, args ...string) *process {
	t.Helper()
	p := &process{done: make(chan struct{})}
	p.cmd = exec.Command(binary, args...)
	p.cmd.Env = append(append(os.Environ(), "SPANNER_EMULATOR_HOST="+emu.Host()), env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = p.cmd.Wait()
		p.exited = time.Now()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.killGroup()
		<-p.done
	})
	return p
}

// killGroup sends SIGKILL to the process and its children.
func (p *process) killGroup() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
}

// wait waits for the process to exit and returns its exit status; it fails
// the test if that takes longer than timeout.
func (p *process) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-timer.C:
		p.killGroup()
		<-p.done
		t.Fatalf("%v did not exit within %v; stderr:\n%s", p.cmd.Args, timeout, p.stderr.String())
		return -1
	}
}

// waitForFile waits until path exists, failing the test if p exits first or
// timeout passes.
func waitForFile(t *testing.T, p *process, path string, timeout time.Duration) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		select {
		case <-p.done:
			t.Fatalf("%v exited (%v) before %s appeared; stderr:\n%s", p.cmd.Args, p.cmd.ProcessState, path, p.stderr.String())
		case <-deadline.C:
			p.killGroup()
			<-p.done
			t.Fatalf("%s did not appear within %v; stderr:\n%s", path, timeout, p.stderr.String())
		case <-tick.C:
		}
	}
}
