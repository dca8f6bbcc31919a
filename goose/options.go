package spangoose

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/spanmutex/spanmutex"
)

// Defaults of the options.
const (
	// DefaultLockName names the spanmutex Lock that goose runs under. It
	// differs from package migrations' lock (schema-migrations), so that the
	// two tools' locks never meet by accident; give both the same name with
	// WithLockName to serialise them against each other.
	DefaultLockName = "goose-migrations"
	// DefaultLease is the lease the Locker declares (spanmutex.WithLease): a
	// holder that stops renewing for this long is taken over. The lease is
	// renewed while goose runs, so this bounds how long a crashed replica
	// blocks the others, not how long a migration may take.
	DefaultLease = 30 * time.Second
	// DefaultLockTimeout bounds how long Lock waits for the lock, as goose's
	// own PostgreSQL lockers do by default (60 tries 5 s apart). A replica
	// whose turn comes later than this fails its goose call.
	DefaultLockTimeout = 5 * time.Minute
)

// Option configures a Locker. Options are validated together by NewLocker.
type Option func(*config)

type config struct {
	lockName    string
	lease       time.Duration
	lockTimeout time.Duration
	scope       []spanmutex.LockOption // spanmutex.WithScope, when given
	nilScope    bool
	logger      *slog.Logger
	lockOptions []spanmutex.LockOption
}

func defaultConfig() config {
	return config{
		lockName:    DefaultLockName,
		lease:       DefaultLease,
		lockTimeout: DefaultLockTimeout,
		logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

// WithLockName sets the name of the spanmutex Lock (default
// DefaultLockName). Every replica migrating one database must use the same
// name; databases that share the mutex table need different names.
func WithLockName(name string) Option { return func(c *config) { c.lockName = name } }

// WithLease sets the lease the Locker declares and renews every third of
// (default DefaultLease; 100ms to 1h, as spanmutex.WithLease). After a
// replica dies holding the lock, the next one takes over once this much
// time passed without a renewal, by Spanner's clock.
func WithLease(d time.Duration) Option { return func(c *config) { c.lease = d } }

// WithLockTimeout bounds how long Lock waits for its turn (default
// DefaultLockTimeout); 0 waits as long as the ctx of the goose call allows.
// When it passes, Lock returns an error matching spanmutex.ErrNotObtained
// and context.DeadlineExceeded, having left the queue.
func WithLockTimeout(d time.Duration) Option { return func(c *config) { c.lockTimeout = d } }

// WithScope makes the Locker's Lock one of the contenders of scope
// (spanmutex.WithScope): give every Lock of a process the same Scope.
// Default: a Scope of its own.
func WithScope(scope *spanmutex.Scope) Option {
	return func(c *config) {
		c.nilScope = scope == nil
		c.scope = []spanmutex.LockOption{spanmutex.WithScope(scope)}
	}
}

// WithLogger sets where the Locker logs (waiting, holding, released, lease
// lost), and is passed on to the spanmutex Lock (spanmutex.WithLogger).
// Default: nowhere.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithLockOptions passes more options to the spanmutex Lock
// (spanmutex.NewLock), after the Locker's own: telemetry
// (spanmutex.WithMeterProvider, spanmutex.WithTracerProvider), the table
// (spanmutex.WithTable), the owner recorded in the row (spanmutex.WithOwner),
// retries (spanmutex.WithMaxFailures, spanmutex.WithBackOff), and how long
// Unlock keeps trying to give the lock back (spanmutex.WithFinishTimeout,
// default 30s; goose calls Unlock with a ctx that is never cancelled).
func WithLockOptions(opts ...spanmutex.LockOption) Option {
	return func(c *config) { c.lockOptions = append(c.lockOptions, opts...) }
}

// spanmutexOptions are the options of the spanmutex Lock, the Locker's
// first, so that WithLockOptions can override them.
func (c *config) spanmutexOptions() []spanmutex.LockOption {
	opts := append([]spanmutex.LockOption{spanmutex.WithLease(c.lease), spanmutex.WithLogger(c.logger)}, c.scope...)
	return append(opts, c.lockOptions...)
}

func (c *config) validate() error {
	switch {
	case c.lockTimeout < 0:
		return fmt.Errorf("%w: WithLockTimeout(%v): must be 0 (no bound) or positive", ErrInvalidConfig, c.lockTimeout)
	case c.nilScope:
		return fmt.Errorf("%w: WithScope(nil): give a Scope (spanmutex.NewScope), or leave the option out", ErrInvalidConfig)
	case c.logger == nil:
		return fmt.Errorf("%w: WithLogger(nil): give a logger, or leave the option out", ErrInvalidConfig)
	}
	for i, o := range c.lockOptions {
		if o == nil {
			return fmt.Errorf("%w: WithLockOptions: option %d is nil", ErrInvalidConfig, i)
		}
	}
	return nil
}
