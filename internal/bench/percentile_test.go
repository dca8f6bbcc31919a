package bench

import (
	"testing"
	"time"
)

// TestPercentile checks the nearest-rank percentiles, and that the samples
// are left as they were.
func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // 100..1, unsorted
	}
	cases := []struct {
		name    string
		samples []time.Duration
		p       float64
		want    time.Duration
		ok      bool
	}{
		{"empty", nil, 50, 0, false},
		{"p zero", ms(1, 2), 0, 0, false},
		{"p above 100", ms(1, 2), 101, 0, false},
		{"one sample p50", ms(7), 50, 7 * time.Millisecond, true},
		{"one sample p99", ms(7), 99, 7 * time.Millisecond, true},
		{"odd p50", ms(5, 1, 3), 50, 3 * time.Millisecond, true},
		{"even p50 is the lower middle", ms(4, 1, 3, 2), 50, 2 * time.Millisecond, true},
		{"p100 is the maximum", ms(4, 1, 3, 2), 100, 4 * time.Millisecond, true},
		{"hundred p50", ms(hundred...), 50, 50 * time.Millisecond, true},
		{"hundred p99", ms(hundred...), 99, 99 * time.Millisecond, true},
		{"ten p99 is the maximum", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 99, 10 * time.Millisecond, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := append([]time.Duration(nil), tc.samples...)
			got, ok := percentile(tc.samples, tc.p)
			if got != tc.want || ok != tc.ok {
				t.Errorf("percentile(%v, %v) = %v, %v; want %v, %v", tc.samples, tc.p, got, ok, tc.want, tc.ok)
			}
			for i := range before {
				if before[i] != tc.samples[i] {
					t.Fatalf("percentile reordered its input: %v, was %v", tc.samples, before)
				}
			}
		})
	}
}
