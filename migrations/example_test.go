package migrations_test

import (
	"context"
	"embed"
	"fmt"
	"log"

	"github.com/golang-migrate/migrate/v4/source/iofs"

	"github.com/spanmutex/spanmutex/emulator"
	"github.com/spanmutex/spanmutex/migrations"
)

// The migration files, embedded as a service would: golang-migrate's
// {version}_{title}.up.sql, DML files marked with migrations.DMLMarker.
//
//go:embed testdata/release1/*.sql
var migrationFiles embed.FS

// Every replica of a service calls Up at start-up: the first to take the
// lock applies the migrations, the others find nothing left to do.
func ExampleMigrator_Up() {
	ctx := context.Background()
	emu, err := emulator.Start(ctx) // a database with the spanmutex schema
	if err != nil {
		log.Fatal(err)
	}
	defer emu.Close()

	up := func() migrations.Result {
		src, err := iofs.New(migrationFiles, "testdata/release1")
		if err != nil {
			log.Fatal(err)
		}
		defer src.Close()
		// In production, migrations.New(client, src) is enough; the
		// emulator's admin API is reached with its client options.
		m, err := migrations.New(emu.Client(), src, migrations.WithAdminClientOptions(emu.ClientOptions()...))
		if err != nil {
			log.Fatal(err)
		}
		res, err := m.Up(ctx)
		if err != nil {
			log.Fatal(err)
		}
		return res
	}
	first := up()
	fmt.Printf("first replica: version %d -> %d, applied %v\n", first.Before, first.After, first.Applied)
	second := up()
	fmt.Printf("second replica: version %d, applied %v\n", second.After, second.Applied)
	// Output:
	// first replica: version -1 -> 4, applied [1 2 3 4]
	// second replica: version 4, applied []
}
