package spangoose_test

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"log"

	_ "github.com/googleapis/go-sql-spanner" // database/sql driver "spanner"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"

	"github.com/spanmutex/spanmutex/emulator"
	spangoose "github.com/spanmutex/spanmutex/goose"
)

// The migration files, embedded as a service would.
//
//go:embed testdata/release1/*.sql
var migrationFiles embed.FS

// Every replica of a service runs goose up at start-up with a Locker: the
// first to take the lock applies the migrations, the others wait their
// turn and find nothing left to do.
func ExampleNewLocker() {
	ctx := context.Background()
	// A database with the spanmutex schema. In production: a
	// *spanner.Client of your database, where `spanmutex ddl` was applied.
	emu, err := emulator.Start(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer emu.Close()

	up := func() []int64 {
		// In production: sql.Open("spanner", "projects/P/instances/I/databases/D").
		db, err := sql.Open("spanner", emu.Host()+"/"+emu.Database()+";usePlainText=true")
		if err != nil {
			log.Fatal(err)
		}
		locker, err := spangoose.NewLocker(emu.Client())
		if err != nil {
			log.Fatal(err)
		}
		files, err := fs.Sub(migrationFiles, "testdata/release1")
		if err != nil {
			log.Fatal(err)
		}
		provider, err := goose.NewProvider(database.DialectSpanner, db, files,
			goose.WithLocker(locker),
			goose.WithIsolateDDL(true)) // go-sql-spanner runs no DDL inside a transaction
		if err != nil {
			log.Fatal(err)
		}
		defer provider.Close()
		gctx, cancel := locker.Context(ctx) // cancelled if the lease is lost
		defer cancel()
		results, err := provider.Up(gctx)
		if err != nil {
			log.Fatal(err)
		}
		var applied []int64
		for _, r := range results {
			applied = append(applied, r.Source.Version)
		}
		return applied
	}
	fmt.Println("first replica applied", up())
	fmt.Println("second replica applied", up())
	// Output:
	// first replica applied [1 2 3 4]
	// second replica applied []
}
