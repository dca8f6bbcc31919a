package history_test

import (
	"os"
	"testing"

	"github.com/spanmutex/spanmutex/emulator"
)

// emu is the emulator shared by this package's integration tests; nil with
// -short.
var emu *emulator.Emulator

// TestMain starts the real Cloud Spanner emulator once for the package. If it
// cannot be found the run fails, saying how to install it; -short skips the
// integration tests instead.
func TestMain(m *testing.M) {
	os.Exit(emulator.RunTests(m, func(e *emulator.Emulator) { emu = e }))
}

// needEmulator skips the test under -short.
func needEmulator(t *testing.T) {
	t.Helper()
	if emu == nil {
		t.Skip("integration test: needs the emulator (skipped with -short)")
	}
}
