package main

import (
	"strings"
	"testing"

	"github.com/spanmutex/spanmutex/internal/cmdline"
)

// TestDemo runs the demo in-process, against a database of the test
// emulator and on an embedded emulator of its own, and checks that it
// passes and says so.
func TestDemo(t *testing.T) {
	needEmulator(t)
	runOnBothBackends(t, newDatabase(t), noLeak, []string{"demo", "--lease", "1s", "--instances", "8"}, func(t *testing.T, stdout, _ string) {
		for _, want := range []string{
			"release1 was applied exactly once: one replica applied migrations [1 2 3 4] (1 did)",
			"release2 was applied exactly once: one replica applied migrations [5 6] (1 did)",
			"the 7 other replicas waited for the lock, came after the applier (higher tokens: 7) and found version 6 with nothing to apply (7 did)",
			"the database is at version 6 and not dirty",
			"each backfill ran exactly once so far (want map[priority:1 status:1], counted map[priority:1 status:1])",
			"took over from the silent holder",
			"Summary: each release's migrations were applied exactly once by golang-migrate",
		} {
			if !strings.Contains(stdout, want) {
				t.Errorf("stdout does not contain %q:\n%s", want, stdout)
			}
		}
		if strings.Contains(stdout, "FAIL") {
			t.Errorf("a check failed:\n%s", stdout)
		}
	})
}

// TestDemoWithoutSchema points the demo at a table that does not exist: it
// says so once, with how to create it, and exits 1.
func TestDemoWithoutSchema(t *testing.T) {
	needEmulator(t)
	t.Setenv(cmdline.EmulatorHostEnv, emu.Host())
	code, stdout, stderr := cli(t, "demo", "--database", newDatabase(t), "--table", "NoSuchTable")
	if code != exitError || strings.Count(stderr, "does not exist") != 1 || !strings.Contains(stderr, "spanmutex ddl --table NoSuchTable") {
		t.Errorf("exit %d; stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if strings.Contains(stdout, "Scenario") {
		t.Errorf("the demo started without a schema:\n%s", stdout)
	}
}
