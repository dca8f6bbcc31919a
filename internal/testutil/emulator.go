package testutil

import (
	"context"
	"flag"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"testing"
	"time"

	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/emulator"
)

// RunTests is the TestMain body of a package whose integration tests share
// one emulator: emulator.RunTests, keeping the emulator in *emu (nil with
// -short). It also points $SPANNER_EMULATOR_HOST at it, unless it is set
// already, so that the testable examples, which call emulator.Start as a
// user would, attach to it with a fresh database each; and it lets
// parallelTests parallel tests run at once (WidenParallel).
func RunTests(m *testing.M, emu **emulator.Emulator) int {
	WidenParallel()
	lessGC()
	return emulator.RunTests(m, func(e *emulator.Emulator) {
		*emu = e
		if os.Getenv(emulator.HostEnv) == "" {
			os.Setenv(emulator.HostEnv, e.Host())
		}
	})
}

// parallelTests is how many parallel tests WidenParallel lets run at once:
// the root package's parallel phase was bound by its 4 slots (the waiting
// tests queued for them while the cores had room: go test ./... 4m06s).
const parallelTests = 5

// WidenParallel lets parallelTests parallel tests run at once (or
// GOMAXPROCS, if more) unless -test.parallel was given or the race
// detector is on (its runs are several times slower, and tests that bound
// a wake-up's latency or demand that every contended call succeed would
// run out of time beside more of them); call it from TestMain, before
// m.Run. The packages' parallel tests are simulations, which use every
// core, and integration tests that mostly wait for leases to pass; with
// only GOMAXPROCS of them at once (2 on CI), the waiting ones would queue
// behind the others while the cores idle.
func WidenParallel() {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given && !raceDetector {
		_ = flag.Set("test.parallel", strconv.Itoa(max(parallelTests, runtime.GOMAXPROCS(0))))
	}
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

// testGCPercent is the GC's heap growth target for the test binaries, in
// place of Go's default of 100.
const testGCPercent = 400

// lessGC lets the heap grow to testGCPercent percent past the live heap
// before a collection, unless $GOGC is set: the simulations make short-lived
// garbage at every turn, and on 2 cores each collection takes CPU from
// them; their live heaps are a few MiB, so the machine's memory pays.
func lessGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(testGCPercent)
	}
}
