package bench

import (
	"strings"
	"testing"
	"time"
)

// TestFormat checks that the tables carry every run and ratio, mark
// undefined figures, and say that the figures come from the emulator.
func TestFormat(t *testing.T) {
	results := []Result{
		{Kind: Spanmutex, Contenders: 10, Clients: 8, Duration: 2 * time.Second, Acquisitions: 40, InWindow: 40,
			RPCs: 400, RPCsByMethod: map[string]int64{"Commit": 120, "ExecuteStreamingSql": 280},
			FIFOViolations: 2, MaxOvertaken: 150 * time.Millisecond,
			WaitP50: 3 * time.Millisecond, WaitP99: 1500 * time.Millisecond, HandOffs: 36, HandOffP50: 25 * time.Millisecond,
			HandOffP99: 40 * time.Millisecond, CommitLeadP50: -2 * time.Millisecond, CommitLeadMax: time.Millisecond, Warnings: map[string]int{"lock: something odd": 2}},
		{Kind: Naive, Contenders: 10, Clients: 8, Duration: 2 * time.Second, RPCs: 2700,
			RPCsByMethod: map[string]int64{"StreamingRead": 900, "Commit": 1000},
			Errors:       1, FirstError: "deadline exceeded", Cancelled: 10},
	}
	var b strings.Builder
	if err := Format(&b, results); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"LOCK       N   CLIENTS  ACQUISITIONS  ACQ/S",
		"spanmutex  10  8        40            20.0   3.00         7.00       10.00     3.0ms     1.50s     2  ",
		"naive      10  8        0             0.0    -",
		"1.50s",
		"COMMITS/ACQ NAIVE÷OURS",
		"10  -                       -                    inf",
		"spanmutex  10  120      280    400   150.0ms        -2.0ms               1.0ms  0.0ms",
		"naive      10  1000     900    2700  -              0.0ms                0.0ms  0.0ms",
		"naive      10  in total: Commit 1000, StreamingRead 900",
		"spanmutex  10  ExecuteStreamingSql 7.00, Commit 3.00\n",
		"naive, N=10: 1 Lock/Unlock errors; the first: deadline exceeded",
		"2× lock: something odd",
		"Cloud Spanner emulator, which runs one read-write\n    transaction at a time",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output does not contain %q:\n%s", want, out)
		}
	}
	for i, l := range strings.Split(out, "\n") {
		if strings.TrimRight(l, " ") != l {
			t.Errorf("line %d has trailing spaces: %q", i+1, l)
		}
	}
}
