package lockbench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spanmutex/spanmutex/internal/bench"
	"github.com/spanmutex/spanmutex/internal/pace"
)

// MaybeChild makes this process a contender if ChildEnv is set: it runs
// the child's part and exits. Call it first thing in main and in TestMain.
func MaybeChild() {
	if os.Getenv(ChildEnv) == "" {
		return
	}
	if err := runChild(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "lockbench child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// runChild reads the spec from in and runs the child's part.
func runChild(in io.Reader, out io.Writer) error {
	lines := bufio.NewScanner(in)
	lines.Buffer(make([]byte, 1<<20), 1<<20)
	if !lines.Scan() {
		return fmt.Errorf("no spec on stdin: %v", lines.Err())
	}
	var sp spec
	if err := json.Unmarshal(lines.Bytes(), &sp); err != nil {
		return fmt.Errorf("spec: %w", err)
	}
	// The parent's next lines: "go START END", then (queue) "stop". EOF
	// (the parent died) stops the child too.
	cmds := make(chan string, 4)
	go func() {
		for lines.Scan() {
			cmds <- lines.Text()
		}
		close(cmds)
	}()
	say := func(s string) { fmt.Fprintln(out, s) }
	switch sp.Role {
	case roleLock:
		return runLockChild(sp, cmds, say)
	case roleQueue:
		return runQueueChild(sp, cmds, say)
	case roleRunOnce:
		return runRunOnceChild(sp, cmds, say)
	case roleIdle:
		return runIdleChild(sp, cmds, say)
	}
	return fmt.Errorf("unknown role %q", sp.Role)
}

// readyThenStart says "ready", waits for the "go START END" line and then
// until START, and returns the window.
func readyThenStart(ctx context.Context, cmds <-chan string, say func(string)) (start, end int64, err error) {
	say("ready")
	if start, end, err = awaitGo(cmds); err != nil {
		return 0, 0, err
	}
	return start, end, sleepUntil(ctx, start)
}

// awaitGo waits for the "go START END" line.
func awaitGo(cmds <-chan string) (start, end int64, err error) {
	line, ok := <-cmds
	if !ok {
		return 0, 0, errors.New("stdin closed before the go line")
	}
	f := strings.Fields(line)
	if len(f) != 3 || f[0] != "go" {
		return 0, 0, fmt.Errorf("want \"go START END\", got %q", line)
	}
	start, err1 := strconv.ParseInt(f[1], 10, 64)
	end, err2 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("bad go line %q", line)
	}
	return start, end, nil
}

// locker is one goroutine's handle on the lock under test.
type locker interface {
	lock(ctx context.Context) (grant, error)
	unlock(ctx context.Context) error
}

// fleet is a process's lockers and what they cost.
type fleet struct {
	lockers []locker
	rpcs    func() map[string]int64
	ops     func() (byOp, owed map[string]int64) // opsAndOwed
	lead    func() (time.Duration, bool)         // the last commit's lead (RPCCounter.LastCommitLead)
	close   func()
}

// opsAndOwed returns a snapshot function of r's calls by operation, and of
// those of them owed to aborts (RPCCounter.AbortedAttempts).
func opsAndOwed(r *bench.RPCCounter) func() (byOp, owed map[string]int64) {
	return func() (map[string]int64, map[string]int64) {
		byOp, _ := r.OpCounts()
		return byOp, r.AbortedAttempts()
	}
}

// unlockTimeout bounds an Unlock, which runs even after the drain ended.
const unlockTimeout = 30 * time.Second

// errorPause is how long a goroutine waits after a failed Lock call.
const errorPause = 100 * time.Millisecond

// runLockChild is a lock contender process: it makes its fleet of
// sp.Kind, says "ready", runs the fleet's lockers from the window's start
// until its end (calls under way may finish until the drain ends), writes
// its lockResult to sp.Out and says "done".
func runLockChild(sp spec, cmds <-chan string, say func(string)) error {
	ctx := context.Background()
	f, err := newLockerFleet(ctx, sp)
	if err != nil {
		return err
	}
	defer f.close()
	settle(ctx, f.rpcs)
	_, end, err := readyThenStart(ctx, cmds, say)
	if err != nil {
		return err
	}
	rpcsBefore := f.rpcs()
	opsBefore, abortedBefore := f.ops()

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	drainEnd := time.AfterFunc(time.Duration(end+int64(sp.Drain)-mono()), cancel)
	defer drainEnd.Stop()
	calls, errs, firstErr := contendAll(runCtx, sp, f.lockers, end)
	lead, _ := f.lead()
	ops, aborted := f.ops()
	res := lockResult{CommitLead: lead, Proc: sp.Proc, Calls: calls, RPCs: bench.RPCsSince(f.rpcs(), rpcsBefore),
		RPCsByOp: bench.RPCsSince(ops, opsBefore), AbortedByOp: bench.RPCsSince(aborted, abortedBefore),
		Errors: errs, FirstError: firstErr}
	if err := writeJSON(sp.Out, res); err != nil {
		return err
	}
	say("done")
	return nil
}

// newLockerFleet makes the fleet of lockers of sp.Kind.
func newLockerFleet(ctx context.Context, sp spec) (*fleet, error) {
	switch sp.Kind {
	case Spanmutex, SpanmutexPoll, Naive:
		return spannerFleet(ctx, sp)
	case Etcd:
		return etcdFleet(ctx, sp)
	}
	return nil, fmt.Errorf("unknown lock %q", sp.Kind)
}

// contendAll runs a goroutine per locker, each making Lock calls one after
// the other (contend) until ctx ends or, by mono, end has passed, and
// pausing after a call that failed. It returns every call made, how many
// errors the calls met, and the first.
func contendAll(ctx context.Context, sp spec, lockers []locker, end int64) (calls []call, errs int, firstErr string) {
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		errs++
		if firstErr == "" {
			firstErr = err.Error()
		}
	}
	for g, lk := range lockers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && mono() < end {
				c := contend(ctx, sp, g, lk, fail)
				mu.Lock()
				calls = append(calls, c)
				mu.Unlock()
				if !c.Acquired && !c.Cancelled {
					_ = pace.Sleep(ctx, errorPause)
				}
			}
		}()
	}
	wg.Wait()
	return calls, errs, firstErr
}

// contend makes one Lock call and, if it gets the lock, runs the critical
// section and unlocks.
func contend(ctx context.Context, sp spec, g int, lk locker, fail func(error)) call {
	c := call{Proc: sp.Proc, G: g, Called: mono()}
	gr, err := lk.lock(ctx)
	c.Returned = mono()
	if err != nil {
		if ctx.Err() != nil {
			c.Cancelled = true
		} else {
			fail(fmt.Errorf("lock: %w", err))
		}
		return c
	}
	c.Acquired, c.Token, c.HandedOff, c.Entry = true, gr.token, gr.handedOff, gr.entry
	overlap, err := critical(sp.Dir, sp.Hold)
	if err != nil {
		fail(fmt.Errorf("critical section: %w", err))
	}
	c.Overlap = overlap
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unlockTimeout)
	defer cancel()
	c.Released = mono()
	err = lk.unlock(uctx)
	c.Unlocked = mono()
	if err != nil {
		c.UnlockFailed = true
		fail(fmt.Errorf("unlock: %w", err))
	}
	return c
}

// The critical section checks mutual exclusion through the run's shared
// directory, across processes and locks alike: it creates the holder marker
// with O_EXCL (finding it there means another holder is inside: an
// overlap), reads the counter, holds for the hold time, writes the counter
// plus one and removes the marker. Lost increments (the counter ends below
// the acquisitions) show an overlap the marker missed.
const (
	holderFile  = "holder"
	counterFile = "counter"
)

func critical(dir string, hold time.Duration) (overlap bool, err error) {
	marker := filepath.Join(dir, holderFile)
	m, err := os.OpenFile(marker, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	switch {
	case err == nil:
		m.Close()
		defer os.Remove(marker)
	case errors.Is(err, fs.ErrExist):
		overlap = true
	default:
		return false, err
	}
	f, err := os.OpenFile(filepath.Join(dir, counterFile), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return overlap, err
	}
	defer f.Close()
	buf := make([]byte, 20)
	n, _ := f.ReadAt(buf, 0)
	count, _ := strconv.ParseInt(strings.TrimSpace(string(buf[:n])), 10, 64)
	if hold > 0 {
		time.Sleep(hold)
	}
	_, err = f.WriteAt([]byte(fmt.Sprintf("%020d", count+1)), 0)
	return overlap, err
}

// readCounter returns the counter a run's critical sections wrote.
func readCounter(dir string) (int64, error) {
	b, err := os.ReadFile(filepath.Join(dir, counterFile))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// settle waits until a child's clients have made no RPC for 100ms (at most
// 3s): new clients open sessions in the background, which the window's
// counts should not include.
func settle(ctx context.Context, rpcs func() map[string]int64) {
	last := bench.TotalRPCs(rpcs())
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if pace.Sleep(ctx, 100*time.Millisecond) != nil {
			return
		}
		now := bench.TotalRPCs(rpcs())
		if now == last {
			return
		}
		last = now
	}
}

func writeJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
