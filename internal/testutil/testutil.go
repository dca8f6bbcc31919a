// Package testutil holds what the tests of several packages share.
package testutil

import (
	"os"
	"runtime"
	"strings"
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

// Goroutines counts the running goroutines whose stack names one of
// markers (a function or type, such as "queue.(*Capture)").
func Goroutines(markers ...string) int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		for _, m := range markers {
			if strings.Contains(g, m) {
				count++
				break
			}
		}
	}
	return count
}

// NoGoroutinesOf fails the test if, within a few seconds of its end, any
// goroutine still names one of markers (functions of what). Counting all
// goroutines would not do: os/signal, say, starts one of its own for good.
func NoGoroutinesOf(t testing.TB, what string, markers ...string) {
	t.Helper()
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for Goroutines(markers...) > 0 {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				t.Errorf("goroutines of %s are still running:\n%s", what, buf[:runtime.Stack(buf, true)])
				return
			}
			<-tick.C
		}
	})
}

// SoakEnv, set to any value, makes the long soaks run at full size (CI sets
// it); without it they run at a size that keeps `go test ./...` within a few
// minutes on a 2-core machine.
const SoakEnv = "SPANMUTEX_SOAK"

// Scale returns soak when SoakEnv is set, and quick otherwise.
func Scale(quick, soak int) int {
	if os.Getenv(SoakEnv) != "" {
		return soak
	}
	return quick
}
