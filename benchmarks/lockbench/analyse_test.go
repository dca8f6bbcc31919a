package lockbench

import (
	"testing"
	"time"
)

func TestParseShapes(t *testing.T) {
	cases := []struct {
		in   string
		want []Shape
		ok   bool
	}{
		{"1x1,4x25", []Shape{{1, 1}, {4, 25}}, true},
		{" 16x1 ", []Shape{{16, 1}}, true},
		{"4", nil, false},
		{"0x1", nil, false},
		{"1x0", nil, false},
		{"65x1", nil, false},
		{"ax1", nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseShapes(tc.in)
			if (err == nil) != tc.ok {
				t.Fatalf("err = %v, want ok %v", err, tc.ok)
			}
			if tc.ok && len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("got %v, want %v", got, tc.want)
				}
			}
		})
	}
}

const ms = int64(time.Millisecond)

// TestAnalyse checks the figures on calls of two processes: A (proc 0)
// holds from 0 to 10ms; B (proc 1) waits from 1ms and gets it at 14ms,
// releases at 24ms; A's second call starts at 12ms and gets it at 30ms; C
// (proc 1), called at -200ms, is still waiting at 30ms and gets it at 45ms.
func TestAnalyse(t *testing.T) {
	calls := []call{
		{Proc: 0, G: 0, Called: 0, Returned: 0, Acquired: true, Released: 10 * ms, Unlocked: 12 * ms, Token: 1},
		{Proc: 1, G: 0, Called: 1 * ms, Returned: 14 * ms, Acquired: true, Released: 24 * ms, Unlocked: 26 * ms, Token: 2, HandedOff: true},
		{Proc: 0, G: 0, Called: 12 * ms, Returned: 30 * ms, Acquired: true, Released: 40 * ms, Unlocked: 42 * ms, Token: 3, HandedOff: true},
		{Proc: 1, G: 1, Called: -200 * ms, Returned: 45 * ms, Acquired: true, Released: 50 * ms, Unlocked: 52 * ms, Token: 4},
	}
	r := analyse(Spanmutex, Shape{2, 2}, 0, time.Second, 40*ms, 4,
		[]lockResult{{Proc: 0, Calls: []call{calls[0], calls[2]}}, {Proc: 1, Calls: []call{calls[1], calls[3]}}})
	if r.Acquisitions != 4 || r.InWindow != 3 {
		t.Errorf("acquisitions %d, in window %d; want 4, 3", r.Acquisitions, r.InWindow)
	}
	// Hand-offs: B (14−10 = 4ms, cross), A (30−24 = 6ms, cross), C (45−40 = 5ms,
	// same process as A? no: C is proc 1, A proc 0: cross).
	if r.HandOffs != 3 || r.CrossProcess != 3 {
		t.Errorf("hand-offs %d, cross-process %d; want 3, 3", r.HandOffs, r.CrossProcess)
	}
	if r.HandOffP50 != 5*time.Millisecond {
		t.Errorf("hand-off p50 %v, want 5ms", r.HandOffP50)
	}
	if r.UnlockP50 != 2*time.Millisecond {
		t.Errorf("unlock p50 %v, want 2ms", r.UnlockP50)
	}
	// A at 0, B at 14 and A at 30 overtook C, which called at −200ms.
	if r.FIFOViolations != 3 {
		t.Errorf("FIFO violations %d, want 3", r.FIFOViolations)
	}
	if r.Lost != 0 || r.ClockOverlaps != 0 || r.TokenDisorder != 0 || r.LibHandedOff != 2 {
		t.Errorf("lost %d, clock overlaps %d, token disorder %d, handed off %d; want 0, 0, 0, 2", r.Lost, r.ClockOverlaps, r.TokenDisorder, r.LibHandedOff)
	}
}

// An acquisition granted before another whose entry is earlier breaks the
// entry order; ties and acquisitions without an entry do not count.
func TestEntryOrderViolations(t *testing.T) {
	for _, tc := range []struct {
		name string
		acqs []call
		want int
	}{
		{"in order", []call{{Token: 1, Entry: 10}, {Token: 2, Entry: 20}, {Token: 3, Entry: 30}}, 0},
		{"ties", []call{{Token: 1, Entry: 10}, {Token: 2, Entry: 10}}, 0},
		{"one overtakes two", []call{{Token: 1, Entry: 30}, {Token: 2, Entry: 10}, {Token: 3, Entry: 20}}, 1},
		{"two overtake one", []call{{Token: 1, Entry: 20}, {Token: 2, Entry: 30}, {Token: 3, Entry: 10}}, 2},
		{"no entry", []call{{Token: 1}, {Token: 2, Entry: 10}, {Token: 3}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := entryOrderViolations(tc.acqs); got != tc.want {
				t.Errorf("entryOrderViolations = %d, want %d", got, tc.want)
			}
		})
	}
}

// The losers' delays are measured from the winner's section end; errors
// are counted, and a run with no winner has no delays.
func TestAnalyseRunOnce(t *testing.T) {
	got := analyseRunOnce(RunOnceResult{}, []runOnceResult{
		{Proc: 0, Outcome: "AlreadyDone", Returned: 130 * ms},
		{Proc: 1, Outcome: "Executed", SectionEnd: 100 * ms, Returned: 101 * ms},
		{Proc: 2, Outcome: "AlreadyDone", Returned: 110 * ms},
		{Proc: 3, Outcome: "AlreadyDone", Returned: 120 * ms},
		{Proc: 4, Outcome: "NotObtained", Err: "boom"},
	})
	if got.Executed != 1 || got.Losers != 3 || got.ErrorRuns != 1 || got.FirstErr != "boom" {
		t.Fatalf("got %+v", got)
	}
	if got.P50 != 20*time.Millisecond || got.Max != 30*time.Millisecond {
		t.Errorf("p50 %v, max %v; want 20ms and 30ms", got.P50, got.Max)
	}
	if none := analyseRunOnce(RunOnceResult{}, []runOnceResult{{Outcome: "AlreadyDone", Returned: 1}}); none.Losers != 0 {
		t.Errorf("no winner: %d losers counted", none.Losers)
	}
}
