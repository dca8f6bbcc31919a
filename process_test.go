//go:build unix

package spanmutex

// A harness for tests whose contenders are separate OS processes, as the
// replicas of a service are: the test binary re-executes itself as a
// contender (see process_child_test.go), which opens its own Spanner client,
// uses only the public API, and writes what it does as JSON lines on its
// stdout. Nothing is shared between contenders but the database (and, where
// a test says so, files).

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// procSpecEnv names the environment variable that makes the test binary a
// contender process: it holds the JSON of a procSpec.
const procSpecEnv = "SPANMUTEX_TEST_CONTENDER"

// procSpec is what a contender process is told to do.
type procSpec struct {
	Role     string        // "counter", "storm", "interactive", "candidate", "observer", "semaphore", "many", "semmany" or "sections"
	ID       string        // the process's name in the test, and its owner prefix
	Database string        // the database path
	Lock     string        // the lock's name
	Lease    time.Duration // WithLease; 0: the default
	Jitter   float64       // WithJitter; 0: none, not the default
	// Counter: increments to make. Storm: how long to run, and the range
	// of the random deadlines of its Lock calls.
	Count                    int
	Duration                 time.Duration
	MinDeadline, MaxDeadline time.Duration
	Hold                     time.Duration // storm: how long a lease is held before its Unlock
	Dir                      string        // the counter's directory
	// Listen makes the process's Locks share one Scope that listens for
	// wake-ups (ListenScope on 127.0.0.1:0).
	Listen bool
	// Election makes an interactive or candidate process campaign in the
	// election named Lock, with its ID as value, instead of locking.
	Election bool
	// Holds and Waits are the locks a "many" process holds and waits on
	// (runMany).
	Holds, Waits []string
	// Sessions makes a "many", "semmany" or "sections" process's Scope
	// hold through sessions (WithSessions).
	Sessions bool
	// RHolds are the RWLocks a "semmany" process holds for reading, and
	// Size the size of its Semaphores, of which it holds (and waits for)
	// Count permits each (runSemMany).
	RHolds []string
	Size   int64
	// scope is that Scope, in the contender process.
	scope *Scope
}

// procEvent is one line of a contender's history.
type procEvent struct {
	Proc string `json:"proc"`
	Seq  int    `json:"seq"`
	// Kind: ready, lock, unlock, guard, hold, lost, count, exit, fatal.
	Kind string `json:"kind"`
	Call int    `json:"call,omitempty"` // which call of the process
	// Owner, Token, TookOver, HandedOff and AcquiredAt describe the lease
	// the event is about, if any.
	Owner      string    `json:"owner,omitempty"`
	Token      int64     `json:"token,omitempty"`
	TookOver   bool      `json:"took_over,omitempty"`
	HandedOff  bool      `json:"handed_off,omitempty"`
	AcquiredAt time.Time `json:"acquired_at,omitzero"`
	// Reads and WakeUps, for an interactive lock call: the Lock's reads so
	// far, and the wake-ups its Scope received from other processes.
	Reads   int64 `json:"reads,omitempty"`
	WakeUps int64 `json:"wake_ups,omitempty"`
	// Start and End are the local wall clock (Unix ns) around the call:
	// comparable across the processes of one machine, never with Spanner's.
	Start int64 `json:"start"`
	End   int64 `json:"end"`
	// Deadline is the ctx deadline the call was given, if any.
	Deadline time.Duration `json:"deadline,omitempty"`
	// Outcome is what a Mutex's Run returned ("sections" role).
	Outcome string `json:"outcome,omitempty"`
	// Err is the error's text; Class what it matches (errClass); Code its
	// gRPC code (spanner.ErrCode).
	Err   string `json:"err,omitempty"`
	Class string `json:"class,omitempty"`
	Code  string `json:"code,omitempty"`
}

// ok reports whether the event's call succeeded.
func (e procEvent) ok() bool { return e.Err == "" }

// took is how long the event's call took, by the local clock.
func (e procEvent) took() time.Duration { return time.Duration(e.End - e.Start) }

// contender is a contender process started by a test.
type contender struct {
	spec   procSpec
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr lockedBuffer
	done   chan struct{} // closed once the process has exited and its stdout is read

	mu     sync.Mutex
	events []procEvent
	raw    []string      // stdout lines that are not events
	notify chan struct{} // signalled (without blocking) on every new event
}

// lockedBuffer is a bytes.Buffer safe for the writer goroutine of exec.Cmd
// and the test reading it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startContender re-executes the test binary as a contender doing spec, in a
// process group of its own, pointed at the test emulator. The test's
// clean-up kills whatever is left of it (stopped or not).
func startContender(t *testing.T, spec procSpec) *contender {
	t.Helper()
	needEmulator(t)
	js, err := json.Marshal(spec)
	require.NoError(t, err)
	c := &contender{spec: spec, done: make(chan struct{}), notify: make(chan struct{}, 1)}
	c.cmd = exec.Command(os.Args[0], "-test.run=^$")
	c.cmd.Env = append(os.Environ(), "SPANNER_EMULATOR_HOST="+emu.Host(), procSpecEnv+"="+string(js))
	c.cmd.Stderr = &c.stderr
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := c.cmd.StdoutPipe()
	require.NoError(t, err)
	c.stdin, err = c.cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, c.cmd.Start())
	go c.read(stdout)
	t.Cleanup(func() {
		c.signal(syscall.SIGKILL)
		<-c.done
	})
	return c
}

// read parses the process's stdout until it closes, then reaps the process.
func (c *contender) read(stdout io.Reader) {
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var e procEvent
		c.mu.Lock()
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.Kind == "" {
			c.raw = append(c.raw, sc.Text())
		} else {
			c.events = append(c.events, e)
		}
		c.mu.Unlock()
		select {
		case c.notify <- struct{}{}:
		default:
		}
	}
	_ = c.cmd.Wait()
	close(c.done)
}

// signal sends sig to the process's group (SIGKILL ends a stopped group
// too).
func (c *contender) signal(sig syscall.Signal) {
	_ = syscall.Kill(-c.cmd.Process.Pid, sig)
}

// send writes one command line to the process's stdin (interactive role).
func (c *contender) send(t *testing.T, command string) {
	t.Helper()
	_, err := io.WriteString(c.stdin, command+"\n")
	require.NoError(t, err, "%s: send %q", c.spec.ID, command)
}

// history returns the events so far.
func (c *contender) history() []procEvent {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]procEvent(nil), c.events...)
}

// await waits until the process has written an event of kind that match
// accepts (nil: any), beyond the first `after` events, and returns it and
// its index. It fails the test if the process exits first or timeout
// passes, showing the process's history and stderr.
func (c *contender) await(t *testing.T, timeout time.Duration, after int, kind string, match func(procEvent) bool) (procEvent, int) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		evs := c.history()
		for i := after; i < len(evs); i++ {
			if evs[i].Kind == kind && (match == nil || match(evs[i])) {
				return evs[i], i
			}
		}
		select {
		case <-c.notify:
		case <-c.done:
			if len(c.history()) == len(evs) {
				t.Fatalf("%s exited (%v) before a %q event:\n%s", c.spec.ID, c.cmd.ProcessState, kind, c.describe())
			}
		case <-deadline.C:
			t.Fatalf("%s: no %q event within %v:\n%s", c.spec.ID, kind, timeout, c.describe())
		}
	}
}

// wait waits for the process to exit by itself and fails the test unless it
// exits with status 0 within timeout.
func (c *contender) wait(t *testing.T, timeout time.Duration) {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-c.done:
	case <-timer.C:
		c.signal(syscall.SIGKILL)
		<-c.done
		t.Fatalf("%s did not exit within %v:\n%s", c.spec.ID, timeout, c.describe())
	}
	if code := c.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("%s exited with status %d:\n%s", c.spec.ID, code, c.describe())
	}
}

// describe renders the process's history, stray stdout and stderr for a
// failure message.
func (c *contender) describe() string {
	var b strings.Builder
	for _, e := range c.history() {
		js, _ := json.Marshal(e)
		fmt.Fprintf(&b, "  %s\n", js)
	}
	c.mu.Lock()
	for _, l := range c.raw {
		fmt.Fprintf(&b, "  stdout: %s\n", l)
	}
	c.mu.Unlock()
	if s := c.stderr.String(); s != "" {
		fmt.Fprintf(&b, "  stderr:\n%s", s)
	}
	return b.String()
}

// startContenders starts n contenders made by spec(i), and returns them.
func startContenders(t *testing.T, n int, spec func(i int) procSpec) []*contender {
	t.Helper()
	cs := make([]*contender, n)
	for i := range cs {
		cs[i] = startContender(t, spec(i))
	}
	return cs
}

// waitAll waits for every contender to exit with status 0 within timeout
// (in all), and returns their histories, concatenated.
func waitAll(t *testing.T, cs []*contender, timeout time.Duration) []procEvent {
	t.Helper()
	end := time.Now().Add(timeout)
	var all []procEvent
	for _, c := range cs {
		c.wait(t, max(time.Until(end), time.Millisecond))
		all = append(all, c.history()...)
	}
	return all
}
