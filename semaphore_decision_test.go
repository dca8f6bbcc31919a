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

// A semaphore's entry read with the session it names is judged by it
// (semEntry.withSession): a holder that declares the century lives by its
// session's renewals and lease (its own RenewedAt and the reader's lease
// once the session is gone); a holder that names a session but declares
// its own lease (granted by a reader blind to sessions) lives by its own;
// a waiting entry counts its session's renewals as its own, for
// waiterTTLFactor of its own declared lease.
func TestSemEntryJudgedBySession(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	const own, sessLease = time.Second, 2 * time.Second
	entry := func(token int64, lease time.Duration, renewedAgo time.Duration) semEntry {
		return semEntry{id: "e", permits: 1, token: token, lease: lease, renewed: now.Add(-renewedAgo), session: "s"}
	}
	for _, c := range []struct {
		name       string
		e          semEntry
		sessionAgo time.Duration // the session's last renewal; < 0: its row is gone
		live       bool
		left       time.Duration
		through    bool
	}{
		{"a holder through a live session", entry(1, sessionHeldLease, time.Hour), 500 * time.Millisecond, true, 1500 * time.Millisecond, true},
		{"a holder through a lapsed session", entry(1, sessionHeldLease, time.Hour), 3 * time.Second, false, -time.Second, true},
		{"a holder through a session that is gone: its own renewal, the reader's lease", entry(1, sessionHeldLease, 400*time.Millisecond), -1, true, 600 * time.Millisecond, true},
		{"a holder through a session that is gone, silent a lease", entry(1, sessionHeldLease, 2*time.Second), -1, false, -time.Second, true},
		{"a holder naming a session with its own lease is judged on its own", entry(1, own, 2*time.Second), 0, false, -time.Second, false},
		{"a waiter kept live by its session", entry(0, own, time.Hour), 3 * time.Second, true, waiterTTLFactor*own - 3*time.Second, false},
		{"a waiter whose session lapsed long ago", entry(0, own, time.Hour), waiterTTLFactor * own, false, 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got semEntry
			if c.sessionAgo < 0 {
				got = c.e.withSession(time.Time{}, 0, false)
			} else {
				got = c.e.withSession(now.Add(-c.sessionAgo), sessLease, true)
			}
			assert.Equal(t, c.through, got.throughSession)
			assert.Equal(t, c.live, semEntryLive(got, now, own))
			assert.Equal(t, c.left, got.left(now, own))
		})
	}
}

// With a session (q.session), the permits the request's own transaction
// grants are held through it: at once (the insert) or its waiting entry's
// grant; a waiter of another contender granted in the same transaction is
// granted with its own lease, renewed on its own (semGrant.session "").
func TestPlanSemHoldsThroughTheSession(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	p, err := planSem("s", semView{now: now}, semRequest{me: "me", n: 1, size: 3, lease: time.Second, op: semAcquire, session: "sess"})
	require.NoError(t, err)
	require.NotNil(t, p.insert)
	assert.Equal(t, "sess", p.insert.session)
	assert.Equal(t, sessionHeldLease, p.insert.lease, "held at once: declares the century")
	assert.True(t, p.mine.throughSession)

	v := semView{now: now, exists: true, state: StateShared, size: 3, token: 1, entries: []semEntry{
		semAt(0, "h", 3, 1, 0, now), semAt(1, "other", 1, 0, 0, now), semAt(2, "me", 2, 0, 0, now)}}
	v.entries[0].renewed = now.Add(-2 * time.Second) // lapsed: its permits count free
	p, err = planSem("s", v, semRequest{me: "me", n: 2, size: 3, lease: time.Second, op: semAcquire, session: "sess"})
	require.NoError(t, err)
	require.Len(t, p.grants, 2)
	assert.Equal(t, "", p.grants[0].session, "another's waiting entry: its own lease")
	assert.Equal(t, "sess", p.grants[1].session, "our own: through the session")
	assert.True(t, p.mine.throughSession)
	assert.Equal(t, sessionHeldLease, p.mine.lease)
}
