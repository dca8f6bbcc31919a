// Package spangoose (import path github.com/spanmutex/spanmutex/goose) makes
// goose (github.com/pressly/goose/v3) safe to run from every replica of a
// service on Cloud Spanner: a Locker, passed to goose.NewProvider with
// goose.WithLocker, holds a spanmutex Lock while goose migrates, so that
// replicas that all call goose up at start-up run it one at a time; the
// first applies what is pending, the others wait their turn (FIFO) and find
// nothing left.
//
// goose's own lockers cover PostgreSQL (and MySQL, SQL Server) only; its
// spanner dialect, through the database/sql driver for Spanner
// (github.com/googleapis/go-sql-spanner), has none, so replicas race.
//
//	locker, err := spangoose.NewLocker(client)          // client: a *spanner.Client of the database
//	provider, err := goose.NewProvider(database.DialectSpanner, db, files,
//		goose.WithLocker(locker), goose.WithIsolateDDL(true))
//	ctx, cancel := locker.Context(ctx)                  // required: Lock refuses any other ctx
//	defer cancel()
//	results, err := provider.Up(ctx)
//
// What the Locker does:
//
//   - Lock takes a fenced, reusable spanmutex Lock (name DefaultLockName,
//     lease DefaultLease, renewed in the background), waiting at most
//     DefaultLockTimeout (WithLockTimeout); Unlock gives it to the oldest
//     waiting replica.
//   - If the lease is lost while goose runs (the replica froze or lost
//     Spanner for a whole lease), the ctx made by Context is cancelled, so
//     goose stops at the statement under way, and Unlock's error, which
//     goose appends to its own, matches ErrStopped and
//     spanmutex.ErrLeaseLost. A replica that dies holding the lock is taken
//     over by the next one once its lease passes, with a higher token.
//   - Lease returns the current lease: a Go migration can fence its own
//     writes with it (Lease.Guard in its Spanner transaction).
//
// What it does not do: goose's version table (goose_db_version) is the
// record of what ran, and the lock only serialises replicas. goose writes
// that table through the *sql.DB, unfenced; a migration stopped half-way
// is not recorded, and goose runs it again from its first statement on the
// next call. DDL runs outside transactions on Spanner (and a schema change
// Spanner has accepted runs to its end even if goose is stopped or the
// process dies), so a DDL file that fails or is interrupted half-way leaves
// its earlier statements applied: write DDL that can run again (CREATE ...
// IF NOT EXISTS, ALTER TABLE ... ADD COLUMN IF NOT EXISTS). goose also
// creates its version table in HasPending, before it calls the Locker, and
// retries that creation itself (3 times, 1 s apart) when replicas race.
//
// goose with go-sql-spanner v1.16.0 needs goose.WithIsolateDDL(true) (the
// driver runs no DDL in a transaction, and goose would create its version
// table in one), "-- +goose NO TRANSACTION" on DDL files, and each DDL
// statement between StatementBegin and StatementEnd without a trailing
// semicolon (Spanner's DDL parser refuses it). GoogleSQL databases only:
// goose's spanner dialect writes GoogleSQL, so on a PostgreSQL-dialect
// database goose fails to create its version table (the Locker itself
// works on both dialects).
//
// The spanmutex table must exist in the database (`spanmutex ddl`); it is
// not a goose migration, since the lock guards the migrations. The guide,
// with a complete program, is doc/goose.md in the spanmutex repository.
package spangoose
