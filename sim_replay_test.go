//go:build go1.25

package spanmutex

import (
	"fmt"
	"hash/fnv"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
)

// replayCommand is the one command that replays seed of the simulation
// whose trace test is test (its seed in env), printing its every event
// with the library's log: what a failing seed prints, in CI or not
// (doc/simulation.md, Replay).
func replayCommand(env, test string, seed uint64) string {
	return fmt.Sprintf("%s=%d go test -count=1 -short -v -run '^%s$' .", env, seed, test)
}

// simUUIDs matches the lease ids the Mutex draws with uuid.NewString
// (shortened by simID), which no seed fixes and nothing orders by.
var simUUIDs = regexp.MustCompile(`[0-9a-f]*@[0-9a-f]{5}`)

// simTraceHash hashes a schedule's whole trace (lines stamped with the
// scheduler's turn, simHarness.eventLocked), turn by turn in order, the
// events of each turn as a set: within one turn the goroutine let go runs
// with those it wakes directly (an Unlock hands the lock to a waiter of
// its Scope, a crash ends every call of its process), and the runtime,
// not the seed, orders their log lines. Every turn is a turn of the
// seed's order: the same trace hash is the same schedule, turn for turn.
// The Mutex's lease ids (maskIDs) are masked.
func simTraceHash(trace []string, maskIDs bool) uint64 {
	f := fnv.New64a()
	for _, turn := range simTurns(trace, maskIDs) {
		for _, l := range turn {
			f.Write([]byte(l))
			f.Write([]byte{'\n'})
		}
		f.Write([]byte{0})
	}
	return f.Sum64()
}

// simTurns splits a trace into its turns, each turn's events sorted.
func simTurns(trace []string, maskIDs bool) [][]string {
	var turns [][]string
	last := "?"
	for _, l := range trace {
		if maskIDs {
			l = simUUIDs.ReplaceAllString(l, "ID")
		}
		n, _, _ := strings.Cut(strings.TrimLeft(l, " "), " ")
		if n != last || len(turns) == 0 {
			turns = append(turns, nil)
			last = n
		}
		turns[len(turns)-1] = append(turns[len(turns)-1], l)
	}
	for _, t := range turns {
		slices.Sort(t)
	}
	return turns
}

// simReplaySeeds is how many seeds of each simulation TestSimReplay runs
// twice: SPANMUTEX_SIM_REPLAY=N, default 100 (CI runs 2,000, without -race).
func simReplaySeeds(t *testing.T) uint64 {
	n := uint64(100)
	if s := os.Getenv("SPANMUTEX_SIM_REPLAY"); s != "" {
		if _, err := fmt.Sscan(s, &n); err != nil {
			t.Fatalf("SPANMUTEX_SIM_REPLAY=%q: want a count", s)
		}
	}
	return n
}

// simReplayed is one run of a schedule, as TestSimReplay compares it.
type simReplayed struct {
	hash         uint64
	steps, turns int
	events       int
	trace        []string
}

// checkReplays runs seeds 1..n of a simulation twice (run returns a
// schedule's trace and steps) and reports every seed whose trace hash or
// step count differ.
func checkReplays(t *testing.T, what string, n uint64, maskIDs bool, run func(seed uint64) simReplayed) {
	same, steps, digest := 0, 0, fnv.New64a()
	for seed := uint64(1); seed <= n; seed++ {
		a, b := run(seed), run(seed)
		fmt.Fprintf(digest, "%d %x %d %d\n", seed, a.hash, a.steps, a.turns)
		steps += a.steps
		if a.hash == b.hash && a.steps == b.steps && a.turns == b.turns {
			same++
			continue
		}
		t.Errorf("%s seed %d does not replay: trace hash %x (%d events), %d steps, %d turns; then %x (%d events), %d steps, %d turns",
			what, seed, a.hash, a.events, a.steps, a.turns, b.hash, b.events, b.steps, b.turns)
		ta, tb := simTurns(a.trace, maskIDs), simTurns(b.trace, maskIDs)
		for i := range min(len(ta), len(tb)) {
			if !slices.Equal(ta[i], tb[i]) {
				t.Logf("  first difference at its turn %d:\n    %s\n  then:\n    %s", i,
					strings.Join(ta[i], "\n    "), strings.Join(tb[i], "\n    "))
				break
			}
		}
	}
	// The digest and steps are the same in every run, with -race or not,
	// on any machine: compare them across runs.
	t.Logf("%s: %d of %d schedules replayed exactly (trace hash, turns and step count); %d steps, digest %x", what, same, n, steps, digest.Sum64())
}

// TestSimReplay runs seeds 1-100 (SPANMUTEX_SIM_REPLAY) of the Lock's simulation and of the
// Mutex's twice each, and requires each replay to have the same trace,
// event for event in order (hashed), and the same step count: a seed is
// one schedule (doc/simulation.md, Replay).
func TestSimReplay(t *testing.T) {
	n := simReplaySeeds(t)
	checkReplays(t, "Lock", n, false, func(seed uint64) simReplayed {
		var full []string
		res := runScheduleTraced(t, seed, simRules{}, &full)
		return simReplayed{hash: simTraceHash(full, false), steps: res.steps, turns: res.turns, events: len(full), trace: full}
	})
	checkReplays(t, "Mutex", n, true, func(seed uint64) simReplayed {
		var full []string
		res := runMutexSchedule(t, seed, simMutexRules{}, &full)
		return simReplayed{hash: simTraceHash(full, true), steps: res.steps, turns: res.turns, events: len(full), trace: full}
	})
}

// inWorkers runs work on n goroutines of the calling test and waits for
// them: each runs schedules, each in a bubble of its own (synctest.Test
// may be called from several goroutines of one test). Plain goroutines,
// not parallel subtests, so that a simulation takes one of the parallel
// tests' slots, not one per worker, and the emulator tests beside it run.
func inWorkers(n int, work func()) {
	var wg sync.WaitGroup
	for range n {
		wg.Go(work)
	}
	wg.Wait()
}

// TestSemSimReplay runs seeds 1-100 (SPANMUTEX_SIM_REPLAY) of the
// Semaphore's simulation twice each, and requires each replay to have the
// same trace hash, turns and step count, as TestSimReplay does for the
// Lock's and the Mutex's.
func TestSemSimReplay(t *testing.T) {
	n := simReplaySeeds(t)
	checkReplays(t, "Semaphore", n, false, func(seed uint64) simReplayed {
		var full []string
		res := runSemScheduleTraced(t, seed, semSimRules{}, &full)
		return simReplayed{hash: simTraceHash(full, false), steps: res.steps, turns: res.turns, events: len(full), trace: full}
	})
}
