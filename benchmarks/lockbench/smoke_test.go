package lockbench

import (
	"context"
	"strings"
	"testing"
	"time"
)

// testLog sends Run's progress lines to t.Log.
type testLog struct{ t *testing.T }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// TestSmoke runs the harness end to end at one small shape, two processes
// of one goroutine for 2s, for every lock, and two queue worker processes:
// each lock is acquired, nobody held it together with anyone (the marker
// file and the shared counter), and nothing failed. It needs the Cloud
// Spanner emulator and etcd, and fails, saying how to install them, if
// either is missing.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the emulator, etcd and contender processes; skipped with -short")
	}
	cfg := Config{
		Shapes:        []Shape{{Procs: 2, Goroutines: 1}},
		Duration:      2 * time.Second,
		Drain:         2 * time.Second,
		Uncontended:   -1,
		QueueWorkers:  []int{2},
		QueueRequests: 20,
		RunOnceProcs:  3,
		Progress:      testLog{t},
	}
	if err := Check(cfg); err != nil {
		t.Fatalf("the benchmark's backends are missing: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != len(AllKinds()) {
		t.Fatalf("%d runs, want one per lock (%d)", len(rep.Runs), len(AllKinds()))
	}
	for i, r := range rep.Runs {
		t.Run(string(r.Kind), func(t *testing.T) {
			if r.Kind != AllKinds()[i] {
				t.Errorf("run %d is %s, want %s", i, r.Kind, AllKinds()[i])
			}
			if r.Acquisitions == 0 {
				t.Errorf("no acquisitions")
			}
			if r.Overlaps != 0 || r.Lost != 0 || r.ClockOverlaps != 0 {
				t.Errorf("two holders at once: %d overlaps seen by the marker file, %d lost counter increments, %d by the clock",
					r.Overlaps, r.Lost, r.ClockOverlaps)
			}
			if r.Kind != Etcd && r.TokenDisorder != 0 {
				t.Errorf("%d tokens not above the previous holder's", r.TokenDisorder)
			}
			if r.Errors != 0 {
				t.Errorf("%d errors; the first: %s", r.Errors, r.FirstError)
			}
			if r.Kind != Etcd && r.RPCsByMethod["Commit"] == 0 {
				t.Errorf("no Commit RPCs counted")
			}
			if r.RPCs == 0 {
				t.Errorf("no RPCs counted")
			}
		})
	}
	if len(rep.Queue) != 1 || rep.Queue[0].Completed != 20 || len(rep.Queue[0].Errors) > 0 {
		t.Errorf("queue: %+v, want 20 requests completed by 2 worker processes, no errors", rep.Queue)
	}
	if len(rep.RunOnce) != 2 {
		t.Fatalf("%d run-once races, want one per spanmutex lock", len(rep.RunOnce))
	}
	for _, r := range rep.RunOnce {
		if r.Executed != 1 || r.Losers != 2 || r.ErrorRuns != 0 {
			t.Errorf("run-once %s: %+v, want the section run once and 2 losers, no errors", r.Kind, r)
		}
	}
}
