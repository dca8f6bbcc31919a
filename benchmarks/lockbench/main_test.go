package lockbench

import (
	"os"
	"testing"
)

// TestMain lets the test binary be a contender process: Run starts this
// binary again with ChildEnv set.
func TestMain(m *testing.M) {
	MaybeChild()
	os.Exit(m.Run())
}
