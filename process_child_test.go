//go:build unix

package spanmutex

// The contender side of the process harness (process_test.go): when the
// test binary starts with procSpecEnv set, it runs the role described there
// instead of the tests, and exits. A contender opens its own Spanner client
// and uses only the public API.

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"cloud.google.com/go/spanner"
)

// init turns the test binary into a contender process when procSpecEnv is
// set; TestMain (and so the emulator it starts) is never reached then.
func init() {
	if js := os.Getenv(procSpecEnv); js != "" {
		os.Exit(runContender(js))
	}
}

// runContender runs the role of the procSpec in js and returns the exit
// status: 0 if the role ended without a fatal error.
func runContender(js string) int {
	var spec procSpec
	if err := json.Unmarshal([]byte(js), &spec); err != nil {
		fmt.Fprintf(os.Stderr, "contender: bad %s: %v\n", procSpecEnv, err)
		return 2
	}
	out := &eventWriter{proc: spec.ID}
	ctx := context.Background()
	client, err := openContenderClient(ctx, spec.Database)
	if err != nil {
		out.fatal(err)
		return 1
	}
	defer client.Close()
	if spec.Listen {
		if spec.scope, err = ListenScope("127.0.0.1:0", ""); err != nil {
			out.fatal(err)
			return 1
		}
		defer spec.scope.Close()
	}
	out.emit(procEvent{Kind: "ready"})
	roles := map[string]func(context.Context, *spanner.Client, procSpec, *eventWriter) error{
		"counter": runCounter, "storm": runStorm, "interactive": runInteractive,
		"candidate": runCandidate, "observer": runObserver,
		"semaphore": runSemaphore, "many": runMany,
		"semmany": runSemMany, "sections": runSections,
	}
	role := roles[spec.Role]
	if role == nil {
		out.fatal(fmt.Errorf("unknown role %q", spec.Role))
		return 2
	}
	if err := role(ctx, client, spec, out); err != nil {
		out.fatal(err)
		return 1
	}
	out.emit(procEvent{Kind: "exit"})
	return 0
}

// openContenderClient opens a client of db as a service replica would; the
// client finds the emulator through SPANNER_EMULATOR_HOST. Its session pool
// starts small: twenty processes each opening a hundred sessions would only
// slow the emulator down.
func openContenderClient(ctx context.Context, db string) (*spanner.Client, error) {
	cfg := spanner.ClientConfig{SessionPoolConfig: spanner.DefaultSessionPoolConfig, DisableNativeMetrics: true}
	cfg.SessionPoolConfig.MinOpened = 4
	return spanner.NewClientWithConfig(ctx, db, cfg)
}

// options are the Lock options of spec, with owner as the owner identity.
func (s procSpec) options(owner string) []LockOption {
	opts := []LockOption{WithOwner(owner)}
	for _, o := range s.shared() {
		opts = append(opts, o)
	}
	return opts
}

// shared are the options of spec but the owner (which an Election's
// candidate does not take), logging to a file named for spec.ID.
func (s procSpec) shared() []ElectionOption {
	owner := s.ID
	opts := []ElectionOption{WithJitter(s.Jitter)}
	if s.scope != nil {
		opts = append(opts, WithScope(s.scope))
	}
	// SPANMUTEX_TEST_LOG_DIR=DIR makes each contender log its decisions to DIR/OWNER.log.
	if dir := os.Getenv("SPANMUTEX_TEST_LOG_DIR"); dir != "" {
		f, _ := os.OpenFile(dir+"/"+owner+".log", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		opts = append(opts, WithLogger(slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	}
	if s.Lease > 0 {
		opts = append(opts, WithLease(s.Lease))
	}
	return opts
}

// eventWriter writes a contender's events to stdout as JSON lines, one write
// per event, numbered in the order written. Safe for concurrent use.
type eventWriter struct {
	proc string
	mu   sync.Mutex
	seq  int
}

func (w *eventWriter) emit(e procEvent) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seq++
	e.Proc, e.Seq = w.proc, w.seq
	if e.End == 0 {
		e.End = time.Now().UnixNano()
	}
	if e.Start == 0 {
		e.Start = e.End
	}
	js, _ := json.Marshal(e)
	os.Stdout.Write(append(js, '\n'))
}

// fatal records the error that ends the contender.
func (w *eventWriter) fatal(err error) {
	w.emit(withErr(procEvent{Kind: "fatal"}, err))
}

// leaseEvent describes a call of kind, the call-th of the process, begun at
// local time start, about lease (nil if none), that returned err.
func leaseEvent(kind string, call int, lease *Lease, start time.Time, err error) procEvent {
	e := procEvent{Kind: kind, Call: call, Start: start.UnixNano(), End: time.Now().UnixNano()}
	if lease != nil {
		e.Owner, e.Token, e.TookOver, e.HandedOff, e.AcquiredAt =
			lease.Owner(), lease.Token(), lease.TookOver(), lease.HandedOff(), lease.AcquiredAt()
	}
	return withErr(e, err)
}

// withErr fills in e's error fields from err.
func withErr(e procEvent, err error) procEvent {
	if err != nil {
		e.Err, e.Class = err.Error(), errClass(err)
		e.Code = spanner.ErrCode(err).String()
	}
	return e
}

// errClass names what err matches, among the errors Lock, Unlock and Guard
// document: "not-obtained", "exhausted", "held", "lease-lost"; "other" for
// anything else (such as a raw Spanner error).
func errClass(err error) string {
	var (
		outage *outageError
		held   *HeldError
	)
	switch {
	case errors.Is(err, ErrNotObtained):
		return "not-obtained"
	case errors.As(err, &outage):
		return "exhausted"
	case errors.As(err, &held):
		return "held"
	case errors.Is(err, ErrLeaseLost):
		return "lease-lost"
	}
	return "other"
}

// runInteractive runs one Lock (or, with spec.Election, one candidate of
// an Election), driven by commands read from stdin, one a line, until
// "exit" or the end of stdin:
//
//	lock [DURATION]  Lock (Campaign), with that ctx timeout (default 2m)
//	trylock          TryLock (a Lock only)
//	unlock           Unlock (Resign)
//	guard            a guarded write to History (guardedWrite) with the lease
//	hold DURATION    keep the lease that long (renewing), or until it is lost
//	lockc            Lock whose ctx is cancelled when the process gets SIGUSR1,
//	                 which writes a "cancel" event just after cancelling
//	queue N          N more Lock calls, each of a Lock of its own sharing one
//	                 Scope, in the background ("queue" event at once; each
//	                 writes a "lock" event when it returns)
//
// Each command writes one event of its name; a lease that is lost writes a
// "lost" event when its Done closes.
func runInteractive(ctx context.Context, client *spanner.Client, spec procSpec, out *eventWriter) error {
	h, err := newHolder(client, spec)
	if err != nil {
		return err
	}
	var lease *Lease
	sc := bufio.NewScanner(os.Stdin)
	for call := 1; sc.Scan(); call++ {
		cmd, arg, _ := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		if cmd == "exit" {
			return nil
		}
		var d time.Duration
		if arg != "" {
			if cmd == "queue" { // a count, carried as a Duration
				arg += "ns"
			}
			if d, err = time.ParseDuration(arg); err != nil {
				return fmt.Errorf("command %q: %w", sc.Text(), err)
			}
		}
		if lease, err = interactiveCommand(ctx, client, h, lease, cmd, d, call, out); err != nil {
			return err
		}
	}
	return sc.Err()
}

// contended is what an interactive contender holds: a Lock, or a
// candidate's leadership.
type contended interface {
	acquire(ctx context.Context, try bool) (*Lease, error)
	release(ctx context.Context) error
	reads() int64
	wakeUps() int64
}

// newHolder makes spec's Lock, or its Election candidate.
func newHolder(client *spanner.Client, spec procSpec) (contended, error) {
	if !spec.Election {
		l, err := NewLock(client, spec.Lock, spec.options(spec.ID)...)
		return lockHolder{l, spec}, err
	}
	e, err := NewElection(client, spec.Lock, spec.shared()...)
	return &candidate{e: e, value: spec.ID}, err
}

type lockHolder struct {
	l    *Lock
	spec procSpec
}

func (h lockHolder) acquire(ctx context.Context, try bool) (*Lease, error) {
	if try {
		return h.l.TryLock(ctx)
	}
	return h.l.Lock(ctx)
}
func (h lockHolder) release(ctx context.Context) error { return h.l.Unlock(ctx) }
func (h lockHolder) reads() int64                      { return h.l.ops().reads }
func (h lockHolder) wakeUps() int64                    { return h.l.scope.wakeUps().received }

// candidate campaigns for spec.Lock's election with value.
type candidate struct {
	e     *Election
	value string
	ld    *Leadership
}

func (c *candidate) acquire(ctx context.Context, try bool) (*Lease, error) {
	if try {
		return nil, errors.New("an election has no TryLock")
	}
	ld, err := c.e.Campaign(ctx, c.value)
	if err != nil {
		return nil, err
	}
	c.ld = ld
	return ld.Lease(), nil
}

func (c *candidate) release(ctx context.Context) error {
	if c.ld == nil {
		return errors.New("resign without a leadership")
	}
	return c.ld.Resign(ctx)
}
func (c *candidate) reads() int64   { return c.e.sp.stats.snapshot().reads }
func (c *candidate) wakeUps() int64 { return c.e.cfg.scope.wakeUps().received }

// interactiveCommand runs one command of runInteractive (with its duration
// argument d, or 0) on l, which holds lease (nil if none), writes its
// event, and returns the lease held afterwards. Only an unknown command is
// an error: a call's error is recorded in its event.
func interactiveCommand(ctx context.Context, client *spanner.Client, h contended, lease *Lease, cmd string, d time.Duration, call int, out *eventWriter) (*Lease, error) {
	start := time.Now()
	switch cmd {
	case "lock", "trylock":
		lctx, cancel := context.WithTimeout(ctx, cmp.Or(d, 2*time.Minute))
		defer cancel()
		var err error
		lease, err = h.acquire(lctx, cmd == "trylock")
		e := leaseEvent(cmd, call, lease, start, err)
		e.Reads, e.WakeUps = h.reads(), h.wakeUps()
		out.emit(e)
		if lease != nil {
			go reportLoss(lease, call, out)
		}
	case "lockc":
		lctx, cancel := cancelOnSignal(ctx, call, out)
		defer cancel()
		var err error
		lease, err = h.acquire(lctx, false)
		out.emit(leaseEvent(cmd, call, lease, start, err))
		if lease != nil {
			go reportLoss(lease, call, out)
		}
	case "queue":
		if err := queueCalls(ctx, client, h, int(d), call, out); err != nil {
			return lease, err
		}
		out.emit(procEvent{Kind: cmd, Call: call, Start: start.UnixNano(), End: time.Now().UnixNano()})
	case "unlock":
		uctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		out.emit(leaseEvent(cmd, call, lease, start, h.release(uctx)))
		lease = nil
	case "guard":
		gctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		out.emit(leaseEvent(cmd, call, lease, start, guardedWrite(gctx, client, lease)))
	case "hold":
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-lease.Done():
		}
		out.emit(leaseEvent(cmd, call, lease, start, lease.Err()))
	default:
		return lease, fmt.Errorf("unknown command %q", cmd)
	}
	return lease, nil
}

// cancelOnSignal returns a ctx that is cancelled when the process gets
// SIGUSR1, after which a "cancel" event of call is written.
func cancelOnSignal(ctx context.Context, call int, out *eventWriter) (context.Context, context.CancelFunc) {
	lctx, cancel := context.WithCancel(ctx)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1)
	go func() {
		defer signal.Stop(sig)
		select {
		case <-sig:
			start := time.Now()
			cancel()
			out.emit(procEvent{Kind: "cancel", Call: call, Start: start.UnixNano(), End: time.Now().UnixNano()})
		case <-lctx.Done():
		}
	}()
	return lctx, cancel
}

// queueCalls starts n Lock calls of h's lock in the background, each of a
// Lock of its own, all sharing one Scope (the process's, or a new one).
func queueCalls(ctx context.Context, client *spanner.Client, h contended, n, call int, out *eventWriter) error {
	lh, ok := h.(lockHolder)
	if !ok {
		return errors.New("queue: a Lock only")
	}
	scope := lh.l.scope
	for i := range n {
		l, err := NewLock(client, lh.l.name, append(lh.spec.options(lh.spec.ID), WithScope(scope))...)
		if err != nil {
			return err
		}
		go func() {
			start := time.Now()
			lease, err := l.Lock(ctx)
			out.emit(leaseEvent("lock", call*100+i, lease, start, err))
		}()
	}
	return nil
}

// reportLoss writes a "lost" event, with Lease.Err, when lease's Done closes.
func reportLoss(lease *Lease, call int, out *eventWriter) {
	<-lease.Done()
	out.emit(leaseEvent("lost", call, lease, time.Now(), lease.Err()))
}

// runSemaphore runs one Semaphore (or RWLock) of spec.Lock, driven by
// commands read from stdin, one a line, until "exit" or the end of stdin:
//
//	new SIZE          make the Semaphore, of SIZE permits
//	rwlock            make an RWLock instead
//	acquire N         Acquire N permits (a 2m ctx)
//	rlock, lock       RLock, Lock (a 2m ctx)
//	release           Release
//	runlock, unlock   RUnlock, Unlock
//	admit RESOURCE    Fence.Admit of RESOURCE with the lease's token: class
//	                  "stale-token" when the fence refuses it
//	count N           N holds of 1 permit, each counted in the shared file
//	                  spec.Dir/semcount for spec.Duration (holdCounted):
//	                  an "acquire" and a "release" event each, then "count"
//
// Each command writes one event of its name; a lease that acquire, rlock
// or lock took writes a "lost" event when its Done closes. Only an unknown
// command is an error: a call's error is recorded in its event.
func runSemaphore(ctx context.Context, client *spanner.Client, spec procSpec, out *eventWriter) error {
	fence, err := NewFence(client)
	if err != nil {
		return err
	}
	c := &semContender{client: client, spec: spec, fence: fence, out: out}
	sc := bufio.NewScanner(os.Stdin)
	for call := 1; sc.Scan(); call++ {
		cmd, arg, _ := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		if cmd == "exit" {
			return nil
		}
		if err := c.command(ctx, cmd, arg, call); err != nil {
			return fmt.Errorf("command %q: %w", sc.Text(), err)
		}
	}
	return sc.Err()
}

// semContender is what runSemaphore holds: its Semaphore or RWLock, and
// the lease taken by the last acquire, rlock or lock (nil if none).
type semContender struct {
	client *spanner.Client
	spec   procSpec
	fence  *Fence
	out    *eventWriter
	sem    *Semaphore
	rw     *RWLock
	lease  *Lease
}

// command runs one command of runSemaphore, with its argument arg, and
// writes its event.
func (c *semContender) command(ctx context.Context, cmd, arg string, call int) error {
	start := time.Now()
	var n int64
	if cmd == "new" || cmd == "acquire" || cmd == "count" {
		if _, err := fmt.Sscan(arg, &n); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var err error
	switch cmd {
	case "new":
		c.sem, err = NewSemaphore(c.client, c.spec.Lock, n, c.spec.options(c.spec.ID)...)
	case "rwlock":
		c.rw, err = NewRWLock(c.client, c.spec.Lock, c.spec.options(c.spec.ID)...)
	case "acquire", "rlock", "lock":
		c.lease, err = c.acquire(ctx, cmd, n)
		if c.lease != nil {
			go reportLoss(c.lease, call, c.out)
		}
	case "release", "runlock", "unlock":
		err = c.release(ctx, cmd)
	case "admit":
		err = c.fence.Admit(ctx, arg, c.spec.Lock, c.lease.Token())
	case "count":
		err = c.count(ctx, n, call)
	default:
		return fmt.Errorf("unknown command %q", cmd)
	}
	e := leaseEvent(cmd, call, c.lease, start, err)
	if errors.Is(err, ErrStaleToken) {
		e.Class = "stale-token"
	}
	c.out.emit(e)
	if cmd == "release" || cmd == "runlock" || cmd == "unlock" {
		c.lease = nil
	}
	return nil
}

// acquire runs the acquire, rlock or lock command cmd (n permits).
func (c *semContender) acquire(ctx context.Context, cmd string, n int64) (*Lease, error) {
	switch cmd {
	case "rlock":
		return c.rw.RLock(ctx)
	case "lock":
		return c.rw.Lock(ctx)
	}
	return c.sem.Acquire(ctx, n)
}

// release runs the release, runlock or unlock command cmd.
func (c *semContender) release(ctx context.Context, cmd string) error {
	switch cmd {
	case "runlock":
		return c.rw.RUnlock(ctx)
	case "unlock":
		return c.rw.Unlock(ctx)
	}
	return c.sem.Release(ctx)
}

// count makes n holds of one permit of the Semaphore, the call-th
// command's: each Acquire writes an "acquire" event and each Release a
// "release" event (calls call*100+i). The first error ends it.
func (c *semContender) count(ctx context.Context, n int64, call int) error {
	for i := range int(n) {
		start := time.Now()
		lease, err := c.sem.Acquire(ctx, 1)
		c.out.emit(leaseEvent("acquire", call*100+i, lease, start, err))
		if err != nil {
			return err
		}
		err = holdCounted(c.spec.Dir, lease, c.spec.Duration)
		start = time.Now()
		rerr := c.sem.Release(ctx)
		c.out.emit(leaseEvent("release", call*100+i, lease, start, rerr))
		if err = errors.Join(err, rerr); err != nil {
			return err
		}
	}
	return nil
}

// semCountFile, in a count's spec.Dir, holds "HOLDERS MOST HOLDS": how many
// processes count themselves holders now, the most that ever did at once,
// and how many holds were counted. It changes only under flock.
const semCountFile = "semcount"

// holdCounted counts lease's holder in dir's semCountFile for d, or until
// the lease ends: in when it begins, out when it ends. It fails if the
// lease ended meanwhile, when the holder might have been counted beside
// the permits' next holder rightly.
func holdCounted(dir string, lease *Lease, d time.Duration) error {
	if err := semCount(dir, +1); err != nil {
		return err
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-lease.Done():
	}
	return errors.Join(lease.Err(), semCount(dir, -1))
}

// semCount adds delta (+1 or -1) to the holders of dir's semCountFile,
// under an exclusive flock: +1 counts a hold, and raises the most held at
// once if the holders now outnumber it.
func semCount(dir string, delta int64) (err error) {
	f, err := os.OpenFile(dir+"/"+semCountFile, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, f.Close()) }() // the flock goes with the file
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	var holders, most, holds int64
	if st, err := f.Stat(); err != nil {
		return err
	} else if st.Size() > 0 {
		if _, err := fmt.Fscan(f, &holders, &most, &holds); err != nil {
			return fmt.Errorf("%s: %w", semCountFile, err)
		}
	}
	holders += delta
	if delta > 0 {
		most, holds = max(most, holders), holds+1
	}
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err = f.WriteAt(fmt.Appendf(nil, "%d %d %d\n", holders, most, holds), 0)
	return err
}
