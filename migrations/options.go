package migrations

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	database "cloud.google.com/go/spanner/admin/database/apiv1"
	"google.golang.org/api/option"

	"github.com/spanmutex/spanmutex"
	"github.com/spanmutex/spanmutex/internal/names"
)

// Defaults of the options.
const (
	// DefaultLockName names the spanmutex Lock that migrations run under.
	DefaultLockName = "schema-migrations"
	// DefaultMigrationsTable is golang-migrate's version table on Spanner,
	// as its spanner driver names it.
	DefaultMigrationsTable = "SchemaMigrations"
	// DefaultRetryTimeout bounds how long a migration's DDL is retried while
	// Spanner rejects it because another schema change or read-write
	// transaction is in progress.
	DefaultRetryTimeout = 2 * time.Minute
	// DefaultLease is the lease of the Lock (see
	// spanmutex.WithLease): a holder that stops renewing for this long
	// is taken over. Migrations renew while they run, so this bounds how long
	// a crashed migrator blocks the others, not how long a migration may take.
	DefaultLease = 30 * time.Second
)

// Option configures a Migrator. Options are validated together by New.
type Option func(*config)

type config struct {
	lockName        string
	migrationsTable string
	retryTimeout    time.Duration
	lockOptions     []spanmutex.LockOption
	admin           *database.DatabaseAdminClient
	adminOptions    []option.ClientOption
	logger          *slog.Logger
}

func defaultConfig() config {
	return config{
		lockName:        DefaultLockName,
		migrationsTable: DefaultMigrationsTable,
		retryTimeout:    DefaultRetryTimeout,
		logger:          slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

// WithLockName sets the name of the spanmutex Lock that migrations run under
// (default DefaultLockName). Every replica migrating one database must use
// the same name.
func WithLockName(name string) Option { return func(c *config) { c.lockName = name } }

// WithMigrationsTable sets golang-migrate's version table (default
// DefaultMigrationsTable, as golang-migrate's spanner driver and its
// x-migrations-table parameter name it).
func WithMigrationsTable(table string) Option { return func(c *config) { c.migrationsTable = table } }

// WithRetryTimeout bounds how long DDL that Spanner rejects because of a
// concurrent schema change or read-write transaction is retried (default
// DefaultRetryTimeout).
func WithRetryTimeout(d time.Duration) Option { return func(c *config) { c.retryTimeout = d } }

// WithLockOptions passes options to the spanmutex Lock (spanmutex.NewLock):
// WithTable, WithOwner, WithLease (default here DefaultLease),
// WithLogger...
func WithLockOptions(opts ...spanmutex.LockOption) Option {
	return func(c *config) { c.lockOptions = append(c.lockOptions, opts...) }
}

// WithAdminClient sets the database admin client that applies DDL (default:
// one opened by Up with WithAdminClientOptions, and closed when it returns).
// The caller keeps ownership of it.
func WithAdminClient(admin *database.DatabaseAdminClient) Option {
	return func(c *config) { c.admin = admin }
}

// WithAdminClientOptions sets the options of the admin client Up opens when
// none is given with WithAdminClient (default none: Application Default
// Credentials, or $SPANNER_EMULATOR_HOST when set).
func WithAdminClientOptions(opts ...option.ClientOption) Option {
	return func(c *config) { c.adminOptions = append(c.adminOptions, opts...) }
}

// WithLogger sets where the Migrator logs what it does (default: nowhere).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

func (c *config) validate() error {
	if err := names.Name(c.lockName); err != nil {
		return fmt.Errorf("%w: WithLockName: %w", ErrInvalidConfig, err)
	}
	if !identifier.MatchString(c.migrationsTable) {
		return fmt.Errorf("%w: WithMigrationsTable(%q): want a letter followed by letters, digits or underscores", ErrInvalidConfig, c.migrationsTable)
	}
	if c.retryTimeout <= 0 {
		return fmt.Errorf("%w: WithRetryTimeout(%v): must be positive", ErrInvalidConfig, c.retryTimeout)
	}
	if c.logger == nil {
		return fmt.Errorf("%w: WithLogger(nil): give a logger, or leave the option out", ErrInvalidConfig)
	}
	for i, o := range c.lockOptions {
		if o == nil {
			return fmt.Errorf("%w: WithLockOptions: option %d is nil", ErrInvalidConfig, i)
		}
	}
	return nil
}
