package main

import (
	"bufio"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/golang-migrate/migrate/v4/source/iofs"

	"github.com/spanmutex/spanmutex"
	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/internal/cmdline"
	"github.com/spanmutex/spanmutex/migrations"
)

// demoMigrations are the migration files of the demo's two releases, as a
// service would embed its own: DDL, and DML files marked with
// migrations.DMLMarker (a seed and two backfills that count their runs).
//
//go:embed demomigrations
var demoMigrations embed.FS

// replicaEnv is set in the environment of the replicas the demo starts. The
// spanmutex binary needs nothing from it; a test binary standing in for
// spanmutex (the demo's tests run it in-process) sees it in TestMain and
// runs the command line instead of the tests.
const replicaEnv = "SPANMUTEX_DEMO_REPLICA"

// replicaReport is what a replica prints on stdout, as one JSON line, once
// its Up returned.
type replicaReport struct {
	Instance   int    `json:"instance"`
	Applied    []int  `json:"applied"`
	Before     int    `json:"before"`
	After      int    `json:"after"`
	Token      int64  `json:"token"`
	WaitedMS   int64  `json:"waited_ms"`
	TookMS     int64  `json:"took_ms"`
	DDLRetries int    `json:"ddl_retries"`
	Error      string `json:"error,omitempty"`
}

// cmdDemoReplica is "spanmutex demo replica": one service instance of the
// demo's migration scenario, started by the demo as a process of its own.
// It connects, prints "ready", waits for a line on stdin (the demo starts
// all replicas at once), runs migrations.Up over the release's files, and
// prints a replicaReport. It is not meant to be run by hand.
func cmdDemoReplica(ctx context.Context, s streams, args []string) int {
	fs := flag.NewFlagSet("spanmutex demo replica", flag.ContinueOnError)
	fs.SetOutput(s.Stderr)
	database := fs.String("database", "", "the database")
	table := fs.String("table", ddl.DefaultMutexTable, "the mutex table")
	release := fs.String("release", "release1", "the release whose migrations to apply: a directory of demomigrations")
	instance := fs.Int("instance", 0, "the instance number")
	lease := fs.Duration("lease", 10*time.Second, "the lock's lease")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	report := replicaReport{Instance: *instance, Before: -1, After: -1}
	fail := func(err error) int {
		report.Error = err.Error()
		_ = json.NewEncoder(s.Stdout).Encode(report)
		return exitError
	}
	client, err := cmdline.OpenClient(ctx, *database)
	if err != nil {
		return fail(err)
	}
	defer client.Close()
	src, err := iofs.New(demoMigrations, "demomigrations/"+*release)
	if err != nil {
		return fail(err)
	}
	defer src.Close()
	m, err := migrations.New(client, src, migrations.WithLockOptions(
		spanmutex.WithTable(*table),
		spanmutex.WithOwner(ownerOf(*instance)),
		spanmutex.WithLease(*lease),
	))
	if err != nil {
		return fail(err)
	}
	fmt.Fprintln(s.Stdout, "ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return fail(fmt.Errorf("waiting for the start: %w", err))
	}
	began := time.Now()
	res, err := m.Up(ctx)
	report.Applied, report.Before, report.After, report.Token = res.Applied, res.Before, res.After, res.Token
	report.WaitedMS, report.TookMS, report.DDLRetries = res.Waited.Milliseconds(), time.Since(began).Milliseconds(), res.DDLRetries
	if report.Applied == nil {
		report.Applied = []int{}
	}
	if err != nil {
		return fail(err)
	}
	if err := json.NewEncoder(s.Stdout).Encode(report); err != nil {
		return fail(errors.Join(errors.New("writing the report"), err))
	}
	return exitOK
}
