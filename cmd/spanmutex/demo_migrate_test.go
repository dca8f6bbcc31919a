package main

import (
	"context"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spanmutex/spanmutex/internal/cmdline"
	"github.com/spanmutex/spanmutex/internal/testutil"
)

// TestMigrationRaceAcrossProcesses plays the demo's migration scenarios
// (8 replicas as separate OS processes, each running golang-migrate under
// package migrations' lock; release 1, then release 2) for 20 rounds, each
// on a new database, and counts what must never happen: a dirty version, a
// backfill run twice, a replica that gave up. MIGRATIONS_PROCESS_ROUNDS
// changes the number of rounds.
func TestMigrationRaceAcrossProcesses(t *testing.T) {
	needEmulator(t)
	rounds := testutil.Scale(4, 20)
	if s := os.Getenv("MIGRATIONS_PROCESS_ROUNDS"); s != "" {
		var err error
		if rounds, err = strconv.Atoi(s); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(cmdline.EmulatorHostEnv, emu.Host())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	var out strings.Builder
	d := &demo{out: newConsole(&out), opts: &demoOptions{database: newDatabase(t), table: "Mutexes", instances: 8}, suffix: "test"}
	retried := regexp.MustCompile(`(\d+) DDL send\(s\) retried`)
	var failedRounds, dirty, doubled, gaveUp, retries int
	began := time.Now()
	for round := range rounds {
		out.Reset()
		d.checks = 0
		ok, err := d.migrationScenarios(ctx)
		if err != nil {
			t.Fatalf("round %d: %v\n%s", round, err, out.String())
		}
		text := out.String()
		if !ok {
			failedRounds++
			t.Errorf("round %d: a check failed:\n%s", round, text)
		}
		dirty += strings.Count(text, "dirty true")
		doubled += strings.Count(text, ":2") + strings.Count(text, ":3")
		gaveUp += strings.Count(text, "FAILED:")
		for _, m := range retried.FindAllStringSubmatch(text, -1) {
			n, _ := strconv.Atoi(m[1])
			retries += n
		}
		if d.checks != 8 {
			t.Errorf("round %d: %d checks passed, want 8", round, d.checks)
		}
	}
	t.Logf("%d rounds x 2 releases x 8 processes in %v: %d rounds failed a check, %d dirty, %d double backfills, %d replicas gave up; %d DDL sends retried",
		rounds, time.Since(began).Round(time.Second), failedRounds, dirty, doubled, gaveUp, retries)
}
