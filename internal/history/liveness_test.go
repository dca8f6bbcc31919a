package history_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/spanmutex/spanmutex/internal/history"
)

func withLease(o history.Op, lease time.Duration) history.Op {
	o.Lease = lease
	return o
}

func handedOff(o history.Op) history.Op {
	o.HandedOff = true
	return o
}

// refused is a Lock call of client on L that returned no lease.
func refused(client string, refusal history.Refusal) history.Op {
	o := op(client, history.Acquire, "L", 0, history.NoEffect)
	o.Refusal = refusal
	return o
}

// Takeovers are judged by the lease the holder being taken over declared,
// not by the taker's lease nor Config.Lease.
func TestTakeoverJudgedByTheHoldersLease(t *testing.T) {
	cases := []struct {
		name      string
		holder    time.Duration // the lease token 1 declared
		silence   float64       // seconds from its last renewal to the takeover
		violation bool
	}{
		{"short-lease holder, taken over after its lease", 700 * time.Millisecond, 1, false},
		{"long-lease holder, taken over after the taker's short lease", 6 * time.Second, 1, true},
		{"long-lease holder, taken over after its lease", 6 * time.Second, 6.5, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := (&hist{}).add(withLease(acq("c1", "L", 1), tc.holder), 0, 1, 0).
				add(op("c1", history.Renew, "L", 0, history.OK), 1, 1.2, 1).
				add(withLease(takeover("c2", "L", 2), 700*time.Millisecond), 1, 2+tc.silence, 1+tc.silence)
			r := check(t, h, history.Config{Lease: 2 * time.Second})
			assert.Equal(t, 1, r.Checked[history.CheckTakeover])
			if !tc.violation {
				assert.True(t, r.OK(), printed(r))
				return
			}
			assert.Equal(t, []string{history.CheckTakeover}, r.ChecksViolated(), printed(r))
			assert.Contains(t, printed(r), "less than the lease 6s that token 1 declared")
		})
	}
}

// A Lock call that returns no lease must return an error of Lock's
// contract.
func TestLockErrorsOutsideTheContract(t *testing.T) {
	h := validLock().
		add(refused("c4", history.RefusedNotObtained), 20, 20.05, -1).
		add(refused("c4", history.RefusedExhausted), 21, 22, -1)
	r := check(t, h, history.Config{Lease: 2 * time.Second})
	assert.True(t, r.OK(), printed(r))
	assert.Equal(t, 2, r.Checked[history.CheckLockErrors])
	assert.Equal(t, 1, r.GaveUp)

	h.add(refused("c4", history.RefusedUnexpected), 23, 24, -1)
	r = check(t, h, history.Config{Lease: 2 * time.Second})
	assert.Equal(t, []string{history.CheckLockErrors}, r.ChecksViolated(), printed(r))
}

// After the run a lock is free, or held by a token whose release may not
// have committed; held by a token no Lock call returned, it was left
// behind by a caller that gave up.
func TestLockLeftHeld(t *testing.T) {
	base := func() *hist {
		return (&hist{}).add(acq("c1", "L", 1), 0, 1, 0).
			add(op("c1", history.Release, "L", 1, history.OK), 2, 3, -1).
			add(acq("c2", "L", 3), 4, 5, 4).
			add(op("c2", history.Release, "L", 3, history.Unknown), 6, 7, -1).
			add(refused("c3", history.RefusedNotObtained), 0.5, 1.5, -1)
	}
	locks := func(state string, token int64, owner string) *history.Readback {
		return &history.Readback{Locks: map[string]history.FinalRow{"L": {State: state, Token: token, Owner: owner}}}
	}
	for _, tc := range []struct {
		name  string
		rb    *history.Readback
		wants string
	}{
		{"free", locks("NEEDED", 3, "c2"), ""},
		{"held by a release of unknown outcome", locks("STARTED", 3, "c2"), ""},
		{"held by a caller that gave up", locks("STARTED", 4, "c3"), "which no Lock call returned"},
		{"held by a token that was released", locks("STARTED", 1, "c1"), "whose Unlock returned ok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := check(t, base(), history.Config{Readback: tc.rb})
			assert.Equal(t, 1, r.Checked[history.CheckLeftHeld])
			if tc.wants == "" {
				assert.True(t, r.OK(), printed(r))
				return
			}
			assert.Equal(t, []string{history.CheckLeftHeld}, r.ChecksViolated(), printed(r))
			assert.Contains(t, printed(r), tc.wants)
		})
	}
}

// A stall is a stretch during which the lock was free while a Lock call
// waited: a hand-off leaves none, a release to nobody or an expired lease
// starts one, and the next acquisition's return ends it.
func TestStalls(t *testing.T) {
	h := (&hist{}).add(acq("c1", "L", 1), 0, 1, 0.5).
		// c2 waits from 0.5 s; c1's Unlock hands the lock to it.
		add(op("c1", history.Release, "L", 1, history.OK), 2, 2.1, -1).
		add(handedOff(acq("c2", "L", 2)), 0.5, 2.2, 2.05).
		// c2 releases to nobody at 3 s; c3, waiting since 2.5 s, gets it at 3.4 s.
		add(op("c2", history.Release, "L", 2, history.OK), 2.9, 3, -1).
		add(acq("c3", "L", 3), 2.5, 3.4, 3.3).
		// c3 goes silent after its acquisition; c4, waiting since 3.5 s,
		// takes over at 7 s, 2.6 s after c3's 1 s lease expired at 4.4 s.
		add(withLease(takeover("c4", "L", 4), 2*time.Second), 3.5, 7, 6.9).
		add(op("c4", history.Release, "L", 4, history.OK), 7.5, 8, -1)
	h.ops[4].Lease = time.Second
	r := check(t, h, history.Config{Lease: 2 * time.Second})
	require.True(t, r.OK(), printed(r))
	s := r.Stalls["L"]
	assert.Equal(t, sec(4.4), s.From)
	assert.Equal(t, sec(7), s.To)
	assert.Contains(t, s.After, "token 3's lease (1s) expired")
	assert.Contains(t, s.Until, "token 4's takeover returned")
	assert.Equal(t, history.StallBound(2*time.Second), r.StallBound)
	assert.Equal(t, 10*time.Second, r.StallBound)
	out := printed(r)
	assert.Contains(t, out, "Liveness: longest stall 2.6s on L [4.400s, 7.000s]")
	assert.Contains(t, out, "bounded by check stall-bounded: at most 10s")

	// The same, with the lock free and a waiter stuck for 12 s: a violation.
	h.add(op("c5", history.Acquire, "L", 0, history.NoEffect), 8.5, 20.5, -1)
	r = check(t, h, history.Config{Lease: 2 * time.Second})
	assert.Equal(t, []string{history.CheckLiveness}, r.ChecksViolated(), printed(r))
	assert.Equal(t, sec(12), r.Stalls["L"].Length())
	assert.Contains(t, printed(r), "the lock stayed free for 12s [8.500s, 20.500s] while a Lock call waited, longer than the bound 10s")
}

// TryLock calls do not wait, so they make no stall. (A Lock call counts
// as waiting even while it takes a free lock: its own latency is a stall.)
func TestTryLockMakesNoStall(t *testing.T) {
	try := op("c2", history.Acquire, "L", 0, history.NoEffect)
	try.Try, try.Refusal = true, history.RefusedHeld
	first := acq("c1", "L", 1)
	first.Try = true
	h := (&hist{}).add(first, 0, 1, 0.5).
		add(op("c1", history.Release, "L", 1, history.OK), 2, 2.1, -1).
		add(try, 3, 20, -1)
	r := check(t, h, history.Config{Lease: 2 * time.Second})
	assert.True(t, r.OK(), printed(r))
	assert.Empty(t, r.Stalls)
	assert.Contains(t, printed(r), "Liveness: no lock stayed free while a Lock call waited")
}

// The new fields survive the JSON history.
func TestJSONKeepsLeasesAndRefusals(t *testing.T) {
	o := withLease(handedOff(acq("c1", "L", 3)), 1500*time.Millisecond)
	p := refused("c2", history.RefusedNotObtained)
	p.Try = true
	var b bytes.Buffer
	require.NoError(t, history.WriteJSON(&b, []history.Op{o, p}))
	got, err := history.ReadJSON(strings.NewReader(b.String()))
	require.NoError(t, err)
	assert.Equal(t, []history.Op{o, p}, got)
	assert.Contains(t, o.String(), "handed-off lease=1.5s")
	assert.Contains(t, p.String(), "refusal=not-obtained")
}
