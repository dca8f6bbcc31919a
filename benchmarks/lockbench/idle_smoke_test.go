package lockbench

import (
	"context"
	"testing"
	"time"
)

// TestIdleSmoke runs the idle benchmark at a tiny configuration (N = 1, 2,
// W = 1, a 2s window, a 3s lease so that each renews in it, waiters also
// counted for their first 8s, in which an entry of a 3s lease is due for
// renewal) end to end: every run is measured, nothing lost its lease or
// stopped waiting, spanmutex's holders renewed (Commit tagged
// spanmutex.renew), its waiters without sessions renewed their entries
// (spanmutex.lock.entry-renew), those WithSessions, holding or waiting,
// renewed only their session (spanmutex.session), and etcd's kept their
// session alive (LeaseKeepAlive messages). It needs the Cloud Spanner
// emulator and etcd, and fails, saying how to install them, if either is
// missing.
func TestIdleSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the emulator, etcd and contender processes; skipped with -short")
	}
	cfg := IdleConfig{Holders: []int{1, 2}, Waiters: []int{1}, Window: 2 * time.Second, Lease: 3 * time.Second, Warmup: time.Second, Arrival: 8 * time.Second, Progress: testLog{t}}
	if err := Check(Config{Kinds: []Kind{Spanmutex, Etcd}}); err != nil {
		t.Fatalf("the benchmark's backends are missing: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep, err := RunIdle(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != 3*2+5 {
		t.Fatalf("%d runs, want 11: 3 locks × N = 1, 2, and 5 × W = 1", len(rep.Runs))
	}
	for _, r := range rep.Runs {
		t.Run(runName(r), func(t *testing.T) {
			if r.Broken != 0 {
				t.Errorf("%d %s; the first: %s", r.Broken, brokenNoun(r), r.FirstErr)
			}
			if r.Window < time.Second {
				t.Errorf("window of %v, want about 2s", r.Window)
			}
			sessions := r.Kind == SpanmutexSessions || r.Kind == SpanmutexSessionsPoll
			if r.Waiting && r.Kind != Etcd && r.Arrival.Span < 7*time.Second {
				t.Errorf("first span of %v, want about 8s", r.Arrival.Span)
			}
			entryRenewals := r.Counted()["Commit (spanmutex.lock.entry-renew)"] + r.ArrivalCounted()["Commit (spanmutex.lock.entry-renew)"]
			switch {
			case r.Waiting && r.Kind != Etcd && sessions == (entryRenewals > 0):
				t.Errorf("%d entry renewals (Commit (spanmutex.lock.entry-renew)) in the first 8s and the window, want some without sessions and none with: first 8s %v, window %v", entryRenewals, r.Arrival.Calls, r.Calls)
			case r.Kind == Etcd && r.Counted()["LeaseKeepAlive"] == 0:
				t.Errorf("no LeaseKeepAlive messages sent in the window: %v", r.Sent)
			case r.Kind == Spanmutex && !r.Waiting && r.Counted()["Commit (spanmutex.renew)"] == 0:
				t.Errorf("no renewal (Commit (spanmutex.renew)) in the window: %v", r.Calls)
			case sessions && r.Counted()["Commit (spanmutex.session)"] == 0:
				t.Errorf("no session renewal (Commit (spanmutex.session)) in the window: %v", r.Calls)
			case sessions && r.Counted()["Commit (spanmutex.renew)"] != 0:
				t.Errorf("locks renewed on their own, not through the session: %v", r.Calls)
			}
		})
	}
}
