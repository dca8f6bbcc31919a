package bench

import (
	"testing"
	"time"
)

// TestFullJitter checks the naive lock's backoff: the ceiling starts at
// 10ms, doubles per retry, and stops at 1s; the wait is drawn below it.
func TestFullJitter(t *testing.T) {
	cases := []struct {
		retry int
		want  time.Duration // the ceiling passed to draw
	}{
		{0, 10 * time.Millisecond},
		{1, 20 * time.Millisecond},
		{2, 40 * time.Millisecond},
		{6, 640 * time.Millisecond},
		{7, time.Second},
		{40, time.Second},
		{1000, time.Second},
	}
	for _, tc := range cases {
		var ceiling int64
		top := fullJitter(tc.retry, func(n int64) int64 { ceiling = n; return n - 1 })
		if time.Duration(ceiling) != tc.want {
			t.Errorf("retry %d: drew below %v, want below %v", tc.retry, time.Duration(ceiling), tc.want)
		}
		if top != tc.want-1 {
			t.Errorf("retry %d: waits %v for the top draw, want %v", tc.retry, top, tc.want-1)
		}
		if bottom := fullJitter(tc.retry, func(int64) int64 { return 0 }); bottom != 0 {
			t.Errorf("retry %d: waits %v for the bottom draw, want 0 (full jitter)", tc.retry, bottom)
		}
	}
}
