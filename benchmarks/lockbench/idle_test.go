package lockbench

import (
	"strings"
	"testing"
	"time"

	"github.com/spanmutex/spanmutex/ddl"
)

// TestIdleRunCounted: spanmutex's figure is RPCs started, etcd's messages
// sent, per second of the window and per lock.
func TestIdleRunCounted(t *testing.T) {
	sm := IdleRun{Kind: Spanmutex, Count: 10, Window: 20 * time.Second,
		Calls: map[string]int64{"Commit": 60, "StreamingRead": 40}, Sent: map[string]int64{"Commit": 60, "StreamingRead": 40}}
	et := IdleRun{Kind: Etcd, Count: 10, Window: 20 * time.Second,
		Calls: map[string]int64{}, Sent: map[string]int64{"LeaseKeepAlive": 10}}
	if got := sm.PerSecond(); got != 5 {
		t.Errorf("spanmutex per second = %v, want 5", got)
	}
	if got := sm.PerLock(); got != 0.5 {
		t.Errorf("spanmutex per lock = %v, want 0.5", got)
	}
	if got := et.PerSecond(); got != 0.5 {
		t.Errorf("etcd per second = %v, want 0.5 (messages sent, not streams opened)", got)
	}
}

// TestFormatIdle: a row per N (each lock on its own, through a session,
// etcd) and per W and lock measured, the ratios to etcd, "–" where a run
// is missing or etcd sent nothing, a waiter's own Commits and reads in the
// window and its first span, methods per second, broken runs.
func TestFormatIdle(t *testing.T) {
	w := 10 * time.Second
	first := spanCount{Span: 4 * time.Second, Calls: map[string]int64{"StreamingRead": 30, "ExecuteStreamingSql": 10, "Commit (spanmutex.lock.acquire)": 2, "Commit (spanmutex.session)": 2}}
	rep := IdleReport{Dialect: ddl.PostgreSQL, Lease: 6 * time.Second, Window: w, Warmup: time.Second, Arrival: 4 * time.Second, Runs: []IdleRun{
		{Kind: Spanmutex, Count: 1, Window: w, Calls: map[string]int64{"Commit": 5, "StreamingRead": 5}},
		{Kind: SpanmutexSessions, Count: 1, Window: w, Calls: map[string]int64{"Commit (spanmutex.session)": 5}},
		{Kind: Etcd, Count: 1, Window: w, Sent: map[string]int64{"LeaseKeepAlive": 5}},
		{Kind: Spanmutex, Count: 100, Window: w, Calls: map[string]int64{"Commit": 500, "StreamingRead": 500}, Broken: 2, FirstErr: "lease lost"},
		{Kind: Spanmutex, Waiting: true, Count: 10, Window: w, Calls: map[string]int64{"StreamingRead": 20}},
		{Kind: SpanmutexPoll, Waiting: true, Count: 10, Window: w, Calls: map[string]int64{"StreamingRead": 300, "Commit (spanmutex.lock.entry-renew)": 10}},
		{Kind: SpanmutexSessionsPoll, Waiting: true, Count: 2, Window: w, Arrival: first,
			Calls: map[string]int64{"StreamingRead": 60, "Commit (spanmutex.session)": 5}, Warnings: map[string]int{"session lost": 1, "lock: renewing": 2}},
		{Kind: Etcd, Waiting: true, Count: 10, Window: w, Sent: map[string]int64{}},
	}}
	var b strings.Builder
	if err := FormatIdle(&b, rep); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"### Idle cost, postgresql: lease 6s, window 10s",
		"| 1 | 1.00 | 1.000 | 0.50 | 0.500 | 0.50 | 0.500 | 2.0× | 1.0× |",
		"| 100 | 100.00 | 1.000 | – | – | – | – | – | – |",
		"| W waiting | lock | RPCs/s | per waiter | ÷ etcd | own Commits/s | reads/s per waiter | first 4s: RPCs/s per waiter | first 4s: reads/s per waiter |",
		"| 10 | spanmutex | 2.00 | 0.200 | – | 0.000 | 0.200 | – | – |",
		"| 10 | spanmutex WithoutWakeUps | 31.00 | 3.100 | – | 1.000 | 3.000 | – | – |",
		"| 2 | spanmutex WithSessions, WithoutWakeUps | 6.50 | 3.250 | – | 0.000 | 3.000 | 5.500 | 5.000 |",
		"| 10 | etcd | 0.00 | 0.000 | – | – | – | – | – |",
		"| spanmutex-sessions-poll waiting 2, first 4s | Commit (spanmutex.lock.acquire) 0.50, Commit (spanmutex.session) 0.50, ExecuteStreamingSql 2.50, StreamingRead 7.50 |",
		"| spanmutex holding 1 | Commit 0.50, StreamingRead 0.50 |",
		"| spanmutex-sessions holding 1 | Commit (spanmutex.session) 0.50 |",
		"| etcd holding 1 | LeaseKeepAlive 0.50 |",
		"spanmutex holding 100: 2 leases lost by the window's end; the first: lease lost",
		`spanmutex-sessions-poll waiting 2: the library warned (by the window's end): "lock: renewing" ×2; "session lost" ×1`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestParseCounts accepts positive counts and refuses the rest in one line.
func TestParseCounts(t *testing.T) {
	got, err := ParseCounts("1, 10,1000")
	if err != nil || len(got) != 3 || got[0] != 1 || got[1] != 10 || got[2] != 1000 {
		t.Fatalf("ParseCounts = %v, %v", got, err)
	}
	for _, bad := range []string{"", "0", "1,x", "-3", "10001"} {
		if _, err := ParseCounts(bad); err == nil {
			t.Errorf("ParseCounts(%q) accepted", bad)
		}
	}
}

// TestEtcdTTL rounds a lease up to whole seconds.
func TestEtcdTTL(t *testing.T) {
	for lease, want := range map[time.Duration]int{6 * time.Second: 6, 1500 * time.Millisecond: 2, time.Second: 1} {
		if got := etcdTTL(lease); got != want {
			t.Errorf("etcdTTL(%v) = %d, want %d", lease, got, want)
		}
	}
}
