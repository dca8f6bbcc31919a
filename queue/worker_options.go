package queue

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/google/uuid"

	"github.com/spanmutex/spanmutex/internal/names"
)

// Defaults of the worker options.
const (
	// DefaultMinPollInterval and DefaultMaxPollInterval bound how long an
	// idle worker waits between scans when nothing wakes it: it starts at
	// the minimum after a scan that found work, and doubles up to the
	// maximum while idle.
	DefaultMinPollInterval = 50 * time.Millisecond
	DefaultMaxPollInterval = 2 * time.Second
	// DefaultShutdownGrace is how long a handler in flight may keep running
	// after Run's context ends before its own context is cancelled.
	DefaultShutdownGrace = 10 * time.Second
	// DefaultMaxAttempts is how many times a request may be claimed without
	// finishing before it ends in error.
	DefaultMaxAttempts = 3
	// MaxWorkerIDLength is the longest worker id, in characters (it is
	// recorded as the owner of the resources' locks).
	MaxWorkerIDLength = 256
)

// finishTimeout bounds how long a worker keeps trying to record a job's
// outcome (or release its claim), whatever happened to Run's context.
const finishTimeout = 30 * time.Second

// scanPageSize is how many pending requests one scan read returns.
const scanPageSize = 512

// WorkerOption configures a Worker. Options are validated together by
// NewWorker.
type WorkerOption func(*workerConfig)

type workerConfig struct {
	id            string
	minPoll       time.Duration
	maxPoll       time.Duration
	shutdownGrace time.Duration
	maxAttempts   int
	logger        *slog.Logger
}

func defaultWorkerConfig() workerConfig {
	return workerConfig{
		id:            defaultWorkerID(),
		minPoll:       DefaultMinPollInterval,
		maxPoll:       DefaultMaxPollInterval,
		shutdownGrace: DefaultShutdownGrace,
		maxAttempts:   DefaultMaxAttempts,
		logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

// WithWorkerID sets the worker's identity, recorded as the owner of the
// locks it takes and shown in its logs (default: host name, process id and a
// random suffix, unique per Worker). At most MaxWorkerIDLength characters.
func WithWorkerID(id string) WorkerOption { return func(c *workerConfig) { c.id = id } }

// WithPollInterval sets how an idle worker polls for requests enqueued by
// other processes (default DefaultMinPollInterval to DefaultMaxPollInterval):
// it waits min after a scan that found work or after being woken, and
// doubles the wait up to max with every scan that finds none. Each poll
// costs one strong single-use read of the pending index (a page of 512
// entries) from where the last pass found every entry held by others,
// however many requests they hold; once per sweep interval (a quarter of
// the holders' lease as refused TryLocks report it, at least max, at most
// 7.5s) a poll reads the whole index, one read per 512 requests pending
// (doc/queue.md has the figures). Bounds: a passed-over request that becomes claimable is found
// within one sweep interval and max of its becoming so (and of this
// worker's refusal of its resource expiring); a dead worker's claim within
// its lease, the takeover's jitter, one sweep interval and 2*max (see
// Worker). 0 < min <= max.
func WithPollInterval(min, max time.Duration) WorkerOption {
	return func(c *workerConfig) { c.minPoll, c.maxPoll = min, max }
}

// WithShutdownGrace sets how long a handler in flight may keep running after
// Run's context ends (default DefaultShutdownGrace). Past it, the handler's
// context is cancelled; if the handler then returns an error, its requests
// are released back to new for another worker. 0 cancels at once.
func WithShutdownGrace(d time.Duration) WorkerOption {
	return func(c *workerConfig) { c.shutdownGrace = d }
}

// WithMaxAttempts sets how many times a request may be claimed without
// finishing, for example because the workers that claimed it kept dying,
// before it ends in error "gave up after N claims" (default
// DefaultMaxAttempts, at least 1). A handler's error is not retried: it ends
// the request in error at once.
func WithMaxAttempts(n int) WorkerOption { return func(c *workerConfig) { c.maxAttempts = n } }

// WithLogger sets where the worker logs what it does (default: nowhere).
func WithLogger(l *slog.Logger) WorkerOption { return func(c *workerConfig) { c.logger = l } }

func (c *workerConfig) validate() error {
	if err := names.Name(c.id); err != nil {
		// Same rules as a lock owner: 1-256 printable characters.
		return fmt.Errorf("%w: WithWorkerID(%q): %w", ErrInvalidConfig, c.id, err)
	}
	if c.minPoll <= 0 || c.maxPoll < c.minPoll {
		return fmt.Errorf("%w: WithPollInterval(%v, %v): need 0 < min <= max", ErrInvalidConfig, c.minPoll, c.maxPoll)
	}
	if c.shutdownGrace < 0 {
		return fmt.Errorf("%w: WithShutdownGrace(%v): must not be negative", ErrInvalidConfig, c.shutdownGrace)
	}
	if c.maxAttempts < 1 {
		return fmt.Errorf("%w: WithMaxAttempts(%d): at least 1 claim is needed", ErrInvalidConfig, c.maxAttempts)
	}
	if c.logger == nil {
		return fmt.Errorf("%w: WithLogger(nil): give a logger, or leave the option out to log nowhere", ErrInvalidConfig)
	}
	return nil
}

// defaultWorkerID is host:pid:random, unique per Worker.
func defaultWorkerID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	id := fmt.Sprintf("%s:%d:%s", host, os.Getpid(), uuid.NewString()[:8])
	if r := []rune(id); len(r) > MaxWorkerIDLength {
		id = string(r[len(r)-MaxWorkerIDLength:])
	}
	return id
}
