package bench

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/spanmutex/spanmutex/emulator"
)

// emu is the emulator shared by this package's integration tests; nil with
// -short.
var emu *emulator.Emulator

// TestMain starts the real Cloud Spanner emulator once for the package. If
// it cannot be found the run fails, saying how to install it; -short skips
// the integration tests instead.
func TestMain(m *testing.M) {
	flag.Parse()
	if !testing.Short() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		var err error
		emu, err = emulator.Start(ctx)
		cancel()
		if err != nil {
			fmt.Fprintf(os.Stderr, "integration tests need the Cloud Spanner emulator (run with -short to skip them): %v\n", err)
			os.Exit(1)
		}
	}
	code := m.Run()
	if emu != nil {
		if err := emu.Close(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	os.Exit(code)
}

// needEmulator skips the test under -short.
func needEmulator(t *testing.T) {
	t.Helper()
	if emu == nil {
		t.Skip("integration test: needs the emulator (skipped with -short)")
	}
}
