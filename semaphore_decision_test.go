package spanmutex

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// semAt builds entries for planSem's tests: at second i after t0, renewed
// renewedAgo before now, with a lease of a second.
func semAt(i int, id string, permits, token int64, renewedAgo time.Duration, now time.Time) semEntry {
	t0 := now.Add(-time.Hour)
	return semEntry{at: t0.Add(time.Duration(i) * time.Second), id: id, owner: id, renewed: now.Add(-renewedAgo),
		lease: time.Second, permits: permits, token: token}
}

// planSem is the grant rule as a pure function: each case is one read of
// a semaphore of size 3 and what one request writes.
func TestPlanSem(t *testing.T) {
	now := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	scoped := func(scope string) string { return "00000000-0000-7000-8000-" + scope }
	cases := []struct {
		name    string
		entries []semEntry
		q       semRequest
		grants  []string // ids granted, in order
		deletes []string
		held    bool // the requester holds after the plan
		err     error
	}{
		{name: "free: held at once", q: semRequest{me: "me", n: 3, op: semAcquire}, held: true},
		{name: "no barging: a small request waits behind a big one",
			entries: []semEntry{semAt(0, "h", 2, 1, 0, now), semAt(1, "big", 3, 0, 0, now)},
			q:       semRequest{me: "me", n: 1, op: semAcquire}},
		{name: "a lapsed holder's permits are counted free, and it is deleted",
			entries: []semEntry{semAt(0, "h", 3, 1, 2*time.Second, now), semAt(1, "w", 2, 0, 0, now)},
			q:       semRequest{me: "me", n: 1, op: semAcquire}, grants: []string{"w"}, deletes: []string{"h"}, held: true},
		{name: "consecutive heads are granted together, up to the first that does not fit",
			entries: []semEntry{semAt(0, "r1", 1, 0, 0, now), semAt(1, "r2", 1, 0, 0, now), semAt(2, "w", 3, 0, 0, now), semAt(3, "r3", 1, 0, 0, now)},
			q:       semRequest{op: semSettle}, grants: []string{"r1", "r2"}},
		{name: "a dead waiter is deleted, not waited for",
			entries: []semEntry{semAt(0, "dead", 3, 0, 5*time.Second, now)},
			q:       semRequest{me: "me", n: 2, op: semAcquire}, deletes: []string{"dead"}, held: true},
		{name: "a lapsed holder's Scope's waiters go with it",
			entries: []semEntry{semAt(0, scoped("aaaaaaaaaaaa"), 3, 1, 2*time.Second, now), semAt(1, "w", 2, 0, 0, now),
				semAt(2, scoped("aaaaaaaaaaaa")[:23]+"1aaaaaaaaaaaa", 3, 0, 0, now)},
			q: semRequest{op: semSettle}, grants: []string{"w"}, deletes: []string{scoped("aaaaaaaaaaaa"), scoped("aaaaaaaaaaaa")[:23] + "1aaaaaaaaaaaa"}},
		{name: "a release is fenced by its token",
			entries: []semEntry{semAt(0, "me", 1, 7, 0, now)},
			q:       semRequest{me: "me", op: semRelease, token: 6}, err: ErrLeaseLost},
		{name: "a release grants the head",
			entries: []semEntry{semAt(0, "me", 3, 7, 0, now), semAt(1, "w", 3, 0, 0, now)},
			q:       semRequest{me: "me", op: semRelease, token: 7}, grants: []string{"w"}, deletes: []string{"me"}},
		{name: "a refused TryAcquire writes nothing",
			entries: []semEntry{semAt(0, "h", 3, 1, 2*time.Second, now), semAt(1, "w", 3, 0, 0, now)},
			q:       semRequest{me: "me", n: 1, op: semTry}},
		{name: "a Lock's entries are not the semaphore's",
			entries: []semEntry{{at: now, id: "lock", renewed: now}},
			q:       semRequest{me: "me", n: 3, op: semAcquire}, held: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.q.size, c.q.lease = 3, time.Second
			v := semView{now: now, exists: true, state: StateShared, size: 3, token: 7, entries: c.entries}
			p, err := planSem("s", v, c.q)
			if c.err != nil {
				require.ErrorIs(t, err, c.err)
				return
			}
			require.NoError(t, err)
			var grants, deletes []string
			for i, g := range p.grants {
				grants = append(grants, g.entry.id)
				assert.Equal(t, v.token+int64(i)+1, g.token, "tokens count up by one per grant")
			}
			for _, d := range p.deletes {
				deletes = append(deletes, d.id)
			}
			assert.Equal(t, c.grants, grants)
			assert.Equal(t, c.deletes, deletes)
			assert.Equal(t, c.held, p.mine != nil && p.mine.token != 0)
			assert.Equal(t, len(grants) > 0 || len(deletes) > 0 || p.insert != nil, p.writes)
			if c.q.op == semTry && !c.held {
				assert.False(t, p.writes, "a refused TryAcquire writes nothing")
			}
		})
	}
	_, err := planSem("s", semView{exists: true, state: StateShared, size: 2}, semRequest{me: "me", n: 1, size: 3, op: semAcquire})
	var sme *SizeMismatchError
	require.ErrorAs(t, err, &sme)
	_, err = planSem("s", semView{exists: true, state: StateStarted}, semRequest{me: "me", n: 1, size: 3, op: semAcquire})
	assert.ErrorContains(t, err, "belongs to a Lock")
}
