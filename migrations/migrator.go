package migrations

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"cloud.google.com/go/spanner"
	dbadmin "cloud.google.com/go/spanner/admin/database/apiv1"
	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/source"

	"github.com/spanmutex/spanmutex"
	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/internal/sqldialect"
)

// Migrator applies golang-migrate migrations to one Spanner database under a
// spanmutex Lock. Create it with New; it is safe for concurrent use, each Up
// call being a contender of its own.
type Migrator struct {
	client *spanner.Client
	src    source.Driver
	cfg    config
}

// New returns a Migrator that applies the migrations of src (a golang-migrate
// source driver: iofs.New over an embed.FS, or (&file.File{}).Open("file://dir"))
// to client's database. It validates its inputs and does no I/O. Every error
// it returns wraps ErrInvalidConfig. src stays the caller's to close.
func New(client *spanner.Client, src source.Driver, opts ...Option) (*Migrator, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: nil *spanner.Client", ErrInvalidConfig)
	}
	if src == nil {
		return nil, fmt.Errorf("%w: nil source.Driver: open one with iofs.New or file.Open", ErrInvalidConfig)
	}
	cfg := defaultConfig()
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: option %d is nil", ErrInvalidConfig, i)
		}
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	// Validate the lock's options now, so that a bad one is New's error.
	// NewLock does no I/O; the Lock is made again, with the dialect, by Up.
	if _, err := spanmutex.NewLock(client, cfg.lockName, cfg.lockOptionsWithDefaults()...); err != nil {
		return nil, fmt.Errorf("%w: WithLockOptions: %w", ErrInvalidConfig, err)
	}
	return &Migrator{client: client, src: src, cfg: cfg}, nil
}

func (c *config) lockOptionsWithDefaults() []spanmutex.LockOption {
	return append([]spanmutex.LockOption{spanmutex.WithLease(DefaultLease)}, c.lockOptions...)
}

// Result says what an Up call did.
type Result struct {
	// Before and After are the database's versions when the lock was taken
	// and when Up returned; -1 for none.
	Before, After int
	// Applied lists the versions this call applied, in order; empty when
	// another replica had applied everything (golang-migrate's ErrNoChange,
	// which Up reports as success).
	Applied []int
	// Token is the fencing token of the lock this call held.
	Token int64
	// Waited is how long Up waited for the lock, by the local clock.
	Waited time.Duration
	// DDLRetries counts DDL sent again after Spanner rejected it because of
	// a concurrent schema change or read-write transaction (the version
	// table's creation included).
	DDLRetries int
}

// Up applies every migration of the source not yet applied, holding the
// spanmutex Lock from before golang-migrate's driver is opened (it creates
// the version table) until it is done, so that replicas that call Up at
// once apply each migration exactly once: the first to get the lock applies
// them, the others wait their turn (FIFO), find nothing to do, and return
// success with an empty Applied.
//
// Failures: a migration that fails returns golang-migrate's error; DDL that
// Spanner rejected because of a concurrent schema change or transaction is
// sent again first, for up to the retry timeout. A migration known to have
// applied nothing (DDL still rejected, a DML file's transaction rolled
// back) does not leave the version dirty; a DDL file that failed half-way
// does, and Up then returns a *DirtyError until a person forces the version.
// If the lease is lost, or ctx ends, while migrations run, golang-migrate is
// stopped after the migration under way (an operation Spanner has started is
// waited for, not abandoned) and Up returns an error matching
// spanmutex.ErrLeaseLost or ctx's error. While waiting for the lock, ctx
// ending returns at once, having done nothing.
func (m *Migrator) Up(ctx context.Context) (res Result, err error) {
	res.Before, res.After = -1, -1
	began := time.Now()
	// The dialect is read once, here, for the lock and the version table
	// (openUpstream); a Lock not given it would read it again.
	dialect, err := sqldialect.Detect(ctx, m.client)
	if err != nil {
		return res, fmt.Errorf("migrations: read the dialect of %s: %w", m.client.DatabaseName(), err)
	}
	lockOpts := append([]spanmutex.LockOption{spanmutex.WithDialect(dialect)}, m.cfg.lockOptionsWithDefaults()...)
	lock, err := spanmutex.NewLock(m.client, m.cfg.lockName, lockOpts...)
	if err != nil {
		return res, err
	}
	lease, err := lock.Lock(ctx)
	if err != nil {
		return res, fmt.Errorf("migrations: waiting for the lock %q: %w", m.cfg.lockName, err)
	}
	res.Waited, res.Token = time.Since(began), lease.Token()
	log := m.cfg.logger.With("lock", m.cfg.lockName, "token", lease.Token())
	log.Info("holding the migrations lock", "waited", res.Waited)
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if uerr := lock.Unlock(uctx); uerr != nil && !errors.Is(uerr, spanmutex.ErrLeaseLost) {
			err = errors.Join(err, fmt.Errorf("migrations: releasing the lock: %w", uerr))
		}
	}()
	mctx, stop := leaseContext(ctx, lease)
	defer stop(nil)
	d, closeAdmin, err := m.openDriver(mctx, lease, dialect, &res)
	if err != nil {
		return res, err
	}
	defer closeAdmin()
	runErr, stopped := m.run(mctx, log, d)
	return m.settle(ctx, log, d, lease, res, runErr, stopped)
}

// leaseContext returns a ctx that ends with ctx, or when the lease is lost,
// with the lease's error as its cause.
func leaseContext(ctx context.Context, lease *spanmutex.Lease) (context.Context, context.CancelCauseFunc) {
	mctx, stop := context.WithCancelCause(ctx)
	go func() {
		select {
		case <-lease.Done():
			stop(lease.Err())
		case <-mctx.Done():
		}
	}()
	return mctx, stop
}

// openDriver opens golang-migrate's spanner driver under the lease (its Open
// creates the version table) and reads the version into res; it returns the
// locked driver and what closes the admin client it opened, if any.
func (m *Migrator) openDriver(mctx context.Context, lease *spanmutex.Lease, dialect ddl.Dialect, res *Result) (*lockedDriver, func(), error) {
	admin, closeAdmin := m.cfg.admin, func() {}
	if admin == nil {
		var err error
		if admin, err = dbadmin.NewDatabaseAdminClient(mctx, m.cfg.adminOptions...); err != nil {
			return nil, closeAdmin, fmt.Errorf("migrations: open a database admin client: %w", err)
		}
		closeAdmin = func() { admin.Close() }
	}
	upstream, openRetries, err := openUpstream(mctx, m.client, admin, dialect, &m.cfg)
	res.DDLRetries = openRetries
	if err != nil {
		closeAdmin()
		return nil, func() {}, fmt.Errorf("migrations: open golang-migrate's spanner driver: %w", err)
	}
	d := &lockedDriver{upstream: upstream, client: m.client, admin: admin, cfg: &m.cfg, lease: lease, ctx: mctx, retries: openRetries}
	before, dirty, err := d.Version()
	if err != nil {
		closeAdmin()
		return nil, func() {}, fmt.Errorf("migrations: read the version: %w", err)
	}
	res.Before, res.After, d.clean = before, before, before
	if dirty {
		closeAdmin()
		return nil, func() {}, &DirtyError{Version: before}
	}
	return d, closeAdmin, nil
}

// run runs golang-migrate's Up on d; if mctx ends first (the lease was
// lost, or Up's ctx ended), it stops after the migration under way and
// returns why as stopped.
func (m *Migrator) run(mctx context.Context, log *slog.Logger, d *lockedDriver) (err, stopped error) {
	mg, err := migrate.NewWithInstance("source", m.src, "spanner", d)
	if err != nil {
		return err, nil
	}
	mg.Log = migrateLogger{m.cfg.logger}
	done := make(chan error, 1)
	go func() { done <- mg.Up() }()
	select {
	case err = <-done:
	case <-mctx.Done():
		stopped = context.Cause(mctx)
		log.Warn("stopping after the migration under way", "why", stopped)
		mg.GracefulStop <- true
		err = <-done
	}
	if stopped == nil && mctx.Err() != nil {
		// golang-migrate returned first, failing because mctx ended.
		stopped = context.Cause(mctx)
	}
	return err, stopped
}

// settle records in res what the run did, takes back the dirty mark of a
// failed migration that applied nothing, and returns how Up ends.
func (m *Migrator) settle(ctx context.Context, log *slog.Logger, d *lockedDriver, lease *spanmutex.Lease, res Result, err, stopped error) (Result, error) {
	d.mu.Lock()
	res.Applied, res.DDLRetries = append([]int(nil), d.applied...), d.retries
	unapplied, clean := d.unapplied, d.clean
	d.mu.Unlock()
	if err != nil && unapplied && lease.Err() == nil {
		// The failed migration applied nothing: take its dirty mark back.
		if serr := d.setVersion(context.WithoutCancel(ctx), clean, false); serr != nil {
			err = errors.Join(err, fmt.Errorf("migrations: restoring clean version %d: %w", clean, serr))
		}
	}
	if after, afterDirty, verr := d.Version(); verr == nil {
		res.After = after
		if afterDirty && err == nil {
			err = &DirtyError{Version: after}
		}
	}
	var de migrate.ErrDirty
	switch {
	case errors.Is(err, migrate.ErrNoChange):
		err = nil
	case errors.As(err, &de):
		err = &DirtyError{Version: de.Version}
	}
	if stopped != nil {
		return res, errors.Join(fmt.Errorf("migrations: stopped at version %d: %w", res.After, stopped), err)
	}
	if err != nil {
		return res, fmt.Errorf("migrations: %w", err)
	}
	log.Info("migrations up to date", "before", res.Before, "after", res.After, "applied", res.Applied)
	return res, nil
}

// migrateLogger routes golang-migrate's log lines to a slog.Logger.
type migrateLogger struct {
	l interface{ Info(string, ...any) }
}

func (g migrateLogger) Printf(format string, v ...any) {
	g.l.Info("golang-migrate: " + fmt.Sprintf(format, v...))
}

func (g migrateLogger) Verbose() bool { return false }
