package spanmutex

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v4"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/internal/defaults"
	"github.com/spanmutex/spanmutex/internal/names"
)

// Defaults of the options, stated in each option's godoc.
const (
	defaultTable          = ddl.DefaultMutexTable
	defaultFenceTable     = ddl.DefaultFenceTable
	defaultLease          = defaults.Lease
	defaultMaxAttempts    = defaults.MaxAttempts
	defaultMaxFailures    = defaults.MaxFailures
	defaultJitter         = defaults.Jitter
	defaultInitialBackOff = defaults.InitialBackOff
	defaultMaxBackOff     = defaults.MaxBackOff
	defaultFinishTimeout  = defaults.FinishTimeout
)

// The bounds of a declared lease (WithLease), stated in its godoc.
const (
	minLease = defaults.MinLease
	maxLease = defaults.MaxLease
)

// maxNameLength is the longest section name, owner identity or value, in
// characters (the columns are STRING(256)).
const maxNameLength = names.MaxLength

// The options are typed by what they apply to, so that an option a
// constructor cannot use does not compile. Each kind is accepted by its
// constructor and by every constructor with fewer restrictions: a
// LeaseOption may be given to NewElection, NewLock and New, an Option to
// all of them and to Inspect and NewFence.

// MutexOption configures a run-once Mutex (New). Every option applies to a
// Mutex; WithStaleness, WithNeeded, WithVersion and WithMaxAttempts apply
// to nothing else: they are about a section run once.
type MutexOption interface {
	applyMutex(c *config)
}

// LockOption configures a Lock (NewLock): every option but those only a
// Mutex uses. Package migrations takes LockOptions for its lock.
type LockOption interface {
	MutexOption
	lockOption()
}

// ElectionOption configures a candidate of an Election (NewElection): every
// LockOption but WithOwner, since a candidate is recorded under the value it
// campaigns with.
type ElectionOption interface {
	LockOption
	electionOption()
}

// LeaseOption says how a holder declares, keeps and gives up its lease and
// how it retries and reports: every ElectionOption but WithScope. Package
// queue takes LeaseOptions for the Locks its workers hold, whose owner and
// Scope each worker sets itself.
type LeaseOption interface {
	ElectionOption
	leaseOption()
}

// Option applies to every constructor: New, NewLock, NewElection, Inspect
// and NewFence. Only WithTable and WithDialect make one: Inspect and a
// Fence read or write their table and hold no lease.
type Option interface {
	LeaseOption
	option()
}

// The concrete options: each kind embeds the one it is accepted beside.
type (
	mutexOpt    func(*config)
	lockOpt     struct{ mutexOpt }
	electionOpt struct{ lockOpt }
	leaseOpt    struct{ electionOpt }
	anyOpt      struct{ leaseOpt }
)

func (o mutexOpt) applyMutex(c *config) { o(c) }
func (lockOpt) lockOption()             {}
func (electionOpt) electionOption()     {}
func (leaseOpt) leaseOption()           {}
func (anyOpt) option()                  {}

func mutexOption(set func(*config)) MutexOption       { return mutexOpt(set) }
func lockOption(set func(*config)) LockOption         { return lockOpt{mutexOpt(set)} }
func electionOption(set func(*config)) ElectionOption { return electionOpt{lockOpt{mutexOpt(set)}} }
func leaseOption(set func(*config)) LeaseOption {
	return leaseOpt{electionOpt{lockOpt{mutexOpt(set)}}}
}
func anyOption(set func(*config)) Option {
	return anyOpt{leaseOpt{electionOpt{lockOpt{mutexOpt(set)}}}}
}

// newConfig applies opts over the defaults and validates the result. Every
// error wraps ErrInvalidConfig.
func newConfig[O MutexOption](opts []O) (config, error) {
	cfg := defaultConfig()
	for i, opt := range opts {
		if any(opt) == nil {
			return config{}, fmt.Errorf("%w: option %d is nil", ErrInvalidConfig, i)
		}
		opt.applyMutex(&cfg)
	}
	if cfg.owner == "" {
		cfg.owner = defaultOwner()
	}
	return cfg, cfg.validate()
}

type config struct {
	table         string
	owner         string
	lease         time.Duration
	staleness     time.Duration
	maxAttempts   int // a Mutex's starts per generation
	maxFailures   int // failed Spanner calls in a row
	jitter        float64
	newBackOff    func() backoff.BackOff
	needed        func(context.Context) (bool, error)
	logger        *slog.Logger
	finishTimeout time.Duration
	renewInterval time.Duration // 0: a third of the lease
	version       string        // "": versions are not compared
	clock         clock
	random        func() float64 // the jitters' source; nil: rand.Float64 (the simulation seeds its own)
	scope         *Scope         // not given (nil): configure makes the Lock or Mutex a Scope of its own
	dialect       ddl.Dialect
	dialectSet    bool // dialect was given (WithDialect); else it is read

	// telemetry.go: the providers (nil: the global ones), whether the
	// options were given, and the instruments made from them by configure.
	tracerProvider      trace.TracerProvider
	meterProvider       metric.MeterProvider
	tracerSet, meterSet bool
	tel                 *telemetry
}

func defaultConfig() config {
	return config{
		table:         defaultTable,
		lease:         defaultLease,
		maxAttempts:   defaultMaxAttempts,
		maxFailures:   defaultMaxFailures,
		jitter:        defaultJitter,
		newBackOff:    defaultBackOff,
		logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
		finishTimeout: defaultFinishTimeout,
		clock:         realClock{},
	}
}

// WithTable sets the table's name: the mutex table for New, NewLock,
// NewElection and Inspect (default "Mutexes"), the fence table for
// NewFence (default "Fences"). The defaults are those of the ddl
// package.
func WithTable(name string) Option {
	return anyOption(func(c *config) { c.table = name })
}

// WithOwner sets the identity recorded as the holder (default: host name,
// process id and a random suffix, unique per Mutex). At most 256 characters.
func WithOwner(id string) LockOption {
	return lockOption(func(c *config) { c.owner = id })
}

// WithLease sets the lease this contender declares (default 30s,
// at least 100ms, at most 1h): when it holds the section or lock it writes the
// lease into the row (LeaseMicros) and renews it every third of it, and
// nobody takes over before the row has gone that long unrenewed by
// Spanner's clock, whatever their own lease. Set it above the longest
// pause (GC, preemption, network) a live holder may suffer. Besides what
// it declares, a contender's lease only judges rows written by a spanmutex
// too old to declare one.
func WithLease(d time.Duration) LeaseOption {
	return leaseOption(func(c *config) { c.lease = d })
}

// WithStaleness makes a DONE or FAILED row that finished longer ago than d, by
// Spanner's clock, count as NEEDED again, so the section runs again (default
// 0: never). It must be above the lease.
func WithStaleness(d time.Duration) MutexOption {
	return mutexOption(func(c *config) { c.staleness = d })
}

// WithNeeded sets a callback Run calls first: when it returns false, Run
// returns NotNeeded without touching the row. Use it for work that may have
// nothing to do, such as a migration with no pending change.
func WithNeeded(needed func(ctx context.Context) (bool, error)) MutexOption {
	return mutexOption(func(c *config) { c.needed = needed })
}

// WithVersion runs the section once per version, such as a release: a row
// DONE (or FAILED, exhausted or given back) at another version, or at none,
// is NEEDED again for this Mutex, decided in the acquiring transaction, as a
// new generation with MaxAttempts fresh attempts; a row DONE at the same
// version stays DONE. A holder of another version that is still running is
// waited for (and taken over once its lease lapses) as usual. Versions are
// compared for equality only: during a rolling deploy, replicas of the old
// and the new release alternate it, so make the section idempotent (as
// migrate.Up is). At most maxNameLength characters; default "" (the version
// is neither compared nor written). The table needs the Version column
// (`spanmutex ddl --upgrade` prints the statement that adds it).
func WithVersion(v string) MutexOption {
	return mutexOption(func(c *config) { c.version = v })
}

// WithLogger sets where the Mutex, Lock or Election logs its decisions
// (default: nowhere).
func WithLogger(l *slog.Logger) LeaseOption {
	return leaseOption(func(c *config) { c.logger = l })
}

// WithRenewInterval sets how often a held lease is renewed: while Run's
// section runs, while a Lock is held, while a leader leads (default: a third
// of the lease). It must be at least 10ms and at most half the lease.
func WithRenewInterval(d time.Duration) LeaseOption {
	return leaseOption(func(c *config) { c.renewInterval = d })
}

// WithFinishTimeout bounds how long a write that must not be lost keeps
// trying after its ctx ended: Run recording DONE or FAILED, Unlock and
// Resign giving the lease back, a Lock call leaving the queue, a commit of
// unknown outcome read again (default 30s).
func WithFinishTimeout(d time.Duration) LeaseOption {
	return leaseOption(func(c *config) { c.finishTimeout = d })
}

func (c *config) validate() error {
	if c.dialectSet && !c.dialect.Valid() {
		return fmt.Errorf("%w: WithDialect(%v): use ddl.GoogleSQL or ddl.PostgreSQL", ErrInvalidConfig, c.dialect)
	}
	if err := ddl.ValidateTableName(c.table); err != nil {
		return fmt.Errorf("%w: WithTable: %v", ErrInvalidConfig, err)
	}
	if err := names.Text("owner", c.owner, maxNameLength); err != nil {
		return fmt.Errorf("%w: WithOwner: %v", ErrInvalidConfig, err)
	}
	if c.version != "" {
		if err := names.Text("version", c.version, maxNameLength); err != nil {
			return fmt.Errorf("%w: WithVersion: %v", ErrInvalidConfig, err)
		}
	}
	if c.lease > maxLease {
		return fmt.Errorf("%w: WithLease(%v): the lease must be at most %v: a holder that dies holding the lock blocks it that long; renewals keep longer work alive", ErrInvalidConfig, c.lease, maxLease)
	}
	if c.lease < minLease {
		return fmt.Errorf("%w: WithLease(%v): the lease must be at least %v: it is what this holder declares and renews every third of; set it above the longest pause (GC, network) a live holder may suffer", ErrInvalidConfig, c.lease, minLease)
	}
	if c.staleness < 0 || (c.staleness > 0 && c.staleness <= c.lease) {
		return fmt.Errorf("%w: WithStaleness(%v): staleness must be 0 (never) or above the lease (%v), or a running section could be restarted", ErrInvalidConfig, c.staleness, c.lease)
	}
	if c.maxAttempts < 1 {
		return fmt.Errorf("%w: WithMaxAttempts(%d): at least 1 attempt is needed", ErrInvalidConfig, c.maxAttempts)
	}
	if c.maxFailures < 1 {
		return fmt.Errorf("%w: WithMaxFailures(%d): at least 1 is needed: the count includes the first failure", ErrInvalidConfig, c.maxFailures)
	}
	if !(c.jitter >= 0 && c.jitter < 1) { // also rejects NaN
		return fmt.Errorf("%w: WithJitter(%v): the jitter fraction must be in [0, 1)", ErrInvalidConfig, c.jitter)
	}
	if c.newBackOff == nil {
		return fmt.Errorf("%w: WithBackOff(nil): give a function that returns a backoff.BackOff", ErrInvalidConfig)
	}
	if c.logger == nil {
		return fmt.Errorf("%w: WithLogger(nil): give a logger, or leave the option out to log nowhere", ErrInvalidConfig)
	}
	if c.renewInterval < 0 || c.renewInterval > c.lease/2 {
		return fmt.Errorf("%w: WithRenewInterval(%v): must be positive and at most half the lease (%v), so that a failed renewal can be retried before the lease expires", ErrInvalidConfig, c.renewInterval, c.lease/2)
	}
	if c.renewInterval > 0 && c.renewInterval < defaults.MinRenewInterval {
		return fmt.Errorf("%w: WithRenewInterval(%v): must be at least %v, longer than a Spanner commit's round trip, or a lease could never be renewed in time to be granted", ErrInvalidConfig, c.renewInterval, defaults.MinRenewInterval)
	}
	if c.tracerSet && c.tracerProvider == nil {
		return fmt.Errorf("%w: WithTracerProvider(nil): give a provider, or leave the option out for otel.GetTracerProvider()", ErrInvalidConfig)
	}
	if c.meterSet && c.meterProvider == nil {
		return fmt.Errorf("%w: WithMeterProvider(nil): give a provider, or leave the option out for otel.GetMeterProvider()", ErrInvalidConfig)
	}
	if c.finishTimeout <= 0 {
		return fmt.Errorf("%w: WithFinishTimeout(%v): must be positive", ErrInvalidConfig, c.finishTimeout)
	}
	return nil
}
