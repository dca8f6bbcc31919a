package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"cloud.google.com/go/spanner"
	"google.golang.org/api/option"

	"github.com/spanmutex/spanmutex/ddl"
)

// Kind names a lock the benchmark measures.
type Kind string

const (
	// Spanmutex is spanmutex.Lock: contenders join a FIFO queue with a
	// blind insert, and Unlock hands the lock to the oldest live waiter in
	// the transaction that releases it.
	Spanmutex Kind = "spanmutex"
	// Naive is what most libraries do: a read-write transaction takes the
	// lock's row if it is free; a contender that finds it held retries after
	// a randomised exponential backoff.
	Naive Kind = "naive"
)

// kinds returns the locks every Run measures, in the order it runs them.
func kinds() []Kind { return []Kind{Spanmutex, Naive} }

// Defaults of Config.
const (
	// DefaultClients is how many Spanner clients a run's contenders are
	// spread over.
	DefaultClients = 8
	// DefaultDuration is how long each run starts new Lock calls.
	DefaultDuration = 20 * time.Second
	// DefaultDrain is how long, after the window, Lock calls still waiting
	// may complete before they are cancelled.
	DefaultDrain = 5 * time.Second
)

// DefaultContenders returns the numbers of contenders Run measures when
// Config.Contenders is empty: 1, 10, 100 and 1000.
func DefaultContenders() []int { return []int{1, 10, 100, 1000} }

// MaxContenders bounds Config.Contenders: each contender is a goroutine
// with a Spanner session of its own while it waits.
const MaxContenders = 10000

// FIFOTolerance is how much earlier another contender must have started
// waiting, and still be waiting, for an acquisition to count as a FIFO
// violation. It leaves room for the time a contender takes to join the
// queue after calling Lock.
const FIFOTolerance = 100 * time.Millisecond

// The wind-down of a run is bounded: after the drain, cancelled contenders
// get stopTimeout to finish their clean-up (defaults.FinishTimeout
// bounds Unlock and leaving the queue); then the clients are closed, which
// fails every RPC still under way, and closeTimeout later Run gives up on
// them. A run so ends within Duration + Drain + 50s.
const (
	stopTimeout  = 40 * time.Second
	closeTimeout = 10 * time.Second
)

// ErrInvalidConfig is wrapped by every error Run returns for a bad Config.
var ErrInvalidConfig = errors.New("bench: invalid configuration")

// errNilContext is returned when a nil context is passed.
var errNilContext = errors.New("bench: nil context.Context; pass context.Background() or a context with a deadline")

// Opener opens a new Spanner client of a database that holds the mutex
// table and its queue table, with opts appended to the caller's own options
// (Run passes gRPC interceptors that count RPCs). Each call must return a
// client with its own connections.
type Opener func(ctx context.Context, opts ...option.ClientOption) (*spanner.Client, error)

// Config says what Run measures. The zero value of every field but
// NewClient and PerRun means its default.
type Config struct {
	// NewClient opens clients of the database every run uses. Exactly one
	// of NewClient and PerRun must be set.
	NewClient Opener
	// PerRun, if set, is called before each run for a database of that run
	// alone: it returns how to open clients of it, and a function that
	// releases it, which Run calls when the run ends. Use it to give each
	// run an emulator process of its own: the emulator's commit timestamps
	// drift ahead of the real clock as it commits (by a few microseconds a
	// commit, for the life of the process), and its strong reads wait for
	// them, so a run on a long-used emulator is slowed by its predecessors.
	PerRun func(ctx context.Context) (Opener, func(), error)
	// Contenders lists the numbers of contenders to run, each from 1 to
	// MaxContenders (default DefaultContenders()).
	Contenders []int
	// Clients is how many Spanner clients the contenders of one run are
	// spread over, round robin (default DefaultClients). A run with fewer
	// contenders opens one client per contender.
	Clients int
	// Duration is how long each run starts new Lock calls (default
	// DefaultDuration).
	Duration time.Duration
	// Drain is how long, after Duration, Lock calls still waiting may
	// complete before they are cancelled (default DefaultDrain).
	Drain time.Duration
	// Table is the mutex table (default ddl.DefaultMutexTable); the lock's
	// queue table is named after it.
	Table string
	// Progress, if set, receives a line as each run starts and ends.
	Progress io.Writer
}

// database returns how to open clients of the next run's database, and how
// to release it.
func (c Config) database(ctx context.Context) (Opener, func(), error) {
	if c.PerRun != nil {
		return c.PerRun(ctx)
	}
	return c.NewClient, func() {}, nil
}

// withDefaults returns c with its defaults filled in, or an error wrapping
// ErrInvalidConfig.
func (c Config) withDefaults() (Config, error) {
	if (c.NewClient == nil) == (c.PerRun == nil) {
		return c, fmt.Errorf("%w: set exactly one of NewClient (one database for all runs) and PerRun (a database per run)", ErrInvalidConfig)
	}
	if len(c.Contenders) == 0 {
		c.Contenders = DefaultContenders()
	}
	for _, n := range c.Contenders {
		if n < 1 || n > MaxContenders {
			return c, fmt.Errorf("%w: Contenders: %d contenders; want 1 to %d", ErrInvalidConfig, n, MaxContenders)
		}
	}
	if c.Clients == 0 {
		c.Clients = DefaultClients
	}
	if c.Duration == 0 {
		c.Duration = DefaultDuration
	}
	if c.Drain == 0 {
		c.Drain = DefaultDrain
	}
	if c.Table == "" {
		c.Table = ddl.DefaultMutexTable
	}
	switch {
	case c.Clients < 0:
		return c, fmt.Errorf("%w: Clients: %d; want at least 1", ErrInvalidConfig, c.Clients)
	case c.Duration < 0:
		return c, fmt.Errorf("%w: Duration: %v; want a positive duration", ErrInvalidConfig, c.Duration)
	case c.Drain < 0:
		return c, fmt.Errorf("%w: Drain: %v; want a positive duration", ErrInvalidConfig, c.Drain)
	}
	if err := ddl.ValidateTableName(c.Table); err != nil {
		return c, fmt.Errorf("%w: Table: %w", ErrInvalidConfig, err)
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	return c, nil
}
