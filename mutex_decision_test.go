package spanmutex

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The state machine as a table: state × timing → action, with no Spanner.
func TestDecide(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	pol := policy{lease: time.Minute, jitter: 1.0 / 6, maxAttempts: 3}
	stale := pol
	stale.staleness = time.Hour
	v2 := pol
	v2.version = "v2"

	tests := []struct {
		name string
		row  row
		pol  policy
		want decision
	}{
		{"absent row: acquire fresh", row{Now: now}, pol, decision{action: actAcquire, fresh: true}},
		{"NEEDED (given back): acquire, same generation", row{Exists: true, State: StateNeeded, Attempts: 2, Now: now}, pol, decision{action: actAcquire}},
		{"NEEDED with no attempts left: exhausted", row{Exists: true, State: StateNeeded, Attempts: 3, Now: now}, pol, decision{action: actExhausted}},
		{"STARTED just now: wait the whole lease+jitter", row{Exists: true, State: StateStarted, Attempts: 1, RenewedAt: now, Now: now}, pol, decision{action: actWait, wait: 70 * time.Second}},
		{"STARTED within lease: wait the rest", row{Exists: true, State: StateStarted, Attempts: 1, RenewedAt: ago(30 * time.Second), Now: now}, pol, decision{action: actWait, wait: 40 * time.Second}},
		{"STARTED past lease, within jitter: wait", row{Exists: true, State: StateStarted, Attempts: 1, RenewedAt: ago(65 * time.Second), Now: now}, pol, decision{action: actWait, wait: 5 * time.Second}},
		{"STARTED exactly at lease+jitter: take over", row{Exists: true, State: StateStarted, Attempts: 1, RenewedAt: ago(70 * time.Second), Now: now}, pol, decision{action: actTakeOver}},
		{"STARTED long abandoned: take over", row{Exists: true, State: StateStarted, Attempts: 2, RenewedAt: ago(time.Hour), Now: now}, pol, decision{action: actTakeOver}},
		{"STARTED abandoned on the last attempt: abandon", row{Exists: true, State: StateStarted, Attempts: 3, RenewedAt: ago(time.Hour), Now: now}, pol, decision{action: actAbandon}},
		{"STARTED on the last attempt but alive: wait", row{Exists: true, State: StateStarted, Attempts: 3, RenewedAt: ago(time.Second), Now: now}, pol, decision{action: actWait, wait: 69 * time.Second}},
		{"STARTED with no RenewedAt: measured from StartedAt", row{Exists: true, State: StateStarted, Attempts: 1, StartedAt: ago(20 * time.Second), Now: now}, pol, decision{action: actWait, wait: 50 * time.Second}},
		{"STARTED renewed after Now (impossible): full wait", row{Exists: true, State: StateStarted, Attempts: 1, RenewedAt: now.Add(time.Second), Now: now}, pol, decision{action: actWait, wait: 70 * time.Second}},
		{"DONE: done", row{Exists: true, State: StateDone, Attempts: 1, FinishedAt: ago(48 * time.Hour), Now: now}, pol, decision{action: actDone}},
		{"DONE within staleness: done", row{Exists: true, State: StateDone, Attempts: 1, FinishedAt: ago(59 * time.Minute), Now: now}, stale, decision{action: actDone}},
		{"DONE past staleness: acquire fresh", row{Exists: true, State: StateDone, Attempts: 1, FinishedAt: ago(time.Hour), Now: now}, stale, decision{action: actAcquire, fresh: true}},
		{"FAILED with attempts left: retry", row{Exists: true, State: StateFailed, Attempts: 2, FinishedAt: ago(time.Second), Now: now}, pol, decision{action: actAcquire, retry: true}},
		{"FAILED on the last attempt: exhausted", row{Exists: true, State: StateFailed, Attempts: 3, FinishedAt: ago(time.Second), Now: now}, pol, decision{action: actExhausted}},
		{"FAILED exhausted but stale: acquire fresh", row{Exists: true, State: StateFailed, Attempts: 3, FinishedAt: ago(2 * time.Hour), Now: now}, stale, decision{action: actAcquire, fresh: true}},
		{"FAILED past staleness, no FinishedAt: not stale", row{Exists: true, State: StateFailed, Attempts: 3, Now: now}, stale, decision{action: actExhausted}},
		{"STARTED, holder declared 10 s, silent 11 s: wait for our jitter's share of its lease", row{Exists: true, State: StateStarted, Attempts: 1, Lease: 10 * time.Second, RenewedAt: ago(11 * time.Second), Now: now}, pol, decision{action: actWait, wait: 10*time.Second + 10*time.Second/6 - 11*time.Second}},
		{"STARTED, holder declared 10 s, silent 12 s: take over, whatever our lease", row{Exists: true, State: StateStarted, Attempts: 1, Lease: 10 * time.Second, RenewedAt: ago(12 * time.Second), Now: now}, pol, decision{action: actTakeOver}},
		{"STARTED, holder declared 1 h, silent 2 min: wait out its lease, not our lease", row{Exists: true, State: StateStarted, Attempts: 1, Lease: time.Hour, RenewedAt: ago(2 * time.Minute), Now: now}, pol, decision{action: actWait, wait: time.Hour + 10*time.Minute - 2*time.Minute}},
		{"version: DONE at the same version: done", row{Exists: true, State: StateDone, Attempts: 1, Version: "v2", Now: now}, v2, decision{action: actDone}},
		{"version: DONE at another version: acquire fresh", row{Exists: true, State: StateDone, Attempts: 1, Version: "v1", Now: now}, v2, decision{action: actAcquire, fresh: true}},
		{"version: DONE at no version: acquire fresh", row{Exists: true, State: StateDone, Attempts: 1, Now: now}, v2, decision{action: actAcquire, fresh: true}},
		{"version: FAILED exhausted at another version: acquire fresh", row{Exists: true, State: StateFailed, Attempts: 3, Version: "v1", Now: now}, v2, decision{action: actAcquire, fresh: true}},
		{"version: FAILED exhausted at the same version: exhausted", row{Exists: true, State: StateFailed, Attempts: 3, Version: "v2", Now: now}, v2, decision{action: actExhausted}},
		{"version: NEEDED exhausted at another version: acquire fresh", row{Exists: true, State: StateNeeded, Attempts: 3, Version: "v1", Now: now}, v2, decision{action: actAcquire, fresh: true}},
		{"version: STARTED live at another version: wait", row{Exists: true, State: StateStarted, Attempts: 3, Version: "v1", RenewedAt: ago(30 * time.Second), Now: now}, v2, decision{action: actWait, wait: 40 * time.Second}},
		{"version: STARTED silent at another version, last attempt: take over fresh", row{Exists: true, State: StateStarted, Attempts: 3, Version: "v1", RenewedAt: ago(time.Hour), Now: now}, v2, decision{action: actTakeOver, fresh: true}},
		{"no version asked: a row's version is ignored", row{Exists: true, State: StateDone, Attempts: 1, Version: "v1", Now: now}, pol, decision{action: actDone}},
		{"unknown state: never acquire", row{Exists: true, State: "WEIRD", Now: now}, pol, decision{action: actExhausted}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, decide(tt.row, tt.pol))
		})
	}
}

// The local clock is not an input of decide: only the row and Spanner's Now
// are. Shifting every timestamp by the same amount (a different epoch)
// changes no decision.
func TestDecideDependsOnlyOnSpannerTimeDifferences(t *testing.T) {
	pol := policy{lease: time.Minute, staleness: time.Hour, maxAttempts: 3}
	base := row{Exists: true, State: StateStarted, Attempts: 1,
		RenewedAt: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	for _, silent := range []time.Duration{0, 59 * time.Second, time.Minute, 2 * time.Hour} {
		for _, shift := range []time.Duration{-100 * 24 * time.Hour, -time.Hour, 0, 7 * time.Hour, 1000 * 24 * time.Hour} {
			r := base
			r.RenewedAt = base.RenewedAt.Add(shift)
			r.Now = r.RenewedAt.Add(silent)
			ref := base
			ref.Now = base.RenewedAt.Add(silent)
			assert.Equal(t, decide(ref, pol), decide(r, pol), "silent %v shift %v", silent, shift)
		}
	}
}

func TestDrawFractionStaysInRange(t *testing.T) {
	c := defaultConfig()
	assert.Zero(t, c.drawFraction(0))
	for i := 0; i < 1000; i++ {
		f := c.drawFraction(0.25)
		assert.GreaterOrEqual(t, f, 0.0)
		assert.Less(t, f, 0.25)
	}
}

func TestDrawJitterStaysInRange(t *testing.T) {
	c := defaultConfig()
	assert.Zero(t, c.drawJitter(time.Minute, 0))
	for i := 0; i < 1000; i++ {
		j := c.drawJitter(time.Minute, 0.25)
		assert.GreaterOrEqual(t, j, time.Duration(0))
		assert.Less(t, j, 15*time.Second)
	}
}

func TestActionStrings(t *testing.T) {
	for a := actAcquire; a <= actAbandon; a++ {
		assert.NotEqual(t, "unknown", a.String())
	}
	assert.Equal(t, "unknown", action(0).String())
}
