package spangoose_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// replicaProc is a replica process started by a test.
type replicaProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	events chan replicaEvent // closed when its stdout ends
}

// startReplica starts a replica process running spec; it is killed when
// the test ends.
func startReplica(t *testing.T, spec replicaSpec) *replicaProc {
	t.Helper()
	if !filepath.IsAbs(spec.Dir) {
		dir, err := filepath.Abs(spec.Dir)
		require.NoError(t, err)
		spec.Dir = dir
	}
	js, err := json.Marshal(spec)
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), replicaEnv+"="+string(js))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	p := &replicaProc{cmd: cmd, stdin: stdin, events: make(chan replicaEvent, 8)}
	go func() {
		defer close(p.events)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var ev replicaEvent
			if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Event != "" {
				p.events <- ev
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return p
}

// await returns the replica's next event, which must be want, within d.
func (p *replicaProc) await(t *testing.T, want string, d time.Duration) replicaEvent {
	t.Helper()
	select {
	case ev, ok := <-p.events:
		require.True(t, ok, "replica pid %d exited before %q", p.cmd.Process.Pid, want)
		require.Equal(t, want, ev.Event, "replica pid %d: %+v", p.cmd.Process.Pid, ev)
		return ev
	case <-time.After(d):
		t.Fatalf("replica pid %d: no %q within %v", p.cmd.Process.Pid, want, d)
		return replicaEvent{}
	}
}

// begin tells the replica to run goose up.
func (p *replicaProc) begin(t *testing.T) {
	t.Helper()
	_, err := io.WriteString(p.stdin, "go\n")
	require.NoError(t, err)
}

// withDeadline is a ctx for a test's own reads.
func withDeadline(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}
