package bench

import (
	"math"
	"testing"
	"time"
)

// TestRatios checks the naive÷spanmutex ratios, including the undefined
// and infinite ones, and that runs without a counterpart are left out.
func TestRatios(t *testing.T) {
	res := func(kind Kind, n, acqs int, commits, rpcs int64) Result {
		return Result{Kind: kind, Contenders: n, Duration: 10 * time.Second,
			Acquisitions: acqs, InWindow: acqs, RPCs: rpcs, RPCsByMethod: map[string]int64{"Commit": commits}}
	}
	results := []Result{
		res(Spanmutex, 1, 100, 200, 1000),
		res(Naive, 1, 50, 150, 1500),
		res(Spanmutex, 1000, 20, 60, 4000),
		res(Naive, 1000, 0, 5000, 90000), // nothing acquired
		res(Spanmutex, 5, 0, 0, 0),
		res(Naive, 5, 0, 0, 0),         // neither acquired anything
		res(Spanmutex, 7, 10, 20, 100), // no naive run at 7
	}
	got := Ratios(results)
	want := []Ratio{
		{Contenders: 1, Commits: 3.0 / 2.0, RPCs: 30.0 / 10.0, Throughput: 2},
		{Contenders: 1000, Commits: math.NaN(), RPCs: math.NaN(), Throughput: math.Inf(1)},
		{Contenders: 5, Commits: math.NaN(), RPCs: math.NaN(), Throughput: math.NaN()},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d ratios, want %d: %+v", len(got), len(want), got)
	}
	same := func(a, b float64) bool {
		return (math.IsNaN(a) && math.IsNaN(b)) || math.Abs(a-b) < 1e-9 || (math.IsInf(a, 1) && math.IsInf(b, 1))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Contenders != w.Contenders || !same(g.Commits, w.Commits) ||
			!same(g.RPCs, w.RPCs) || !same(g.Throughput, w.Throughput) {
			t.Errorf("ratio %d = %+v, want %+v", i, g, w)
		}
	}
}

// TestRatio checks the division's edge cases.
func TestRatio(t *testing.T) {
	cases := []struct {
		a, b, want float64
	}{
		{6, 3, 2},
		{0, 3, 0},
		{3, 0, math.Inf(1)},
		{0, 0, math.NaN()},
		{math.NaN(), 1, math.NaN()},
		{1, math.NaN(), math.NaN()},
	}
	for _, tc := range cases {
		got := ratio(tc.a, tc.b)
		if !(got == tc.want || (math.IsNaN(got) && math.IsNaN(tc.want))) {
			t.Errorf("ratio(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

// TestCommitsAndReads checks which RPCs count as commits and as reads:
// not ExecuteSql, which carries DML, nor Rollback or BeginTransaction.
func TestCommitsAndReads(t *testing.T) {
	r := Result{RPCsByMethod: map[string]int64{"Commit": 5, "StreamingRead": 7, "Read": 1, "ExecuteStreamingSql": 11,
		"ExecuteSql": 13, "Rollback": 17, "BeginTransaction": 19}}
	if got := r.Commits(); got != 5 {
		t.Errorf("Commits() = %d, want 5", got)
	}
	if got := r.Reads(); got != 7+1+11 {
		t.Errorf("Reads() = %d, want %d (StreamingRead, Read, ExecuteStreamingSql)", got, 7+1+11)
	}
	if got := (Result{}).Reads(); got != 0 {
		t.Errorf("Reads() with no RPCs = %d, want 0", got)
	}
}

// TestPerAcquisition checks the per-acquisition and per-second figures.
func TestPerAcquisition(t *testing.T) {
	r := Result{Duration: 4 * time.Second, Acquisitions: 10, InWindow: 8}
	if got := r.PerAcquisition(25); got != 2.5 {
		t.Errorf("PerAcquisition(25) = %v, want 2.5", got)
	}
	if got := r.PerSecond(); got != 2 {
		t.Errorf("PerSecond() = %v, want 2 (only acquisitions in the window count)", got)
	}
	if got := (Result{}).PerAcquisition(5); !math.IsNaN(got) {
		t.Errorf("PerAcquisition with no acquisitions = %v, want NaN", got)
	}
}
