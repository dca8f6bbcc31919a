// Package testutil holds what the tests of several packages share.
package testutil

import (
	"testing"
	"time"
)

// WaitFor polls cond every 20ms until it holds, and fails the test if it
// does not within timeout. Tests wait with it for a condition instead of
// sleeping.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		<-tick.C
	}
}
