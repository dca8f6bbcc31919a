//go:build unix

package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spanmutex/spanmutex/internal/cmdline"
)

// TestEmulatorCommand starts "spanmutex emulator" with SPANNER_EMULATOR_HOST
// set, once per --dialect, uses the lines it exports to run a section and
// hold a lock there, and stops it with SIGTERM.
func TestEmulatorCommand(t *testing.T) {
	needBinary(t)
	t.Parallel()
	for _, dialect := range []string{"googlesql", "postgresql"} {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			emulatorCommand(t, dialect)
		})
	}
}

func emulatorCommand(t *testing.T, dialect string) {
	cmd := exec.Command(binary, "emulator", "--dialect", dialect)
	cmd.Env = append(os.Environ(), "SPANNER_EMULATOR_HOST="+emu.Host())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	lines := make(chan string, 10)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		_ = cmd.Wait() // after the pipe is drained, as Wait closes it
		close(exited)
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	})

	exports := map[string]string{}
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for len(exports) < 2 {
		select {
		case line, ok := <-lines:
			if !ok {
				<-exited
				t.Fatalf("emulator exited before printing its exports; stderr:\n%s", stderr.String())
			}
			k, v, found := strings.Cut(strings.TrimPrefix(line, "export "), "=")
			if !strings.HasPrefix(line, "export ") || !found {
				t.Fatalf("unexpected stdout line %q", line)
			}
			exports[k] = v
		case <-deadline.C:
			t.Fatal("no export lines within 30s")
		}
	}
	host, db := exports[cmdline.EmulatorHostEnv], exports[cmdline.DatabaseEnv]
	if host == "" || host == emu.Host() || cmdline.ValidateDatabasePath(db) != nil {
		t.Fatalf("exports %v: want a new emulator host (not %s) and a database path", exports, emu.Host())
	}

	p := startProcess(t, []string{cmdline.EmulatorHostEnv + "=" + host, cmdline.DatabaseEnv + "=" + db}, "run", "on-the-new-emulator", "--", "true")
	if code := p.wait(t, 60*time.Second); code != 0 || !strings.Contains(p.stderr.String(), "ran here") {
		t.Fatalf("run against the new emulator: exit %d; stderr:\n%s", code, p.stderr.String())
	}
	p = startProcess(t, []string{cmdline.EmulatorHostEnv + "=" + host, cmdline.DatabaseEnv + "=" + db}, "lock", "a-lock", "--", "true")
	if code := p.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("lock against the new emulator: exit %d; stderr:\n%s", code, p.stderr.String())
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Fatal("emulator did not stop within 30s of SIGTERM")
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit %d after SIGTERM, want 0; stderr:\n%s", code, stderr.String())
	}
	for _, want := range []string{"starting a separate emulator anyway", dialect + " database", "emulator stopped"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr does not say %q:\n%s", want, stderr.String())
		}
	}
}

// TestEmulatorCommandNoticesItsEmulatorDying kills (SIGKILL) the emulator
// process that "spanmutex emulator" started, once per --dialect: the
// command must say so in one line and exit 1 at once, not wait for a
// signal that never comes.
func TestEmulatorCommandNoticesItsEmulatorDying(t *testing.T) {
	needBinary(t)
	t.Parallel()
	for _, dialect := range []string{"googlesql", "postgresql"} {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(binary, "emulator", "--dialect", dialect)
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
			sc := bufio.NewScanner(stderr)
			var pid int
			for pid == 0 && sc.Scan() {
				if _, after, ok := strings.Cut(sc.Text(), " running (pid "); ok {
					pid, _ = strconv.Atoi(strings.SplitN(after, ",", 2)[0])
				}
			}
			if pid == 0 {
				t.Fatalf("no line naming the emulator's pid: %v", sc.Err())
			}
			killed := time.Now()
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			last := lastLine(t, sc, 10*time.Second)
			err = cmd.Wait()
			took := time.Since(killed)
			t.Logf("%v, %v after the emulator (pid %d) was killed: %s", err, took, pid, last)
			if code := cmd.ProcessState.ExitCode(); code != 1 {
				t.Errorf("exit %d, want 1", code)
			}
			if !strings.HasPrefix(last, "spanmutex: emulator: ") || !strings.Contains(last, fmt.Sprintf("(pid %d, ", pid)) ||
				!strings.Contains(last, "exited unexpectedly: signal: killed") {
				t.Errorf("last stderr line %q: want one saying the emulator (pid %d) was killed", last, pid)
			}
			if took > 5*time.Second {
				t.Errorf("took %v to notice; want within 5s", took)
			}
		})
	}
}

// lastLine returns the last line sc reads before its end, failing the test
// (the clean-up kills the process) if that takes longer than timeout.
func lastLine(t *testing.T, sc *bufio.Scanner, timeout time.Duration) string {
	t.Helper()
	done := make(chan string, 1)
	go func() {
		var last string
		for sc.Scan() {
			last = sc.Text()
		}
		done <- last
	}()
	select {
	case last := <-done:
		return last
	case <-time.After(timeout):
		t.Fatalf("stderr still open %v after the emulator was killed", timeout)
		return ""
	}
}
