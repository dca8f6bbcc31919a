package history_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/spanmutex/spanmutex/internal/history"
)

// readHistory reads a history the torture wrote (JSON lines).
func readHistory(t *testing.T, path string) []history.Op {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	ops, err := history.ReadJSON(f)
	require.NoError(t, err)
	return ops
}

// The histories of two failing torture runs on main at 3ae5ef7 (issue 34;
// the evidence kept in ../shared/evidence), checked whole, as the torture
// checked them but without the table read back. In both, a lease was
// handed to a Lock call that never returned it, and its client renewed
// it; the checker used to blame the renewals on that client's last
// returned token and report mutual exclusion broken.
func TestTortureHistoriesOfLeaseLimbo(t *testing.T) {
	t.Run("googlesql: token 36 left to lapse while c2's Lock waited", func(t *testing.T) {
		ops := readHistory(t, "testdata/torture-googlesql-limbo-token-36.jsonl")
		r := history.Check(ops, history.Config{Lease: 2 * time.Second, VisualizeDir: t.TempDir()})
		out := printed(r)
		// c3's Unlock of 35 handed 36 to c2's Lock call (25.513s), whose
		// library renewed it at 48.804 and 49.536 (Spanner's clock) and
		// neither returned it nor gave it back: c5 took it over at 50.356
		// (token 37), and the call returned token 39 at 27.631s.
		require.Equal(t, []string{history.CheckLimbo}, r.ChecksViolated(), out)
		require.Len(t, r.Violations, 1, out)
		v := r.Violations[0]
		assert.Equal(t, "lock-1", v.Name)
		for _, want := range []string{"token 36, which no call returned, was handed to c2's Lock call #921",
			"taken over by token 37 at 19:38:50.356321 after 820ms of silence", "the call returned token 39"} {
			assert.Contains(t, v.Message, want)
		}
		assert.Equal(t, "Ok", string(r.Linearizability), out)
		assert.NotContains(t, out, "renewed a lease it did not hold")
		assert.NotContains(t, out, "two holders at once")
		assert.Contains(t, out, "#933 [25.947s, 25.947s] c2 renew lock-1 token=36 -> ok commit=19:38:48.804310")
		require.Len(t, r.Limbo, 1)
		assert.Equal(t, history.LimboLease{Name: "lock-1", Token: 36, Client: "c2", Renewals: 2,
			LastRenewal: r.Limbo[0].LastRenewal, End: r.Limbo[0].End, Violation: true}, r.Limbo[0])
		assert.Equal(t, 3, r.Checked[history.CheckTakeover], "37's takeover of 36 is held to c2's lease")
		assert.Regexp(t, `no-lease-limbo +VIOLATED \(1\) +1 leases a call was handed`, out)
		assert.Contains(t, out, "Leases in limbo: 1 (a call was handed them and their client renewed them, but no call returned them); 1 violations of no-lease-limbo")
	})
	t.Run("postgresql: token 44 given back as c3's Lock gave up", func(t *testing.T) {
		ops := readHistory(t, "testdata/torture-postgresql-limbo-token-44.jsonl")
		r := history.Check(ops, history.Config{Lease: 2 * time.Second, VisualizeDir: t.TempDir()})
		out := printed(r)
		// c8 released 43 at 30.000s; a renewal by c3 committed at
		// 55.553481, so 44 had been handed to c3's Lock call, which
		// returned ErrNotObtained (its ctx ended with the workload) at
		// 30.868s, having given it back: nothing took it over. A call
		// whose ctx ends gives back what it was handed on its way out,
		// as Lock's contract says; the lease never lapsed in the
		// history, so it is listed, not a violation.
		assert.True(t, r.OK(), out)
		assert.NotContains(t, out, "renewed a lease it did not hold")
		require.Len(t, r.Limbo, 1)
		l := r.Limbo[0]
		assert.Equal(t, "lock-1", l.Name)
		assert.Equal(t, int64(44), l.Token)
		assert.Equal(t, "c3", l.Client)
		assert.False(t, l.Violation)
		assert.Contains(t, l.End, "the call returned no lease (not-obtained) at 30.868s")
		assert.Regexp(t, `no-lease-limbo +ok +1 leases a call was handed`, out)
		assert.Contains(t, out, "Leases in limbo: 1 (")
		assert.Contains(t, out, "lock-1  token 44  c3  1 renewal, the last at 19:44:55.553481: the history does not show its end")
	})
}

func pause(client string) history.Op { return history.Op{Client: client, Kind: history.Pause} }

// limboBase: c1 holds token 1 and releases it at 0.3s, handing token 2 to
// c2's Lock call (invoked at 0.1s, returning at callReturn, committed at
// callCommit if it returned a lease), which does not return it; c2 renews
// it (commit 1.15). c2 declares a lease of 1s.
func limboBase(call history.Op, callReturn, callCommit float64) *hist {
	return (&hist{}).add(withLease(acq("c1", "L", 1), 2*time.Second), 0, 0.1, 0).
		add(op("c1", history.Release, "L", 1, history.OK), 0.2, 0.3, -1).
		add(call, 0.1, callReturn, callCommit).
		add(op("c2", history.Renew, "L", 0, history.OK), 1.1, 1.2, 1.15)
}

// laterLease is c2's Lock call returning token 4 (committed at 9) at 10s.
func laterLease() *hist { return limboBase(withLease(acq("c2", "L", 4), time.Second), 10, 9) }

// gaveUp is c2's Lock call returning ErrNotObtained at ret.
func gaveUp(ret float64) *hist { return limboBase(refused("c2", history.RefusedNotObtained), ret, -1) }

// attributionCase is a history, the checks it violates, the tokens of
// its leases in limbo, and a text its report holds.
type attributionCase struct {
	name  string
	h     *hist
	cfg   history.Config
	want  []string // checks violated
	limbo []int64  // tokens in Report.Limbo
	text  string   // in the report
}

// limboCases: renewals of a token that no call returned.
func limboCases() []attributionCase {
	return []attributionCase{{
		name: "renewal by the current holder: its token",
		h: (&hist{}).add(acq("c1", "L", 1), 0, 0.1, 0).
			add(op("c1", history.Renew, "L", 0, history.OK), 1, 1.1, 1).
			add(op("c1", history.Write, "L", 1, history.OK), 1.2, 1.3, 1.5).
			add(op("c1", history.Release, "L", 1, history.OK), 2, 2.1, -1).
			add(handedOff(acq("c2", "L", 2)), 0.5, 2.2, 2),
	}, {
		name: "unreturned token, taken over while the call waited: limbo",
		h: laterLease().
			add(withLease(takeover("c3", "L", 3), 2*time.Second), 2, 4, 3.5).
			add(op("c3", history.Release, "L", 3, history.OK), 4.5, 5, -1),
		want:  []string{history.CheckLimbo},
		limbo: []int64{2},
		text:  "lease limbo: token 2, which no call returned, was handed to c2's Lock call",
	}, {
		name: "unreturned token, given back: listed",
		h: gaveUp(2.5).
			add(handedOff(acq("c3", "L", 3)), 0.1, 3, 2.5),
		limbo: []int64{2},
		text:  "given back: token 3 followed at 12:00:02.500000 (hand-off)",
	}, {
		name: "unreturned token, handed on past its lease while the call waited: limbo",
		h: laterLease().
			add(handedOff(acq("c3", "L", 3)), 0.1, 4, 3.5).
			add(op("c3", history.Release, "L", 3, history.OK), 4.5, 5, -1),
		want:  []string{history.CheckLimbo},
		limbo: []int64{2},
		text:  "neither returned nor given back for 2.35s, past the lease 1s c2 declared, it was handed on to token 3 only at 12:00:03.500000",
	}, {
		name: "unreturned token, handed on past its lease by a call that gave up: listed",
		h: gaveUp(4).
			add(handedOff(acq("c3", "L", 3)), 0.1, 4.5, 3.5),
		limbo: []int64{2},
		text:  "past its lease, by a call that returned no lease",
	}, {
		name: "unreturned token, taken over while its client was paused: excused",
		h: laterLease().
			add(pause("c2"), 1.3, 3.9, -1).
			add(withLease(takeover("c3", "L", 3), 2*time.Second), 2, 4, 3.5).
			add(op("c3", history.Release, "L", 3, history.OK), 4.5, 5, -1),
		limbo: []int64{2},
		text:  "excused: c2 was paused [1.300s, 3.900s]",
	}, {
		name: "unreturned token, taken over after its call gave up: listed",
		h: gaveUp(1.5).
			add(withLease(takeover("c3", "L", 3), 2*time.Second), 2, 4, 3.5),
		limbo: []int64{2},
		text:  "after its call had returned",
	}, {
		name: "unreturned token, taken over too early for its client's lease",
		h: laterLease().
			add(withLease(takeover("c3", "L", 3), 2*time.Second), 1.3, 1.5, 1.5).
			add(op("c3", history.Release, "L", 3, history.OK), 4.5, 5, -1),
		want:  []string{history.CheckLimbo, history.CheckTakeover},
		limbo: []int64{2},
		text:  "less than the lease 1s that c2 declared",
	}, {
		name: "one token per renewing client in a gap of several",
		h: (&hist{}).add(acq("c1", "L", 1), 0, 0.1, 0).
			add(op("c1", history.Release, "L", 1, history.OK), 0.2, 0.3, -1).
			add(refused("c2", history.RefusedNotObtained), 0.1, 2, -1).
			add(op("c2", history.Renew, "L", 0, history.OK), 0.5, 0.6, 1).
			add(op("c2", history.Renew, "L", 0, history.OK), 0.7, 0.8, 1.2).
			add(refused("c3", history.RefusedNotObtained), 0.1, 3, -1).
			add(op("c3", history.Renew, "L", 0, history.OK), 1.5, 1.6, 2).
			add(handedOff(acq("c4", "L", 4)), 0.1, 3.5, 3),
		limbo: []int64{2, 3},
	}}
}

// violationCases: renewals that fit no lease of their client stay
// violations.
func violationCases() []attributionCase {
	return []attributionCase{{
		name: "renewal by a client that held nothing, with no gap: still a violation",
		h: (&hist{}).add(acq("c1", "L", 1), 0, 0.1, 0).
			add(op("c1", history.Release, "L", 1, history.OK), 0.5, 0.6, -1).
			add(acq("c2", "L", 2), 0.7, 0.8, 1).
			add(op("c1", history.Renew, "L", 0, history.OK), 1, 1.1, 2),
		want: []string{history.CheckLinearizable, history.CheckDisjoint},
		text: "token 1 renewed a lease it did not hold",
	}, {
		name: "renewal while another client's lease still held, despite a later gap: still a violation",
		h: (&hist{}).add(acq("c1", "L", 1), 0, 0.1, 0).
			add(op("c1", history.Release, "L", 1, history.OK), 0.5, 0.6, -1).
			add(acq("c2", "L", 2), 0.7, 0.8, 1).
			add(op("c1", history.Renew, "L", 0, history.OK), 1, 1.1, 2).
			add(op("c2", history.Write, "L", 2, history.OK), 1.2, 1.3, 3).
			add(op("c2", history.Release, "L", 2, history.OK), 1.4, 1.5, -1).
			add(acq("c3", "L", 4), 2, 3, 5),
		want: []string{history.CheckLinearizable, history.CheckDisjoint},
		text: "two holders at once: a renew of token 1",
	}, {
		name: "more renewing clients than tokens in the gap: still a violation",
		h: (&hist{}).add(acq("c3", "L", 1), 0, 0.1, 0).
			add(op("c3", history.Release, "L", 1, history.OK), 0.2, 0.3, -1).
			add(refused("c2", history.RefusedNotObtained), 0.1, 2, -1).
			add(op("c2", history.Renew, "L", 0, history.OK), 0.5, 0.6, 1).
			add(op("c3", history.Renew, "L", 0, history.OK), 1, 1.1, 2).
			add(handedOff(acq("c4", "L", 3)), 0.1, 3.5, 3),
		want:  []string{history.CheckLinearizable},
		limbo: []int64{2},
		text:  "token 1 renewed a lease it did not hold",
	}, {
		name: "released, nothing followed: a higher token, which no call returned",
		h: (&hist{}).add(acq("c2", "L", 1), 0, 0.1, 0).
			add(op("c2", history.Release, "L", 1, history.OK), 0.2, 0.3, -1).
			add(acq("c1", "L", 2), 0.4, 0.5, 1).
			add(op("c1", history.Release, "L", 2, history.OK), 0.6, 0.7, -1).
			add(refused("c2", history.RefusedNotObtained), 0.5, 1.5, -1).
			add(op("c2", history.Renew, "L", 0, history.OK), 0.8, 0.9, 2),
		limbo: []int64{3},
		text:  "the history does not show its end",
	}, {
		name: "released, nothing followed, and the table holds no higher token: still a violation",
		h: (&hist{}).add(acq("c2", "L", 1), 0, 0.1, 0).
			add(op("c2", history.Release, "L", 1, history.OK), 0.2, 0.3, -1).
			add(acq("c1", "L", 2), 0.4, 0.5, 1).
			add(op("c1", history.Release, "L", 2, history.OK), 0.6, 0.7, -1).
			add(op("c2", history.Renew, "L", 0, history.OK), 0.8, 0.9, 2),
		cfg:  history.Config{Readback: &history.Readback{Locks: map[string]history.FinalRow{"L": {State: "FREE", Token: 2}}}},
		want: []string{history.CheckLinearizable, history.CheckDisjoint},
		text: "token 1 renewed a lease it did not hold",
	}}
}

// Renewals are attributed by the row's history; a renewal of a token that
// no call returned is a lease in limbo, a violation only if it lapsed into
// a takeover while its call waited, unexcused by a pause; a renewal that
// fits no lease is reported, never hidden.
func TestRenewalAttributionAndLimbo(t *testing.T) {
	cases := append(limboCases(), violationCases()...)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Lease = 2 * time.Second // the stall bound: 10s
			r := check(t, tc.h, tc.cfg)
			out := printed(r)
			assert.ElementsMatch(t, tc.want, r.ChecksViolated(), out)
			var tokens []int64
			for _, l := range r.Limbo {
				tokens = append(tokens, l.Token)
				assert.Equal(t, l.Violation, strings.Contains(out, "[no-lease-limbo] L: lease limbo: token "), out)
			}
			assert.Equal(t, tc.limbo, tokens, out)
			assert.Contains(t, out, tc.text)
		})
	}
	// The first case's renewal was checked within token 1's interval.
	r := check(t, cases[0].h, history.Config{})
	assert.Equal(t, 2, r.Checked[history.CheckDisjoint], "c1's write and renewal, of token 1")
}
