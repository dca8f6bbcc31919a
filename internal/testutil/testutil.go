// Package testutil holds what the tests of several packages share.
package testutil

import (
	"os"
	"runtime"
	"strconv"
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

// SeedRange returns the seeds a simulation runs: env_SEEDS=A-B, or from 1
// as many as env_SCHEDULES says (quick by default, soak with
// SPANMUTEX_SOAK=1).
func SeedRange(t testing.TB, env string, quick, soak uint64) (first, last uint64) {
	if r := os.Getenv(env + "_SEEDS"); r != "" {
		a, b, ok := strings.Cut(r, "-")
		if !ok {
			b = a
		}
		x, err1 := strconv.ParseUint(a, 10, 64)
		y, err2 := strconv.ParseUint(b, 10, 64)
		if err1 != nil || err2 != nil || y < x {
			t.Fatalf("%s_SEEDS=%q: want A-B", env, r)
		}
		return x, y
	}
	n := quick
	if os.Getenv("SPANMUTEX_SOAK") == "1" {
		n = soak
	}
	if s := os.Getenv(env + "_SCHEDULES"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil || v == 0 {
			t.Fatalf("%s_SCHEDULES=%q: want a positive count", env, s)
		}
		n = v
	}
	return 1, n
}
