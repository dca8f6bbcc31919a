// Package testutil holds what the tests of several packages share.
package testutil

import (
	"fmt"
	"math"
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

// Seeds is what a simulation runs: the schedules of seeds First to Last
// and, in a soak by time, only those begun before Until.
type Seeds struct {
	First, Last uint64
	Until       time.Time // zero: no time budget
}

// Runs reports whether the schedule of seed is to run: a seed fetched in
// increasing order, so that the seeds run are always First to the last
// one that ran, with no gap.
func (s Seeds) Runs(seed uint64) bool {
	return seed >= s.First && seed <= s.Last && (s.Until.IsZero() || time.Now().Before(s.Until))
}

// BaseEnv names the first seed of the soaks by time (CI derives it from
// the commit under test, so that every run explores seeds no run has
// tried); BudgetSuffix, appended to a simulation's env prefix, names its
// time budget (a time.Duration).
const (
	BaseEnv      = "SPANMUTEX_SIM_BASE"
	BudgetSuffix = "_BUDGET"
)

// SeedRange returns the seeds a simulation runs: env_SEEDS=A-B; or, with
// env_BUDGET=D, as many as D allows from SPANMUTEX_SIM_BASE (default 1);
// or from 1 as many as env_SCHEDULES says (quick by default, soak with
// SPANMUTEX_SOAK=1).
func SeedRange(t testing.TB, env string, quick, soak uint64) Seeds {
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
		return Seeds{First: x, Last: y}
	}
	if b := os.Getenv(env + BudgetSuffix); b != "" {
		d, err := time.ParseDuration(b)
		if err != nil || d <= 0 {
			t.Fatalf("%s%s=%q: want a positive duration, such as 10m", env, BudgetSuffix, b)
		}
		first := uint64(1)
		if s := os.Getenv(BaseEnv); s != "" {
			if first, err = strconv.ParseUint(s, 10, 64); err != nil || first == 0 || first > math.MaxUint64/2 {
				t.Fatalf("%s=%q: want a seed from 1 to 2^63", BaseEnv, s)
			}
		}
		return Seeds{First: first, Last: math.MaxUint64 / 2, Until: time.Now().Add(d)}
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
	return Seeds{First: 1, Last: n}
}

// Covered returns the seeds run when ran schedules of s ran: First to
// First+ran-1, as "A-B".
func (s Seeds) Covered(ran int64) string {
	if ran == 0 {
		return "none"
	}
	return fmt.Sprintf("%d-%d", s.First, s.First+uint64(ran)-1)
}
