package bench

import (
	"testing"
	"time"
)

// TestWaitRoom checks the FIFO-violation accounting: an acquisition is a
// violation only if another contender that started at least FIFOTolerance
// earlier is still waiting at that moment, and it reports the longest head
// start among those it overtook.
func TestWaitRoom(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	type step struct {
		op   string        // "enter", "leave" or "acquire"
		id   int           // the contender
		at   time.Duration // enter: when it called Lock, after t0
		want time.Duration // acquire: the head start overtaken, 0 for no violation
	}
	ms := func(v int) time.Duration { return time.Duration(v) * time.Millisecond }
	enter := func(id, at int) step { return step{op: "enter", id: id, at: ms(at)} }
	leave := func(id int) step { return step{op: "leave", id: id} }
	acquire := func(id, overtaken int) step { return step{op: "acquire", id: id, want: ms(overtaken)} }
	cases := []struct {
		name  string
		steps []step
	}{
		{"alone", []step{enter(1, 0), acquire(1, 0)}},
		{"in order", []step{enter(1, 0), enter(2, 500), acquire(1, 0), acquire(2, 0)}},
		{"overtaken by exactly the tolerance", []step{enter(1, 0), enter(2, 100), acquire(2, 100), acquire(1, 0)}},
		{"overtaken within the tolerance", []step{enter(1, 0), enter(2, 99), acquire(2, 0)}},
		{"the earlier waiter gave up", []step{enter(1, 0), enter(2, 1000), leave(1), acquire(2, 0)}},
		{"one violation however many are overtaken; the longest wait counts",
			[]step{enter(1, 0), enter(2, 10), enter(3, 900), acquire(3, 900), acquire(1, 0), acquire(2, 0)}},
		{"a later waiter does not make a violation", []step{enter(1, 0), enter(2, 5000), acquire(1, 0)}},
		{"an acquisition without a recorded start", []step{enter(1, 0), acquire(2, 0)}},
		{"a contender waits again after its acquisition",
			[]step{enter(1, 0), enter(2, 200), acquire(1, 0), enter(1, 300), acquire(2, 0), acquire(1, 0)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWaitRoom(FIFOTolerance)
			for i, s := range tc.steps {
				switch s.op {
				case "enter":
					w.enter(s.id, t0.Add(s.at))
				case "leave":
					w.leave(s.id)
				case "acquire":
					violation, overtaken := w.acquire(s.id)
					if violation != (s.want > 0) || overtaken != s.want {
						t.Errorf("step %d: acquire(%d) = %v, %v; want a violation overtaking %v", i, s.id, violation, overtaken, s.want)
					}
				}
			}
		})
	}
}
