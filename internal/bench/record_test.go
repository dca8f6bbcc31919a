package bench

import (
	"errors"
	"testing"
	"time"
)

// TestHandOff pairs acquisitions with the call of the release of the
// previous token, unless the lock says the acquisition was not a hand-off.
func TestHandOff(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	ms := func(v int) time.Duration { return time.Duration(v) * time.Millisecond }
	releases := map[int64]time.Time{1: t0, 2: t0.Add(ms(100))}
	cases := []struct {
		name string
		a    acqRecord
		want time.Duration
		ok   bool
	}{
		{"taken free, says the lock", acqRecord{token: 3, returned: t0.Add(ms(130)), notHandedOver: true}, 0, false},
		{"previous token's release", acqRecord{token: 3, returned: t0.Add(ms(130))}, ms(30), true},
		{"first acquisition", acqRecord{token: 1, returned: t0}, 0, false},
		{"previous release unknown", acqRecord{token: 5, returned: t0}, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := handOff(tc.a, releases)
			if got != tc.want || ok != tc.ok {
				t.Errorf("handOff = %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestRecorder checks what a recorder sums up: acquisitions in and after
// the window, errors, cancellations, and nothing recorded after close.
func TestRecorder(t *testing.T) {
	r := newRecorder(time.Now().Add(time.Hour))
	called := r.begin(1)
	r.acquired(1, called, acquisition{token: 1})
	r.released(1, time.Now())
	called = r.begin(2)
	r.acquired(2, called, acquisition{token: 2})
	r.released(2, time.Time{}) // unknown: not recorded
	r.begin(3)
	r.gaveUp(3, errors.New("boom"), false)
	r.begin(4)
	r.gaveUp(4, errors.New("second"), false)
	r.failed(errors.New("unlock failed"))
	r.begin(5)
	r.gaveUp(5, errors.New("cancelled"), true)
	r.windowEnd = time.Now() // the next acquisition completes in the drain
	called = r.begin(6)
	r.acquired(6, called, acquisition{token: 3})
	r.close()
	called = r.begin(7)
	r.acquired(7, called, acquisition{token: 4})

	o := r.summary()
	if o.acquisitions != 3 || o.inWindow != 2 {
		t.Errorf("acquisitions %d, in window %d; want 3, 2", o.acquisitions, o.inWindow)
	}
	if len(o.waits) != 3 {
		t.Errorf("%d waits, want 3", len(o.waits))
	}
	if len(o.handOffs) != 1 {
		t.Errorf("%d hand-offs, want 1 (token 2 after the release of token 1)", len(o.handOffs))
	}
	if o.errors != 3 || o.firstErr == nil || o.firstErr.Error() != "boom" {
		t.Errorf("errors %d, first %v; want 3, boom", o.errors, o.firstErr)
	}
	if o.cancels != 1 {
		t.Errorf("cancels %d, want 1", o.cancels)
	}
	if o.fifoViolations != 0 {
		t.Errorf("%d FIFO violations, want 0", o.fifoViolations)
	}
	if len(r.room.waiting) != 0 {
		t.Errorf("contenders left in the waiting room: %v", r.room.waiting)
	}
}
