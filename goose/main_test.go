package spangoose_test

import (
	"os"
	"testing"

	"github.com/spanmutex/spanmutex/emulator"
	"github.com/spanmutex/spanmutex/internal/testutil"
)

// emu is the emulator shared by this package's integration tests; nil with
// -short.
var emu *emulator.Emulator

func TestMain(m *testing.M) {
	if spec := os.Getenv(replicaEnv); spec != "" {
		os.Exit(runReplica(spec)) // a replica process of a process test
	}
	os.Exit(testutil.RunTests(m, &emu))
}
