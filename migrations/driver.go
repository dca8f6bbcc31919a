package migrations

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"cloud.google.com/go/spanner"
	dbadmin "cloud.google.com/go/spanner/admin/database/apiv1"
	adminpb "cloud.google.com/go/spanner/admin/database/apiv1/databasepb"
	"github.com/cenkalti/backoff/v4"
	"github.com/golang-migrate/migrate/v4/database"
	spannerdriver "github.com/golang-migrate/migrate/v4/database/spanner"
	"google.golang.org/api/iterator"
	"google.golang.org/grpc/codes"

	"github.com/spanmutex/spanmutex"
	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/internal/pace"
)

// lockedDriver is the database.Driver golang-migrate runs against: its
// upstream spanner driver, opened while a spanmutex Lock is held, with
//
//   - Lock and Unlock that hold nothing themselves but check the lease:
//     the spanmutex Lock is taken before the upstream driver is opened
//     (its Open creates the version table) and released after Up returns;
//   - Run that retries DDL Spanner rejects because of a concurrent schema
//     change or read-write transaction, and runs files marked DMLMarker as
//     DML in one read-write transaction fenced on the lease;
//   - SetVersion fenced on the lease, so a migrator that lost the lock
//     cannot move the version.
//
// Its methods take no context (golang-migrate's interface has none): they
// use the Up call's.
type lockedDriver struct {
	upstream database.Driver // for Drop
	client   *spanner.Client
	admin    *dbadmin.DatabaseAdminClient
	cfg      *config
	lease    *spanmutex.Lease
	ctx      context.Context // Up's, cancelled when the lease is lost

	mu sync.Mutex
	// clean is the last version known clean, -1 for none.
	clean int
	// unapplied: the last Run failed without applying anything (a rejected
	// DDL given up, a rolled-back DML transaction), so the dirty mark it
	// leaves may be taken back.
	unapplied bool
	applied   []int // versions applied by this driver, in order
	retries   int   // DDL sent again after a concurrent-schema-change rejection
}

var _ database.Driver = (*lockedDriver)(nil)

// cleanMarkTimeout bounds the write of a migration's clean mark once Up's
// ctx has ended.
const cleanMarkTimeout = 30 * time.Second

// Open is not supported: open migrations through New and Up, which hold the
// lock while golang-migrate's driver opens.
func (d *lockedDriver) Open(string) (database.Driver, error) {
	return nil, errors.New("migrations: open the driver through migrations.New and Migrator.Up")
}

// Close closes nothing: the clients belong to the Migrator's caller.
func (d *lockedDriver) Close() error { return nil }

// Lock checks that the lease is still held: the lock itself was taken
// before the driver was opened.
func (d *lockedDriver) Lock() error { return d.lease.Err() }

// Unlock does nothing: the lock is released by Up once golang-migrate is done.
func (d *lockedDriver) Unlock() error { return nil }

// Version returns the version and dirty flag from golang-migrate's table.
// Version reads the version table by key rather than with the upstream
// driver's GoogleSQL query, so that it works in both dialects. The table
// holds one row at most (SetVersion replaces it); none is golang-migrate's
// NilVersion.
//
// It reads even after Up's ctx ended (a lost lease), as the upstream driver
// did, so that Up can report where the migrations stopped; it is a read,
// which changes nothing.
func (d *lockedDriver) Version() (int, bool, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(d.ctx), cleanMarkTimeout)
	defer cancel()
	it := d.client.Single().ReadWithOptions(ctx, d.cfg.migrationsTable, spanner.AllKeys(), []string{"Version", "Dirty"}, &spanner.ReadOptions{Limit: 1})
	defer it.Stop()
	row, err := it.Next()
	if errors.Is(err, iterator.Done) {
		return database.NilVersion, false, nil
	}
	var (
		version int64
		dirty   bool
	)
	if err == nil {
		err = row.Columns(&version, &dirty)
	}
	if err != nil {
		return 0, false, &database.Error{OrigErr: err, Err: "read the version from " + d.cfg.migrationsTable}
	}
	return int(version), dirty, nil
}

// Drop drops everything, as golang-migrate's spanner driver does.
func (d *lockedDriver) Drop() error { return d.upstream.Drop() }

// SetVersion writes the version table as golang-migrate's spanner driver
// does (one row), in a read-write transaction fenced on the lease. The
// clean mark after a migration is written even if Up's ctx has ended (within
// cleanMarkTimeout): the migration is applied, and leaving it marked dirty
// would stop every later Up for nothing. A lost lease still stops it.
func (d *lockedDriver) SetVersion(version int, dirty bool) error {
	ctx := d.ctx
	if !dirty {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(d.ctx), cleanMarkTimeout)
		defer cancel()
	}
	if err := d.setVersion(ctx, version, dirty); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !dirty {
		if version != d.clean {
			d.applied = append(d.applied, version)
		}
		d.clean = version
	}
	return nil
}

func (d *lockedDriver) setVersion(ctx context.Context, version int, dirty bool) error {
	_, err := d.client.ReadWriteTransaction(ctx, func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
		if err := d.lease.Guard(ctx, tx); err != nil {
			return err
		}
		return tx.BufferWrite([]*spanner.Mutation{
			spanner.Delete(d.cfg.migrationsTable, spanner.AllKeys()),
			spanner.Insert(d.cfg.migrationsTable, []string{"Version", "Dirty"}, []any{int64(version), dirty}),
		})
	})
	if err != nil {
		return &database.Error{OrigErr: err, Err: fmt.Sprintf("set version %d (dirty %v)", version, dirty)}
	}
	return nil
}

// Run applies one migration file.
func (d *lockedDriver) Run(migration io.Reader) error {
	body, err := io.ReadAll(migration)
	if err != nil {
		return err
	}
	d.mu.Lock()
	d.unapplied = false
	d.mu.Unlock()
	stmts := splitStatements(string(body))
	if len(stmts) == 0 {
		return nil
	}
	if isDML(string(body)) {
		return d.runDML(body, stmts)
	}
	return d.runDDL(body, stmts)
}

// runDML runs the statements in one read-write transaction that commits
// only while the lease is held: all apply, or none does.
func (d *lockedDriver) runDML(body []byte, stmts []string) error {
	_, err := d.client.ReadWriteTransaction(d.ctx, func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
		if err := d.lease.Guard(ctx, tx); err != nil {
			return err
		}
		ss := make([]spanner.Statement, len(stmts))
		for i, s := range stmts {
			ss[i] = spanner.NewStatement(s)
		}
		_, err := tx.BatchUpdate(ctx, ss)
		return err
	})
	if err != nil {
		d.markUnapplied()
		return &database.Error{OrigErr: err, Err: "DML migration failed; its transaction rolled back", Query: body}
	}
	return nil
}

// runDDL sends the statements to the DDL API, again while Spanner rejects
// them because of a concurrent schema change or read-write transaction
// (nothing applied), for at most the retry timeout. An operation under way
// is waited for even if ctx ends: abandoning it would leave the version
// dirty while the schema change goes on.
func (d *lockedDriver) runDDL(body []byte, stmts []string) error {
	ctx := context.WithoutCancel(d.ctx)
	bo := ddlBackOff(d.cfg.retryTimeout)
	for {
		err := applyDDL(ctx, d.admin, d.client.DatabaseName(), stmts)
		if err == nil {
			return nil
		}
		if !isConcurrentSchemaChange(err) {
			return &database.Error{OrigErr: err, Err: "DDL migration failed", Query: body}
		}
		d.mu.Lock()
		d.retries++
		d.mu.Unlock()
		wait := bo.NextBackOff()
		d.cfg.logger.Debug("DDL rejected because of a concurrent schema change or transaction; sending it again", "in", wait, "err", err)
		if wait == backoff.Stop || d.lease.Err() != nil {
			d.markUnapplied()
			return &database.Error{OrigErr: err, Err: fmt.Sprintf("DDL migration rejected for %v because of concurrent schema changes or transactions", d.cfg.retryTimeout), Query: body}
		}
		if pace.Sleep(d.ctx, wait) != nil {
			d.markUnapplied()
			return &database.Error{OrigErr: errors.Join(err, context.Cause(d.ctx)), Err: "DDL migration stopped while Spanner rejected it", Query: body}
		}
	}
}

func (d *lockedDriver) markUnapplied() {
	d.mu.Lock()
	d.unapplied = true
	d.mu.Unlock()
}

// ddlBackOff paces the sending again of DDL that Spanner rejected because
// of a concurrent schema change or transaction, for at most timeout.
func ddlBackOff(timeout time.Duration) backoff.BackOff {
	bo := backoff.NewExponentialBackOff()
	bo.InitialInterval, bo.MaxInterval, bo.MaxElapsedTime = 50*time.Millisecond, 2*time.Second, timeout
	bo.Reset()
	return bo
}

// openUpstream opens golang-migrate's spanner driver, which creates the
// version table if it is missing; it is called with the lock held, and
// retried while Spanner rejects that DDL because of a concurrent schema
// change or transaction. dialect is the database's (read by Up).
// It returns how many times it tried again.
func openUpstream(ctx context.Context, client *spanner.Client, admin *dbadmin.DatabaseAdminClient, dialect ddl.Dialect, cfg *config) (database.Driver, int, error) {
	bo := ddlBackOff(cfg.retryTimeout)
	for retries := 0; ; retries++ {
		var (
			drv database.Driver
			err error
		)
		if dialect == ddl.PostgreSQL {
			err = ensurePostgreSQLVersionTable(ctx, client, admin, cfg)
		}
		if err == nil {
			// NewDB takes the clients by value; the copies share their connections.
			drv, err = spannerdriver.WithInstance(spannerdriver.NewDB(*admin, *client), &spannerdriver.Config{
				DatabaseName:    client.DatabaseName(),
				MigrationsTable: cfg.migrationsTable,
			})
		}
		if err == nil || !isConcurrentSchemaChange(err) {
			return drv, retries, err
		}
		cfg.logger.Debug("creating the version table was rejected because of a concurrent schema change or transaction; trying again", "err", err)
		wait := bo.NextBackOff()
		if wait == backoff.Stop {
			return nil, retries, err
		}
		if pace.Sleep(ctx, wait) != nil {
			return nil, retries, errors.Join(err, ctx.Err())
		}
	}
}

// ensurePostgreSQLVersionTable creates the version table of a
// PostgreSQL-dialect database if it is missing: golang-migrate's spanner
// driver would create it with GoogleSQL DDL, which such a database
// refuses; it finds it there and leaves it. The names are quoted, so that
// the table and its columns keep the driver's names (SchemaMigrations:
// Version, Dirty). A GoogleSQL database is left to the driver.
func ensurePostgreSQLVersionTable(ctx context.Context, client *spanner.Client, admin *dbadmin.DatabaseAdminClient, cfg *config) error {
	it := client.Single().ReadWithOptions(ctx, cfg.migrationsTable, spanner.AllKeys(), []string{"Version"}, &spanner.ReadOptions{Limit: 1})
	_, err := it.Next()
	it.Stop()
	if err == nil || errors.Is(err, iterator.Done) {
		return nil
	}
	if spanner.ErrCode(err) != codes.NotFound {
		return fmt.Errorf("migrations: read %s: %w", cfg.migrationsTable, err)
	}
	return applyDDL(ctx, admin, client.DatabaseName(),
		[]string{`CREATE TABLE "` + cfg.migrationsTable + `" ("Version" bigint NOT NULL, "Dirty" boolean NOT NULL, PRIMARY KEY ("Version"))`})
}

// applyDDL sends stmts to the DDL API for database db and waits until the
// operation is done.
func applyDDL(ctx context.Context, admin *dbadmin.DatabaseAdminClient, db string, stmts []string) error {
	op, err := admin.UpdateDatabaseDdl(ctx, &adminpb.UpdateDatabaseDdlRequest{Database: db, Statements: stmts})
	if err != nil {
		return err
	}
	return op.Wait(ctx)
}
