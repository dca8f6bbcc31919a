package lockbench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// EtcdEnv, if set, gives the path of the etcd binary to start.
const EtcdEnv = "LOCKBENCH_ETCD"

// ErrEtcdNotFound is returned when no etcd binary can be found.
var ErrEtcdNotFound = errors.New("lockbench: etcd is not installed: run 'apt-get install etcd-server' (Debian; it installs etcd 3.4), or set " + EtcdEnv + " to the path of an etcd binary")

// FindEtcd returns the path of the etcd server binary: $LOCKBENCH_ETCD, or
// etcd on $PATH.
func FindEtcd() (string, error) {
	if p := os.Getenv(EtcdEnv); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%w (%s=%q: %v)", ErrEtcdNotFound, EtcdEnv, p, err)
		}
		return p, nil
	}
	p, err := exec.LookPath("etcd")
	if err != nil {
		return "", ErrEtcdNotFound
	}
	return p, nil
}

// EtcdVersion returns the first line of "etcd --version".
func EtcdVersion(bin string) string {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	line, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(line)
}

// etcdServer is an etcd we started: one member on two free loopback ports,
// its data in a temporary directory removed by stop.
type etcdServer struct {
	endpoint string
	cmd      *exec.Cmd
	dir      string
	log      *lockedBuffer
	exited   chan struct{}
}

// startEtcd starts a fresh etcd (fresh data directory, fresh ports) and
// waits until it answers a read.
func startEtcd(ctx context.Context, bin string) (*etcdServer, error) {
	dir, err := os.MkdirTemp("", "lockbench-etcd-")
	if err != nil {
		return nil, err
	}
	client, peer := freePort(), freePort()
	if client == "" || peer == "" {
		os.RemoveAll(dir)
		return nil, errors.New("lockbench: no free loopback port for etcd")
	}
	s := &etcdServer{endpoint: "http://" + client, dir: dir, log: &lockedBuffer{}, exited: make(chan struct{})}
	s.cmd = exec.Command(bin,
		"--name", "lockbench",
		"--data-dir", dir,
		"--listen-client-urls", "http://"+client,
		"--advertise-client-urls", "http://"+client,
		"--listen-peer-urls", "http://"+peer,
		"--initial-advertise-peer-urls", "http://"+peer,
		"--initial-cluster", "lockbench=http://"+peer,
		"--logger", "zap", "--log-outputs", "stderr", "--log-level", "warn")
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("lockbench: start %s: %w", bin, err)
	}
	go func() { _ = s.cmd.Wait(); close(s.exited) }()
	if err = s.awaitReady(ctx); err != nil {
		s.stop()
		return nil, fmt.Errorf("lockbench: etcd at %s: %w; its log ends: %s", s.endpoint, err, s.log.tail(800))
	}
	return s, nil
}

func (s *etcdServer) awaitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		select {
		case <-s.exited:
			return errors.New("etcd exited before it served a read")
		default:
		}
		c, err := clientv3.New(clientv3.Config{Endpoints: []string{s.endpoint}, DialTimeout: time.Second, Logger: zap.NewNop()})
		if err == nil {
			rctx, rcancel := context.WithTimeout(ctx, time.Second)
			_, err = c.Get(rctx, "lockbench-ready")
			rcancel()
			c.Close()
			if err == nil {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready: %w (last error: %v)", ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stop kills etcd and removes its data directory.
func (s *etcdServer) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
	os.RemoveAll(s.dir)
}

// freePort returns a loopback host:port that was free a moment ago, or "".
func freePort() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return ""
	}
	defer l.Close()
	return l.Addr().String()
}

// lockedBuffer is a bytes.Buffer safe for concurrent writes: a child's or a
// server's stderr.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// tail returns the last n bytes written, on one line.
func (b *lockedBuffer) tail(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.buf.String()
	if len(s) > n {
		s = "…" + s[len(s)-n:]
	}
	return strings.TrimSpace(strings.ReplaceAll(s, "\n", " | "))
}
