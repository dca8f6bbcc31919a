package spangoose_test

// What a replica of a service does at start-up, shared by the in-process
// tests and the replica processes of process_test.go: open a client and a
// database/sql pool, make a Locker and a goose Provider, and run goose up.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"time"

	"cloud.google.com/go/spanner"
	_ "github.com/googleapis/go-sql-spanner" // the "spanner" database/sql driver
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"

	spangoose "github.com/spanmutex/spanmutex/goose"
)

// refundsVersion is the Go migration every replica registers after the SQL
// files of testdata/release1: DDL, then a backfill fenced on the lease.
const refundsVersion = 5

// refundsMigration creates the Refunds table (IF NOT EXISTS, so that a
// replica that takes over from one that died after the DDL can run it
// again), calls paused (a test's hook: it may block), then counts its run
// in Backfills in a transaction fenced on the Locker's lease.
func refundsMigration(client *spanner.Client, locker *spangoose.Locker, paused func(context.Context)) *goose.Migration {
	up := func(ctx context.Context, db *sql.DB) error {
		if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS Refunds (
			RefundId INT64 NOT NULL, OrderId INT64 NOT NULL) PRIMARY KEY (RefundId)`); err != nil {
			return err
		}
		paused(ctx)
		lease := locker.Lease()
		_, err := client.ReadWriteTransaction(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
			if err := lease.Guard(ctx, txn); err != nil {
				return err // the lease was lost: a newer holder may be running this
			}
			_, err := txn.Update(ctx, spanner.Statement{SQL: `UPDATE Backfills SET Runs = Runs + 1 WHERE Name = 'refunds'`})
			return err
		})
		return err
	}
	return goose.NewGoMigration(refundsVersion, &goose.GoFunc{RunDB: up}, nil)
}

// newProvider is the goose Provider of a replica: the files of dir, the
// Go migrations, the Locker.
func newProvider(db *sql.DB, dir string, locker *spangoose.Locker, gos ...*goose.Migration) (*goose.Provider, error) {
	return goose.NewProvider(database.DialectSpanner, db, os.DirFS(dir),
		goose.WithLocker(locker),
		goose.WithIsolateDDL(true), // go-sql-spanner runs no DDL inside a transaction
		goose.WithGoMigrations(gos...),
		goose.WithDisableGlobalRegistry(true))
}

// replica is one service instance's goose set-up.
type replica struct {
	client   *spanner.Client
	db       *sql.DB
	locker   *spangoose.Locker
	provider *goose.Provider
}

// openReplica opens a replica of the database at dbPath that migrates with
// the files of dir; the clients find the emulator through
// SPANNER_EMULATOR_HOST, as a service's would.
func openReplica(ctx context.Context, dbPath, dir string, paused func(context.Context), opts ...spangoose.Option) (*replica, error) {
	client, err := spanner.NewClientWithConfig(ctx, dbPath, spanner.ClientConfig{DisableNativeMetrics: true})
	if err != nil {
		return nil, err
	}
	r := &replica{client: client}
	if r.db, err = sql.Open("spanner", dbPath); err != nil {
		r.close()
		return nil, err
	}
	if r.locker, err = spangoose.NewLocker(client, opts...); err != nil {
		r.close()
		return nil, err
	}
	if paused == nil {
		paused = func(context.Context) {}
	}
	r.provider, err = newProvider(r.db, dir, r.locker, refundsMigration(client, r.locker, paused))
	if err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

func (r *replica) close() {
	if r.provider != nil {
		_ = r.provider.Close() // closes r.db
	} else if r.db != nil {
		_ = r.db.Close()
	}
	r.client.Close()
}

// upResult is what one replica's goose up did.
type upResult struct {
	Applied  []int64 `json:"applied"`
	Version  int64   `json:"version"`
	Token    int64   `json:"token"`
	TookOver bool    `json:"took_over"`
	Err      string  `json:"err,omitempty"`
	Waited   float64 `json:"waited_s"`
	// Retries counts Up calls made again after the emulator refused DDL
	// (spangoose.IsSchemaChangeRejected).
	Retries int `json:"retries"`
}

// maxRetries bounds a replica's Up calls made again after a refused DDL.
const maxRetries = 5

// up runs goose up under the Locker, as a service does at start-up, and
// reads the version the replica ends at. An error is also in res.Err.
func (r *replica) up(ctx context.Context) (res upResult, err error) {
	defer func() {
		if err != nil {
			res.Err = err.Error()
		}
	}()
	began := time.Now()
	gctx, cancel := r.locker.Context(ctx)
	defer cancel()
	results, err := r.provider.Up(gctx)
	for ; spangoose.IsSchemaChangeRejected(err) && res.Retries < maxRetries; res.Retries++ {
		results, err = r.provider.Up(gctx) // the emulator refused DDL while others' transactions ran
	}
	res.Waited = time.Since(began).Seconds()
	var partial *goose.PartialError
	if errors.As(err, &partial) {
		results = partial.Applied
	}
	for _, m := range results {
		res.Applied = append(res.Applied, m.Source.Version)
	}
	if lease := r.locker.Lease(); lease != nil {
		res.Token, res.TookOver = lease.Token(), lease.TookOver()
	}
	if err != nil {
		return res, err
	}
	// GetDBVersion takes the lock too (goose calls the Locker for it).
	if res.Version, err = r.provider.GetDBVersion(gctx); err != nil {
		return res, fmt.Errorf("read the version: %w", err)
	}
	return res, nil
}
