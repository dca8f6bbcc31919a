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
)

// Defaults of the options.
const (
	// DefaultTable is the mutex table's name.
	DefaultTable = ddl.DefaultMutexTable
	// DefaultFenceTable is the fence table's name (see NewFence).
	DefaultFenceTable = ddl.DefaultFenceTable
	// DefaultWatermark is how long a STARTED row may go without its holder
	// renewing it before another contender may take it over. Holders renew
	// every third of it while the section runs, so it bounds how long a
	// crashed holder blocks others, not how long a section may take.
	DefaultWatermark = 30 * time.Second
	// DefaultMaxAttempts is how many times a section may be started (across
	// all processes) before it is given up as FAILED.
	DefaultMaxAttempts = 3
	// DefaultJitter is the fraction of the watermark, drawn at random per
	// Run call, that a contender waits past the watermark before a takeover,
	// so that contenders do not all take over at the same moment.
	DefaultJitter = 0.2
	// DefaultInitialBackOff and DefaultMaxBackOff bound the waits between
	// reads while another holder runs the section or after a failure.
	DefaultInitialBackOff = 100 * time.Millisecond
	DefaultMaxBackOff     = 2 * time.Second
	// DefaultFinishTimeout bounds how long Run keeps trying to record DONE
	// or FAILED after the section returned, even if ctx was cancelled.
	DefaultFinishTimeout = 30 * time.Second
)

// MinWatermark is the shortest watermark accepted: a lease is renewed every
// third of it, and a renewal is a Spanner commit, which takes milliseconds
// to tens of milliseconds; a shorter lease would lapse between renewals.
const MinWatermark = 100 * time.Millisecond

// MaxNameLength is the longest section name, in characters (the Name column
// is STRING(256)).
const MaxNameLength = 256

// Option configures a Mutex (New), a Lock (NewLock), Inspect or a Fence
// (NewFence). Each validates its options together and rejects an option
// that does not apply to it with an error wrapping ErrInvalidConfig that
// names the option.
type Option func(*config)

// Name returns the name of the function that made o, such as
// "WithWatermark" ("" for nil). A package that makes Locks with its
// caller's options uses it to refuse those it sets itself.
func (o Option) Name() string {
	if o == nil {
		return ""
	}
	var c config
	o(&c)
	if len(c.given) == 0 {
		return ""
	}
	return c.given[0]
}

// namedOption returns the Option called name that applies set; the name is
// recorded so that constructors can refuse options that do not apply.
func namedOption(name string, set func(*config)) Option {
	return func(c *config) {
		c.given = append(c.given, name)
		set(c)
	}
}

// target is what a constructor makes, for the options that apply to it.
type target int

const (
	forMutex target = iota // New
	forLock                // NewLock
	forTable               // Inspect and NewFence: only the table
)

// refusal says why the option called name does not apply to t, and what
// to do instead; "" if it applies.
func (t target) refusal(name string) string {
	switch t {
	case forLock:
		switch name {
		case "WithStaleness":
			return "a Lock never records DONE, so nothing goes stale; leave it out"
		case "WithNeeded":
			return "a Lock is taken whenever Lock is called; decide before calling it"
		case "WithVersion":
			return "a Lock is not run once per version; use a Mutex (New) for that"
		}
	case forTable:
		if name != "WithTable" && name != "WithDialect" {
			return "only WithTable and WithDialect apply: it reads or writes its table and holds no lease; leave it out"
		}
	}
	return ""
}

// newConfig applies opts over the defaults, refuses those that do not
// apply to t, and validates the result. Every error wraps ErrInvalidConfig.
func newConfig(opts []Option, t target) (config, error) {
	cfg := defaultConfig()
	for i, opt := range opts {
		if opt == nil {
			return config{}, fmt.Errorf("%w: option %d is nil", ErrInvalidConfig, i)
		}
		opt(&cfg)
	}
	for _, name := range cfg.given {
		if why := t.refusal(name); why != "" {
			return config{}, fmt.Errorf("%w: %s does not apply to %s: %s", ErrInvalidConfig, name, t, why)
		}
	}
	if cfg.owner == "" {
		cfg.owner = defaultOwner()
	}
	return cfg, cfg.validate()
}

// String names what t makes, for errors.
func (t target) String() string {
	switch t {
	case forLock:
		return "a Lock"
	case forTable:
		return "Inspect or a Fence"
	}
	return "a Mutex"
}

// CheckLockOptions returns the error NewLock would return for opts, but
// needs no client and no name: nil if every option applies to a Lock and
// the values are valid together. A package that makes Locks from its
// caller's options calls it in its own constructor, so that a bad option
// is that constructor's error, not a failure later.
func CheckLockOptions(opts ...Option) error {
	_, err := newConfig(opts, forLock)
	return err
}

type config struct {
	table         string
	owner         string
	watermark     time.Duration
	staleness     time.Duration
	maxAttempts   int
	jitter        float64
	newBackOff    func() backoff.BackOff
	needed        func(context.Context) (bool, error)
	logger        *slog.Logger
	finishTimeout time.Duration
	renewInterval time.Duration // 0: a third of the watermark
	version       string        // "": versions are not compared
	clock         clock
	random        func() float64 // the jitters' source; nil: rand.Float64 (the simulation seeds its own)
	scope         *Scope         // not given (nil): newMutex makes the Lock or Mutex a Scope of its own
	given         []string       // the names of the options given, in order
	dialect       ddl.Dialect
	dialectSet    bool // dialect was given (WithDialect); else it is read

	// telemetry.go: the providers (nil: the global ones), whether the
	// options were given, and the instruments made from them by newMutex.
	tracerProvider      trace.TracerProvider
	meterProvider       metric.MeterProvider
	tracerSet, meterSet bool
	tel                 *telemetry
}

func defaultConfig() config {
	return config{
		table:         DefaultTable,
		watermark:     DefaultWatermark,
		maxAttempts:   DefaultMaxAttempts,
		jitter:        DefaultJitter,
		newBackOff:    defaultBackOff,
		logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
		finishTimeout: DefaultFinishTimeout,
		clock:         realClock{},
	}
}

func defaultBackOff() backoff.BackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = DefaultInitialBackOff
	b.MaxInterval = DefaultMaxBackOff
	b.Multiplier = 1.6
	b.RandomizationFactor = 0.5
	b.MaxElapsedTime = 0 // Run's ctx and MaxAttempts bound the waiting
	return b
}

// WithTable sets the table's name: the mutex table for New, NewLock and
// Inspect (default DefaultTable), the fence table for NewFence (default
// DefaultFenceTable). The defaults are those of the ddl package.
func WithTable(name string) Option {
	return namedOption("WithTable", func(c *config) { c.table = name })
}

// WithOwner sets the identity recorded as the holder (default: host name,
// process id and a random suffix, unique per Mutex). At most 256 characters.
func WithOwner(id string) Option {
	return namedOption("WithOwner", func(c *config) { c.owner = id })
}

// WithWatermark sets this contender's lease (default DefaultWatermark, at
// least MinWatermark): when it holds the section or lock it writes the
// lease into the row and renews it every third of it, and nobody takes over
// before the row has gone that long unrenewed by Spanner's clock, whatever
// their own watermark. Set it above the longest pause (GC, preemption,
// network) a live holder may suffer. A contender's watermark governs only
// its own lease, and how it judges rows written by a spanmutex too old to
// declare one.
func WithWatermark(d time.Duration) Option {
	return namedOption("WithWatermark", func(c *config) { c.watermark = d })
}

// WithStaleness makes a DONE or FAILED row that finished longer ago than d, by
// Spanner's clock, count as NEEDED again, so the section runs again (default
// 0: never). It must be above the watermark. NewLock rejects it.
func WithStaleness(d time.Duration) Option {
	return namedOption("WithStaleness", func(c *config) { c.staleness = d })
}

// WithMaxAttempts sets how many times the section may be started across all
// processes in one generation of the row (a generation starts when the row
// is created or goes stale), and how many failed Spanner calls
// in a row Run tolerates (default DefaultMaxAttempts, at least 1).
func WithMaxAttempts(n int) Option {
	return namedOption("WithMaxAttempts", func(c *config) { c.maxAttempts = n })
}

// WithJitter sets the fraction of the watermark, in [0, 1), from which each
// Run call draws the extra wait it adds before a takeover (default
// DefaultJitter).
func WithJitter(fraction float64) Option {
	return namedOption("WithJitter", func(c *config) { c.jitter = fraction })
}

// WithBackOff sets how waits between reads grow; newBackOff is called once per
// Run (default: exponential from DefaultInitialBackOff to DefaultMaxBackOff,
// randomised by half). A backoff.Stop from it ends Run with ErrAttemptsExhausted.
func WithBackOff(newBackOff func() backoff.BackOff) Option {
	return namedOption("WithBackOff", func(c *config) { c.newBackOff = newBackOff })
}

// WithNeeded sets a callback Run calls first: when it returns false, Run
// returns NotNeeded without touching the row. Use it for work that may have
// nothing to do, such as a migration with no pending change. NewLock
// rejects it.
func WithNeeded(needed func(ctx context.Context) (bool, error)) Option {
	return namedOption("WithNeeded", func(c *config) { c.needed = needed })
}

// WithVersion runs the section once per version, such as a release: a row
// DONE (or FAILED, exhausted or given back) at another version, or at none,
// is NEEDED again for this Mutex, decided in the acquiring transaction, as a
// new generation with MaxAttempts fresh attempts; a row DONE at the same
// version stays DONE. A holder of another version that is still running is
// waited for (and taken over after the watermark) as usual. Versions are
// compared for equality only: during a rolling deploy, replicas of the old
// and the new release alternate it, so make the section idempotent (as
// migrate.Up is). At most MaxNameLength characters; default "" (the version
// is neither compared nor written). The table needs the Version column
// (`spanmutex ddl --upgrade` prints the statement that adds it). NewLock
// rejects it.
func WithVersion(v string) Option {
	return namedOption("WithVersion", func(c *config) { c.version = v })
}

// WithLogger sets where the Mutex logs its decisions (default: nowhere).
func WithLogger(l *slog.Logger) Option {
	return namedOption("WithLogger", func(c *config) { c.logger = l })
}

// WithRenewInterval sets how often a held lease is renewed while the section
// runs (default: a third of the watermark). It must be at most half the
// watermark.
func WithRenewInterval(d time.Duration) Option {
	return namedOption("WithRenewInterval", func(c *config) { c.renewInterval = d })
}

// WithFinishTimeout bounds how long Run tries to record DONE or FAILED after
// the section returned, even when ctx was cancelled (default DefaultFinishTimeout).
func WithFinishTimeout(d time.Duration) Option {
	return namedOption("WithFinishTimeout", func(c *config) { c.finishTimeout = d })
}

func (c *config) validate() error {
	if c.dialectSet && !c.dialect.Valid() {
		return fmt.Errorf("%w: WithDialect(%v): use ddl.GoogleSQL or ddl.PostgreSQL", ErrInvalidConfig, c.dialect)
	}
	if err := ddl.ValidateTableName(c.table); err != nil {
		return fmt.Errorf("%w: WithTable: %v", ErrInvalidConfig, err)
	}
	if err := validateText("owner", c.owner, MaxNameLength); err != nil {
		return fmt.Errorf("%w: WithOwner: %v", ErrInvalidConfig, err)
	}
	if c.version != "" {
		if err := validateText("version", c.version, MaxNameLength); err != nil {
			return fmt.Errorf("%w: WithVersion: %v", ErrInvalidConfig, err)
		}
	}
	if c.watermark < MinWatermark {
		return fmt.Errorf("%w: WithWatermark(%v): the watermark must be at least %v: it is the lease this holder declares and renews every third of; set it above the longest pause (GC, network) a live holder may suffer", ErrInvalidConfig, c.watermark, MinWatermark)
	}
	if c.staleness < 0 || (c.staleness > 0 && c.staleness <= c.watermark) {
		return fmt.Errorf("%w: WithStaleness(%v): staleness must be 0 (never) or above the watermark (%v), or a running section could be restarted", ErrInvalidConfig, c.staleness, c.watermark)
	}
	if c.maxAttempts < 1 {
		return fmt.Errorf("%w: WithMaxAttempts(%d): at least 1 attempt is needed", ErrInvalidConfig, c.maxAttempts)
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
	if c.renewInterval < 0 || c.renewInterval > c.watermark/2 {
		return fmt.Errorf("%w: WithRenewInterval(%v): must be positive and at most half the watermark (%v), so that a failed renewal can be retried before the lease expires", ErrInvalidConfig, c.renewInterval, c.watermark/2)
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
