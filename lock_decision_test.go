package spanmutex

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestDecideLock(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	pol := policy{lease: time.Minute, jitter: 0}
	held := row{Exists: true, State: StateStarted, LeaseID: "holder", RenewedAt: now.Add(-10 * time.Second), Now: now}
	silent := held
	silent.RenewedAt = now.Add(-time.Hour)
	tests := []struct {
		name string
		view lockView
		me   string
		want lockDecision
	}{
		{"no row, nobody queued: acquire", lockView{row: row{Now: now}}, "me", lockDecision{action: lockAcquire}},
		{"free, nobody before us: acquire", lockView{row: row{Exists: true, State: StateNeeded, Now: now}}, "me", lockDecision{action: lockAcquire}},
		{"free, live waiters before us: hand it to the first (FIFO)", lockView{row: row{Exists: true, State: StateNeeded, Now: now}, ahead: 3}, "me", lockDecision{action: lockPassOn}},
		{"no row, live waiters before us: hand it to the first", lockView{row: row{Now: now}, ahead: 1}, "me", lockDecision{action: lockPassOn}},
		{"held by a live holder: wait for the hand-off", lockView{row: held}, "me", lockDecision{action: lockWait, wait: 50 * time.Second}},
		{"handed to us", lockView{row: held}, "holder", lockDecision{action: lockHeld}},
		{"holder silent past the lease, we are first: take over", lockView{row: silent}, "me", lockDecision{action: lockTakeOver}},
		{"holder silent, others before us: pass it on to the first", lockView{row: silent, ahead: 1}, "me", lockDecision{action: lockPassOn}},
		{"DONE row of a run-once mutex: wrong kind", lockView{row: row{Exists: true, State: StateDone, Now: now}}, "me", lockDecision{action: lockWrongKind}},
		{"FAILED row of a run-once mutex: wrong kind", lockView{row: row{Exists: true, State: StateFailed, Now: now}}, "me", lockDecision{action: lockWrongKind}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, decideLock(tt.view, tt.me, pol))
		})
	}
}
