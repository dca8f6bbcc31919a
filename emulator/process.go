package emulator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"syscall"
	"time"
)

// process is an emulator_main we started.
type process struct {
	cmd    *exec.Cmd
	host   string
	exited chan struct{} // closed once cmd.Wait has returned
	log    *tailBuffer
	// stopping is closed by stop, before it signals the process.
	stopping chan struct{}
	// died is closed once the process has exited without stop asking.
	died chan struct{}
}

// startProcess starts bin on a free loopback port and waits until it accepts
// connections. A port taken between our probe and the emulator's bind makes
// the emulator exit, so a few ports are tried.
func startProcess(ctx context.Context, bin string, cfg config) (*process, error) {
	var lastErr error
	for try := 0; try < 3; try++ {
		p, err := startOnce(ctx, bin, cfg)
		if err == nil {
			return p, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, lastErr
}

func startOnce(ctx context.Context, bin string, cfg config) (*process, error) {
	host, err := freeLoopbackAddr()
	if err != nil {
		return nil, fmt.Errorf("emulator: find a free port: %w", err)
	}
	args := []string{"--host_port", host}
	if cfg.faultInjection {
		args = append(args, "--enable_fault_injection")
	}
	p := &process{host: host, exited: make(chan struct{}), stopping: make(chan struct{}), died: make(chan struct{}), log: &tailBuffer{max: 8 << 10}}
	var out io.Writer = p.log
	if cfg.log != nil {
		out = io.MultiWriter(p.log, cfg.log)
	}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout = out
	p.cmd.Stderr = out
	p.cmd.SysProcAttr = procAttr()
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("emulator: start %s: %w", bin, err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.exited)
		select {
		case <-p.stopping:
		default:
			close(p.died)
		}
	}()
	if err := waitForPort(ctx, host, p.exited, cfg.startTimeout); err != nil {
		_ = p.stop()
		return nil, fmt.Errorf("emulator: %s %v: %w; its log:\n%s", bin, args, err, p.log.String())
	}
	return p, nil
}

// stop ends the emulator: SIGTERM, then SIGKILL if it lingers. A paused
// (SIGSTOPped) emulator is continued first so that it can exit.
func (p *process) stop() error {
	select {
	case <-p.exited:
		return nil
	default:
	}
	close(p.stopping) // stop runs once: Emulator.Close guards it
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return nil
	case <-time.After(5 * time.Second):
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("emulator: kill pid %d: %w", p.cmd.Process.Pid, err)
	}
	<-p.exited
	return nil
}

func freeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	return addr, l.Close()
}
