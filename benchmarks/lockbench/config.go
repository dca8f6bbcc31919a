package lockbench

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spanmutex/spanmutex/ddl"
)

// Kind names a lock the benchmark measures.
type Kind string

const (
	// Spanmutex is spanmutex.Lock as the README sets it up: the Locks of
	// one process share one spanmutex.NewScope, which listens for wake-ups
	// on demand, so Unlocks of other processes wake its waiters.
	Spanmutex Kind = "spanmutex"
	// SpanmutexPoll is spanmutex.Lock with a Scope made WithoutWakeUps:
	// waiters behind other processes poll.
	SpanmutexPoll Kind = "spanmutex-poll"
	// SpanmutexSessions is spanmutex.Lock with a Scope made WithSessions:
	// the locks it holds, and its waiting calls' queue entries, are kept
	// alive by the Scope's one session. Only the idle benchmark measures
	// it.
	SpanmutexSessions Kind = "spanmutex-sessions"
	// SpanmutexSessionsPoll is spanmutex.Lock with a Scope made
	// WithSessions and WithoutWakeUps: waiters poll, and their entries are
	// kept alive by the session. Only the idle benchmark measures it (its
	// waiters).
	SpanmutexSessionsPoll Kind = "spanmutex-sessions-poll"
	// Etcd is etcd's client/v3/concurrency.Mutex on an etcd 3.4 server, one
	// session (lease) per goroutine and one client per process.
	Etcd Kind = "etcd"
	// Naive is internal/bench's naive Spanner lock: a read-write transaction
	// that takes the row if free, randomised exponential backoff if held.
	Naive Kind = "naive"
)

// AllKinds returns every lock, in the order each shape runs them.
func AllKinds() []Kind { return []Kind{Spanmutex, SpanmutexPoll, Etcd, Naive} }

// isSpanmutex reports whether k is spanmutex's Lock, listening or not.
func (k Kind) isSpanmutex() bool { return k == Spanmutex || k == SpanmutexPoll }

// Shape is P processes of G goroutines each.
type Shape struct {
	Procs, Goroutines int
}

func (s Shape) String() string { return fmt.Sprintf("%dx%d", s.Procs, s.Goroutines) }

// Contenders returns P×G.
func (s Shape) Contenders() int { return s.Procs * s.Goroutines }

// Limits of a shape: each process is an OS process with its own clients.
const (
	MaxProcs      = 64
	MaxGoroutines = 1000
)

// ParseShapes parses a comma-separated list of PxG shapes, as "1x1,4x25".
func ParseShapes(v string) ([]Shape, error) {
	var out []Shape
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		p, g, ok := strings.Cut(f, "x")
		np, err1 := strconv.Atoi(p)
		ng, err2 := strconv.Atoi(g)
		if !ok || err1 != nil || err2 != nil || np < 1 || np > MaxProcs || ng < 1 || ng > MaxGoroutines {
			return nil, fmt.Errorf("shape %q: want PxG, P processes (1 to %d) of G goroutines (1 to %d), as in 4x25", f, MaxProcs, MaxGoroutines)
		}
		out = append(out, Shape{Procs: np, Goroutines: ng})
	}
	return out, nil
}

// Defaults of Config.
const (
	DefaultHold        = 10 * time.Millisecond
	DefaultDuration    = 20 * time.Second
	DefaultDrain       = 5 * time.Second
	DefaultUncontended = 3 * time.Second
	// DefaultQueueRequests is 1500 (300 resources): with 300, sixteen
	// workers had 60 resources among them, and the drain's tail, where
	// workers idle and poll, made most of the run.
	DefaultQueueRequests = 1500
	DefaultRunOnceProcs  = 16
	// DefaultShapes is the table of issue 10.
	DefaultShapes = "1x1,4x1,4x25,16x1,1x4"
)

// DefaultQueueWorkers returns the numbers of worker processes the queue
// part measures by default.
func DefaultQueueWorkers() []int { return []int{1, 4, 16} }

// FIFOTolerance: an acquisition is a FIFO violation when another Lock call
// that began at least this much earlier is still waiting (as internal/bench).
const FIFOTolerance = 100 * time.Millisecond

// Config says what Run measures. Zero fields take their defaults, except
// that Kinds, Shapes and QueueWorkers may be left empty on purpose through
// the Skip fields.
type Config struct {
	Shapes   []Shape
	Kinds    []Kind
	Hold     time.Duration // critical section length
	Duration time.Duration // the window in which Lock calls start
	Drain    time.Duration // after the window, waiting Lock calls may still return for this long
	// Uncontended is the window of the uncontended lock+unlock cycle runs
	// (1 process, 1 goroutine, no hold); negative skips them.
	Uncontended time.Duration
	// QueueWorkers lists the numbers of worker processes of the queue part;
	// QueueRequests is how many requests each of its runs drains (negative
	// skips the queue part).
	QueueWorkers  []int
	QueueRequests int
	// RunOnceProcs is how many processes race to run one section once in
	// the run-once part (negative skips it).
	RunOnceProcs int
	// Dialect is the SQL dialect of the emulator's databases (GoogleSQL by
	// default).
	Dialect ddl.Dialect
	// RPCLatency, if set, delays every Spanner RPC of the contenders by its
	// method's figure (bench.ParseLatency), so that wall time counts round
	// trips as production does; etcd's are not delayed.
	RPCLatency map[string]time.Duration
	// Progress receives a line as each run starts and ends.
	Progress io.Writer
}

func (c Config) withDefaults() (Config, error) {
	if len(c.Shapes) == 0 {
		c.Shapes, _ = ParseShapes(DefaultShapes)
	}
	if len(c.Kinds) == 0 {
		c.Kinds = AllKinds()
	}
	if c.Hold == 0 {
		c.Hold = DefaultHold
	}
	if c.Duration == 0 {
		c.Duration = DefaultDuration
	}
	if c.Drain == 0 {
		c.Drain = DefaultDrain
	}
	if c.Uncontended == 0 {
		c.Uncontended = DefaultUncontended
	}
	if len(c.QueueWorkers) == 0 {
		c.QueueWorkers = DefaultQueueWorkers()
	}
	if c.QueueRequests == 0 {
		c.QueueRequests = DefaultQueueRequests
	}
	if c.RunOnceProcs == 0 {
		c.RunOnceProcs = DefaultRunOnceProcs
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	switch {
	case c.Hold < 0, c.Duration < 0, c.Drain < 0:
		return c, errors.New("lockbench: hold, duration and drain must be positive")
	}
	for _, k := range c.Kinds {
		switch k {
		case Spanmutex, SpanmutexPoll, Etcd, Naive:
		default:
			return c, fmt.Errorf("lockbench: unknown lock %q; want spanmutex, spanmutex-poll, etcd or naive", k)
		}
	}
	if c.RunOnceProcs > MaxProcs {
		return c, fmt.Errorf("lockbench: %d run-once processes; want 1 to %d", c.RunOnceProcs, MaxProcs)
	}
	for _, w := range c.QueueWorkers {
		if w < 1 || w > MaxProcs {
			return c, fmt.Errorf("lockbench: %d queue worker processes; want 1 to %d", w, MaxProcs)
		}
	}
	return c, nil
}

// needsEtcd reports whether any run of c uses etcd.
func (c Config) needsEtcd() bool {
	for _, k := range c.Kinds {
		if k == Etcd {
			return true
		}
	}
	return false
}
