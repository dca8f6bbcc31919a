//go:build unix

package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
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
