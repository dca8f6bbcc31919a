// Package migrations makes golang-migrate (github.com/golang-migrate/migrate/v4)
// safe to run from every replica of a service on Cloud Spanner: the replicas
// call Up at start-up, one applies the pending migrations, the others wait
// their turn and find nothing to do.
//
// golang-migrate's spanner driver holds no lock (its Lock does nothing),
// creates its version table in Open before Lock is called, takes no context,
// and sends every file to the DDL API. Here
//
//   - a spanmutex Lock (FIFO, leased, fenced) is taken before the driver is
//     opened and released after golang-migrate is done;
//   - a lost lease stops golang-migrate after the migration under way
//     (GracefulStop) and Up reports it (spanmutex.ErrLeaseLost); the version
//     table and DML files are written fenced on the lease, so a migrator
//     that lost the lock cannot write them;
//   - DDL that Spanner rejects because a concurrent schema change or
//     read-write transaction is in progress (the emulator does so while
//     waiters' transactions drain) is sent again before it could leave the
//     version dirty;
//   - golang-migrate's ErrNoChange is success;
//   - a file whose first non-blank line is DMLMarker ("-- spanmutex:dml") is
//     DML, a backfill: its statements run in one read-write transaction, all
//     or none, and a failure leaves the version clean.
//
// Migration files are golang-migrate's ({version}_{title}.up.sql) and its
// version table is its spanner driver's (SchemaMigrations: Version, Dirty),
// so the migrate CLI still reads and forces it. DDL files may hold several
// statements separated by semicolons; comments are removed.
//
// DDL is sent through the DDL API, outside any transaction, so it is not
// fenced by the lease: a migrator that loses the lock during a schema change
// finishes that change, and a DDL file that fails half-way leaves the version
// dirty (Up then returns a *DirtyError). The guarantees and their tests are
// claim 20 of CORRECTNESS_DISCLAIMER.md in the spanmutex repository.
//
// The mutex table of spanmutex must exist in the database (spanmutex ddl);
// it is not itself a migration, since the lock guards the migrations.
//
//	//go:embed migrations/*.sql
//	var files embed.FS
//
//	src, err := iofs.New(files, "migrations")
//	m, err := migrations.New(client, src)
//	res, err := m.Up(ctx)   // res.Applied is empty if another replica applied them
//
// Release versions: Up runs under the reusable Lock every time, and
// golang-migrate's version table says what is left to apply, so a new
// release's migrations are applied by its first replica with no per-release
// name. (For a command that is not a migration tool and must run once per
// release, see spanmutex.WithVersion.)
//
// goose: not supported. Its lockers (lock.SessionLocker on a *sql.Conn,
// lock.Locker on a *sql.DB) could wrap a spanmutex Lock and ignore the
// connection, but goose reaches Spanner only through database/sql
// (go-sql-spanner) with a Spanner dialect or a custom store, which this
// module does not take on: which goose and go-sql-spanner releases work with
// the Spanner client pinned here was not checked.
package migrations
