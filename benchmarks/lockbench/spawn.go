package lockbench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// child is a contender process we started: this binary again, with
// ChildEnv set (see protocol.go).
type child struct {
	proc   int
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string // its stdout, line by line; closed at EOF
	stderr *lockedBuffer
	exited chan struct{}
}

// spawn starts a child and sends it sp.
func spawn(sp spec) (*child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("lockbench: find this binary to start contenders: %w", err)
	}
	c := &child{proc: sp.Proc, lines: make(chan string, 64), stderr: &lockedBuffer{}, exited: make(chan struct{})}
	c.cmd = exec.Command(self)
	c.cmd.Env = append(os.Environ(), ChildEnv+"=1")
	c.cmd.Stderr = c.stderr
	// A child dies with its parent: an interrupted benchmark leaves none.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("lockbench: start a contender process: %w", err)
	}
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			c.lines <- s.Text()
		}
		close(c.lines)
		_ = c.cmd.Wait()
		close(c.exited)
	}()
	b, _ := json.Marshal(sp)
	if err := c.send(string(b)); err != nil {
		c.kill()
		return nil, err
	}
	return c, nil
}

func (c *child) send(line string) error {
	if _, err := io.WriteString(c.stdin, line+"\n"); err != nil {
		return fmt.Errorf("lockbench: process %d: %w", c.proc, c.failure(err))
	}
	return nil
}

// expect waits for a line starting with prefix, skipping others, and
// returns it.
func (c *child) expect(ctx context.Context, prefix string, timeout time.Duration) (string, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		select {
		case line, ok := <-c.lines:
			if !ok {
				<-c.exited
				return "", fmt.Errorf("lockbench: process %d exited before saying %q: %w", c.proc, prefix, c.failure(errors.New("no more output")))
			}
			if strings.HasPrefix(line, prefix) {
				return line, nil
			}
		case <-t.C:
			return "", fmt.Errorf("lockbench: process %d did not say %q within %v: %w", c.proc, prefix, timeout, c.failure(errors.New("timed out")))
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

// failure adds what the child wrote to stderr to err.
func (c *child) failure(err error) error {
	if s := c.stderr.tail(1500); s != "" {
		return fmt.Errorf("%w; its stderr: %s", err, s)
	}
	return err
}

// finish closes the child's stdin and waits for it to exit, killing it
// after timeout.
func (c *child) finish(timeout time.Duration) {
	_ = c.stdin.Close()
	select {
	case <-c.exited:
	case <-time.After(timeout):
		c.kill()
	}
}

func (c *child) kill() {
	_ = c.cmd.Process.Kill()
	<-c.exited
}

// spawnAll starts a child per spec and waits until every one is ready. On
// error it kills those it started.
func spawnAll(ctx context.Context, specs []spec) ([]*child, error) {
	var cs []*child
	killAll := func() {
		for _, c := range cs {
			c.kill()
		}
	}
	for _, sp := range specs {
		c, err := spawn(sp)
		if err != nil {
			killAll()
			return nil, err
		}
		cs = append(cs, c)
	}
	for _, c := range cs {
		if _, err := c.expect(ctx, "ready", 2*time.Minute); err != nil {
			killAll()
			return nil, err
		}
	}
	return cs, nil
}

// spawnProcs starts n children of base, one per process index, each
// writing its result to result-<index>.json in base.Dir, and waits until
// every one is ready. finish waits for (or kills) them all.
func spawnProcs(ctx context.Context, base spec, n int) (specs []spec, cs []*child, finish func(), err error) {
	specs = make([]spec, n)
	for p := range specs {
		specs[p] = base
		specs[p].Proc = p
		specs[p].Out = filepath.Join(base.Dir, fmt.Sprintf("result-%d.json", p))
	}
	if cs, err = spawnAll(ctx, specs); err != nil {
		return nil, nil, nil, err
	}
	return specs, cs, func() {
		for _, c := range cs {
			c.finish(5 * time.Second)
		}
	}, nil
}

// startLead is how far ahead of "now" the window starts, so that every
// child has read its go line before it opens.
const startLead = 300 * time.Millisecond

// goAll tells every child the window, starting startLead from now, and
// returns it.
func goAll(cs []*child, window time.Duration) (start, end int64, err error) {
	start = mono() + int64(startLead)
	end = start + int64(window)
	for _, c := range cs {
		if err := c.send(fmt.Sprintf("go %d %d", start, end)); err != nil {
			return 0, 0, err
		}
	}
	return start, end, nil
}
