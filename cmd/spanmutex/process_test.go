//go:build unix

package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
	return startProcessOn(t, emu.Host(), nil, env, args...)
}

// startProcessOn is startProcess against the emulator at host, its stderr
// written to stderr (nil: kept in the process's buffer).
func startProcessOn(t *testing.T, host string, stderr io.Writer, env []string, args ...string) *process {
	t.Helper()
	p := &process{done: make(chan struct{})}
	p.cmd = exec.Command(binary, args...)
	p.cmd.Env = append(append(os.Environ(), "SPANNER_EMULATOR_HOST="+host), env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if stderr != nil {
		p.cmd.Stderr = stderr
	}
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

// waitForFile waits until path exists, while p runs.
func waitForFile(t *testing.T, p *process, path string, timeout time.Duration) {
	t.Helper()
	waitWhileRunning(t, p, path+" to appear", timeout, func() bool {
		_, err := os.Stat(path)
		return err == nil
	})
}

// waitForLines waits until the file at path has at least n lines, while p
// runs.
func waitForLines(t *testing.T, p *process, path string, n int, timeout time.Duration) {
	t.Helper()
	waitWhileRunning(t, p, fmt.Sprintf("%s to have %d lines", path, n), timeout, func() bool {
		b, err := os.ReadFile(path)
		return err == nil && strings.Count(string(b), "\n") >= n
	})
}

// waitWhileRunning polls done every 10 ms until it holds; it fails the test
// if p exits first or timeout passes (killing p).
func waitWhileRunning(t *testing.T, p *process, what string, timeout time.Duration, done func() bool) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !done() {
		select {
		case <-p.done:
			t.Fatalf("%v exited (%v) before waiting for %s was over; stderr:\n%s", p.cmd.Args, p.cmd.ProcessState, what, p.stderr.String())
		case <-deadline.C:
			p.killGroup()
			<-p.done
			t.Fatalf("waited %v for %s; stderr:\n%s", timeout, what, p.stderr.String())
		case <-tick.C:
		}
	}
}

// loseToTakeover starts "spanmutex sub" on name with a 2 s lease and a
// COMMAND that appends "got-term" to the returned file got when it receives
// SIGTERM, then freezes that holder (SIGSTOP to spanmutex only: COMMAND runs
// on) past the lease, so that a second "spanmutex sub" running
// secondScript (with secondEnv) takes over. Once the second has exited 0 (it
// fails the test otherwise), it resumes the holder, which is to find the
// lease lost.
func loseToTakeover(t *testing.T, sub, db, name string, secondEnv []string, secondScript string) (holder, second *process, got string) {
	t.Helper()
	return loseToTakeoverWith(t, sub, db, name, `trap 'echo got-term >> "$FILE"; exit 3' TERM; touch "$READY"; while :; do sleep 0.1; done`,
		secondEnv, secondScript)
}

// loseToTakeoverWith is loseToTakeover with the holder's COMMAND script,
// which gets READY (to touch once it runs) and FILE (got) in its
// environment.
func loseToTakeoverWith(t *testing.T, sub, db, name, holderScript string, secondEnv []string, secondScript string) (holder, second *process, got string) {
	t.Helper()
	dir := t.TempDir()
	ready, got := filepath.Join(dir, "READY"), filepath.Join(dir, "got")
	holder = startProcess(t, []string{"READY=" + ready, "FILE=" + got},
		sub, "--database", db, "--lease", "2s", name, "--", "sh", "-c", holderScript)
	waitForFile(t, holder, ready, 30*time.Second)
	pid := holder.cmd.Process.Pid
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })

	second = startProcess(t, secondEnv, sub, "--database", db, "--lease", "2s", name, "--", "sh", "-c", secondScript)
	if code := second.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("second process: exit %d; stderr:\n%s", code, second.stderr.String())
	}
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	return holder, second, got
}
