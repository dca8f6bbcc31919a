package testutil

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/emulator"
)

// RunTests is the TestMain body of a package whose integration tests share
// one emulator: emulator.RunTests, keeping the emulator in *emu (nil with
// -short). It also points $SPANNER_EMULATOR_HOST at it, unless it is set
// already, so that the testable examples, which call emulator.Start as a
// user would, attach to it with a fresh database each.
func RunTests(m *testing.M, emu **emulator.Emulator) int {
	return emulator.RunTests(m, func(e *emulator.Emulator) {
		*emu = e
		if os.Getenv(emulator.HostEnv) == "" {
			os.Setenv(emulator.HostEnv, e.Host())
		}
	})
}

// NeedEmulator skips t when emu is nil: under -short, RunTests starts none.
func NeedEmulator(t testing.TB, emu *emulator.Emulator) {
	t.Helper()
	if emu == nil {
		t.Skip("integration test: needs the emulator (skipped with -short)")
	}
}

// NewDatabase creates a database of t's own on emu, in dialect d, holding
// the spanmutex schema followed by extra (in d), and returns its path; it is
// dropped when t ends. It skips t when emu is nil.
func NewDatabase(t testing.TB, emu *emulator.Emulator, d ddl.Dialect, extra ...string) string {
	t.Helper()
	NeedEmulator(t, emu)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, err := emu.NewDatabaseIn(ctx, d, extra...)
	if err != nil {
		t.Fatal(err)
	}
	// Registered first, so run last: after the test's clients and
	// processes are closed.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := emu.DropDatabase(ctx, db); err != nil {
			t.Logf("%v (the emulator allows 100 databases per instance)", err)
		}
	})
	return db
}
