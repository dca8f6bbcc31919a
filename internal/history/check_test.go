package history_test

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/spanmutex/spanmutex/internal/history"
)

// t0 is the Spanner clock's origin in hand-built histories.
var t0 = time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)

// hist builds a history by hand: local times and commit timestamps are
// given in seconds.
type hist struct{ ops []history.Op }

func sec(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// add appends o, invoked at call and returning at ret (ret < 0: never),
// committed at commit seconds after t0 (commit < 0: no commit timestamp).
func (h *hist) add(o history.Op, call, ret, commit float64) *hist {
	o.ID = len(h.ops) + 1
	o.Call, o.Return = sec(call), sec(ret)
	if ret < 0 {
		o.Return = history.Never
	}
	if commit >= 0 {
		o.Commit = t0.Add(sec(commit))
	}
	if o.Outcome == "" {
		o.Outcome = history.OK
	}
	if o.Kind == history.Write && o.Resource == "" {
		o.Resource = o.Name
	}
	h.ops = append(h.ops, o)
	return h
}

func acq(client, name string, token int64) history.Op {
	return history.Op{Client: client, Kind: history.Acquire, Name: name, Token: token}
}

func takeover(client, name string, token int64) history.Op {
	o := acq(client, name, token)
	o.Takeover = true
	return o
}

func op(client string, kind history.Kind, name string, token int64, outcome history.Outcome) history.Op {
	return history.Op{Client: client, Kind: kind, Name: name, Token: token, Outcome: outcome}
}

func runOnce(o history.Op) history.Op {
	o.RunOnce = true
	return o
}

// validLock is a lock's history with a hand-off, a takeover of a paused
// holder whose late write and release are refused, and renewals.
func validLock() *hist {
	h := &hist{}
	h.add(acq("c1", "L", 1), 0, 1, 0.5).
		add(op("c1", history.SectionStart, "L", 1, history.OK), 1, 1, -1).
		add(op("c1", history.Write, "L", 1, history.OK), 2, 3, 2.5).
		add(op("c1", history.Renew, "L", 0, history.OK), 3, 3.2, 3.1).
		add(acq("c2", "L", 2), 1.5, 6, 5). // waited in the queue, handed the lock
		add(op("c1", history.Write, "L", 1, history.OK), 4, 4.4, 4.2).
		add(op("c1", history.SectionEnd, "L", 1, history.OK), 4.5, 4.5, -1).
		add(op("c1", history.Release, "L", 1, history.OK), 4.5, 5.5, -1).
		add(op("c2", history.SectionStart, "L", 2, history.OK), 6, 6, -1).
		add(op("c2", history.Write, "L", 2, history.OK), 6.5, 7, 6).
		// c2 pauses; c3 takes over 4 s after c2's last sign of life.
		add(takeover("c3", "L", 3), 7, 12, 10).
		add(op("c3", history.SectionStart, "L", 3, history.OK), 12, 12, -1).
		add(op("c2", history.Write, "L", 2, history.LeaseLost), 12.5, 13, -1).
		add(op("c2", history.SectionEnd, "L", 2, history.OK), 13, 13, -1).
		add(op("c2", history.Release, "L", 2, history.LeaseLost), 13, 13.5, -1).
		add(op("c3", history.Write, "L", 3, history.OK), 13, 14, 11.5).
		add(op("c3", history.SectionEnd, "L", 3, history.OK), 14, 14, -1).
		add(op("c3", history.Release, "L", 3, history.Unknown), 14, 15, -1).
		add(acq("c1", "L", 5), 16, 17, 13) // token 4 was acquired and given back unseen
	return h
}

// validRunOnce is a run-once section that fails once, is retried and
// completed, while others wait and see it done.
func validRunOnce() *hist {
	h := &hist{}
	h.add(runOnce(acq("c1", "S", 1)), 0, 1, 0.5).
		add(runOnce(op("c1", history.SectionStart, "S", 1, history.OK)), 1, 1, -1).
		add(op("c1", history.Write, "S", 1, history.OK), 1, 2, 1.5).
		add(runOnce(op("c1", history.SectionEnd, "S", 1, history.OK)), 2, 2, -1).
		add(runOnce(op("c1", history.Fail, "S", 1, history.OK)), 2, 2.5, -1).
		add(runOnce(acq("c2", "S", 2)), 0.2, 3, 2.8).
		add(runOnce(op("c2", history.SectionStart, "S", 2, history.OK)), 3, 3, -1).
		add(op("c2", history.Write, "S", 2, history.OK), 3, 3.5, 3.2).
		add(runOnce(op("c2", history.SectionEnd, "S", 2, history.OK)), 3.5, 3.5, -1).
		add(runOnce(op("c2", history.Complete, "S", 2, history.OK)), 3.5, 4, -1).
		add(runOnce(op("c3", history.SeeDone, "S", 0, history.OK)), 0.3, 4.5, -1).
		add(runOnce(op("c4", history.Acquire, "S", 0, history.NoEffect)), 0.3, 4.6, -1)
	return h
}

func check(t *testing.T, h *hist, cfg history.Config) *history.Report {
	t.Helper()
	cfg.VisualizeDir = t.TempDir()
	return history.Check(h.ops, cfg)
}

func printed(r *history.Report) string {
	var b bytes.Buffer
	r.Write(&b)
	return b.String()
}

func TestValidHistoriesPass(t *testing.T) {
	for name, h := range map[string]*hist{"lock": validLock(), "run-once": validRunOnce()} {
		t.Run(name, func(t *testing.T) {
			r := check(t, h, history.Config{Lease: 2 * time.Second})
			assert.True(t, r.OK(), printed(r))
			assert.Equal(t, "Ok", string(r.Linearizability))
			assert.Contains(t, printed(r), "Violations: 0")
		})
	}
	r := check(t, validLock(), history.Config{Lease: 2 * time.Second})
	assert.Equal(t, 1, r.Takeovers)
	assert.Equal(t, 1, r.StaleWritesRefused)
	assert.Equal(t, 1, r.BeliefOverlaps, "c2 believed it held the lock while c3 did")
	assert.Zero(t, r.UnattributedRenewals)
}

// Each broken property is reported by the checks that look at it, with the
// offending sub-history.
func TestViolationsAreReported(t *testing.T) {
	cases := []struct {
		name string
		h    *hist
		cfg  history.Config
		want []string // the checks that must report it
	}{
		{
			name: "overlapping holders",
			h: (&hist{}).add(acq("c1", "L", 1), 0, 1, 0).
				add(takeover("c2", "L", 2), 2, 3, 3).
				add(op("c1", history.Write, "L", 1, history.OK), 4, 5, 4),
			want: []string{history.CheckLinearizable, history.CheckDisjoint},
		},
		{
			name: "stale-token guarded write",
			h: (&hist{}).add(acq("c1", "L", 1), 0, 1, 0).
				add(op("c1", history.Write, "L", 1, history.OK), 1, 2, 1).
				add(takeover("c2", "L", 2), 2, 3, 3).
				add(op("c2", history.Write, "L", 2, history.OK), 3, 4, 3.5).
				add(op("c1", history.Write, "L", 1, history.OK), 5, 6, 5),
			want: []string{history.CheckLinearizable, history.CheckDisjoint, history.CheckResourceTokens},
		},
		{
			name: "run-once section completed twice",
			h: (&hist{}).add(runOnce(acq("c1", "S", 1)), 0, 1, 0).
				add(runOnce(op("c1", history.Complete, "S", 1, history.OK)), 1, 2, -1).
				add(runOnce(acq("c2", "S", 2)), 3, 4, 3).
				add(runOnce(op("c2", history.Complete, "S", 2, history.OK)), 4, 5, -1),
			want: []string{history.CheckLinearizable, history.CheckRunOnce},
		},
		{
			name: "non-increasing token",
			h: (&hist{}).add(acq("c1", "L", 2), 0, 1, 0).
				add(op("c1", history.Release, "L", 2, history.OK), 1, 2, -1).
				add(acq("c2", "L", 1), 3, 4, 3),
			want: []string{history.CheckLinearizable, history.CheckTokens},
		},
		{
			name: "reused token",
			h: (&hist{}).add(acq("c1", "L", 1), 0, 1, 0).
				add(op("c1", history.Release, "L", 1, history.OK), 1, 2, -1).
				add(acq("c2", "L", 1), 3, 4, 3),
			want: []string{history.CheckLinearizable, history.CheckTokens},
		},
		{
			name: "takeover before the lease",
			h: (&hist{}).add(acq("c1", "L", 1), 0, 1, 0).
				add(op("c1", history.Renew, "L", 0, history.OK), 1, 1.5, 1).
				add(takeover("c2", "L", 2), 1, 3, 2.5),
			cfg:  history.Config{Lease: 2 * time.Second},
			want: []string{history.CheckTakeover},
		},
		{
			name: "renewal after a takeover",
			h: (&hist{}).add(acq("c1", "L", 1), 0, 1, 0).
				add(takeover("c2", "L", 2), 1, 2, 2).
				add(op("c1", history.Renew, "L", 0, history.OK), 3, 4, 3),
			want: []string{history.CheckLinearizable, history.CheckDisjoint},
		},
		{
			name: "release of a lease already lost",
			h: (&hist{}).add(acq("c1", "L", 1), 0, 1, 0).
				add(takeover("c2", "L", 2), 1, 2, 2).
				add(op("c1", history.Release, "L", 1, history.OK), 3, 4, -1),
			want: []string{history.CheckLinearizable},
		},
		{
			name: "done seen before any completion",
			h: (&hist{}).add(runOnce(op("c1", history.SeeDone, "S", 0, history.OK)), 0, 1, -1).
				add(runOnce(acq("c2", "S", 1)), 2, 3, 2).
				add(runOnce(op("c2", history.Complete, "S", 1, history.OK)), 3, 4, -1),
			want: []string{history.CheckLinearizable},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := check(t, tc.h, tc.cfg)
			out := printed(r)
			require.False(t, r.OK(), out)
			for _, c := range tc.want {
				assert.Contains(t, r.ChecksViolated(), c, out)
			}
			assert.NotContains(t, out, "Violations: 0")
			assert.Contains(t, out, "sub-history")
			if slices.Contains(tc.want, history.CheckLinearizable) {
				require.Len(t, r.Visualizations, 1)
				html, err := os.ReadFile(r.Visualizations[0])
				require.NoError(t, err)
				assert.Contains(t, string(html), "<html")
				assert.Contains(t, out, r.Visualizations[0])
				assert.Equal(t, "Illegal", string(r.Linearizability))
			}
		})
	}
}

// The read-back settles writes of unknown outcome, and contradicts what
// clients were told when they were told wrong.
func TestReadBack(t *testing.T) {
	w := func(client string, token int64, id string, outcome history.Outcome) history.Op {
		o := op(client, history.Write, "L", token, outcome)
		o.WriteID, o.Resource = id, "L"
		return o
	}
	rows := func(ids ...string) *history.Readback {
		rb := &history.Readback{Writes: map[string]history.WrittenRow{}}
		for i, id := range ids {
			rb.Writes[id] = history.WrittenRow{Resource: "L", Token: int64(id[1] - '0'), Commit: t0.Add(sec(float64(10 + i)))}
		}
		return rb
	}
	base := func() *hist {
		return (&hist{}).add(acq("c1", "L", 1), 0, 1, 0).add(takeover("c2", "L", 2), 2, 3, 3)
	}
	t.Run("unknown, not committed", func(t *testing.T) {
		h := base().add(w("c1", 1, "w1a", history.Unknown), 4, 5, -1)
		r := check(t, h, history.Config{Readback: rows()})
		assert.True(t, r.OK(), printed(r))
		assert.Equal(t, 1, r.Settled)
		assert.Equal(t, 1, r.Kinds[history.Write][history.NoEffect])
	})
	t.Run("unknown, committed after the takeover", func(t *testing.T) {
		h := base().add(w("c1", 1, "w1a", history.Unknown), 4, 5, -1)
		r := check(t, h, history.Config{Readback: rows("w1a")})
		assert.Contains(t, r.ChecksViolated(), history.CheckDisjoint, printed(r))
		assert.Contains(t, r.ChecksViolated(), history.CheckLinearizable, printed(r))
	})
	t.Run("acknowledged but missing", func(t *testing.T) {
		h := base().add(w("c2", 2, "w2a", history.OK), 4, 5, 4)
		r := check(t, h, history.Config{Readback: rows()})
		assert.Equal(t, []string{history.CheckTable}, r.ChecksViolated(), printed(r))
	})
	t.Run("refused but present", func(t *testing.T) {
		h := base().add(w("c1", 1, "w1a", history.LeaseLost), 4, 5, -1)
		r := check(t, h, history.Config{Readback: rows("w1a")})
		assert.Contains(t, r.ChecksViolated(), history.CheckTable, printed(r))
	})
	t.Run("written by nobody", func(t *testing.T) {
		r := check(t, base(), history.Config{Readback: rows("w9z")})
		assert.Equal(t, []string{history.CheckTable}, r.ChecksViolated(), printed(r))
	})
	t.Run("completion settled by the row", func(t *testing.T) {
		h := (&hist{}).add(runOnce(acq("c1", "S", 1)), 0, 1, 0).
			add(runOnce(op("c1", history.Complete, "S", 1, history.Unknown)), 1, 2, -1).
			add(runOnce(op("c2", history.SeeDone, "S", 0, history.OK)), 3, 4, -1)
		r := check(t, h, history.Config{Readback: &history.Readback{Rows: map[string]history.FinalRow{"S": {State: "DONE", Token: 1}}}})
		assert.True(t, r.OK(), printed(r))
		assert.Equal(t, 1, r.Settled)
		r = check(t, h, history.Config{Readback: &history.Readback{Rows: map[string]history.FinalRow{"S": {State: "DONE", Token: 7}}}})
		assert.Contains(t, r.ChecksViolated(), history.CheckTable, printed(r))
	})
}

// An operation that never returned may take effect at any time after its
// call: an unknown release lets a later acquisition in without a takeover.
func TestUnknownOutcomes(t *testing.T) {
	h := (&hist{}).add(acq("c1", "L", 1), 0, 1, 0).
		add(op("c1", history.Release, "L", 1, history.Unknown), 1, -1, -1).
		add(acq("c2", "L", 2), 2, 3, 2).
		add(op("c2", history.Write, "L", 2, history.OK), 3, 4, 3)
	r := check(t, h, history.Config{})
	assert.True(t, r.OK(), printed(r))
	// The same release, acknowledged, after the next holder wrote: illegal.
	h = (&hist{}).add(acq("c1", "L", 1), 0, 1, 0).
		add(acq("c2", "L", 2), 1, 2, 2).
		add(op("c2", history.Write, "L", 2, history.OK), 2, 3, 3).
		add(op("c1", history.Release, "L", 1, history.OK), 4, 5, -1)
	r = check(t, h, history.Config{})
	assert.Equal(t, []string{history.CheckLinearizable}, r.ChecksViolated(), printed(r))
	assert.Contains(t, printed(r), "released a lease it did not hold")
}

// The offending sub-history names the operation that does not fit and why.
func TestSubHistoryExplainsTheViolation(t *testing.T) {
	h := (&hist{}).add(acq("c1", "L", 1), 0, 1, 0).
		add(takeover("c2", "L", 2), 2, 3, 3).
		add(op("c1", history.Write, "L", 1, history.OK), 4, 5, 4)
	r := check(t, h, history.Config{})
	out := printed(r)
	for _, want := range []string{
		"VIOLATION 1 [linearizable] L",
		"#3 [4.000s, 5.000s] c1 guarded-write L token=1 -> ok",
		"a guarded write with token 1 committed while it was not the holder (held by 2, highest 2)",
		"porcupine's visualization of L: ",
		"[holders-disjoint] L: two holders at once: a guarded-write of token 1 committed at 12:00:04.000000, after token 2 was acquired at 12:00:03.000000",
	} {
		assert.Contains(t, out, want)
	}
	assert.True(t, strings.Count(out, "#2 [2.000s, 3.000s] c2 acquire L token=2 takeover -> ok") >= 2, out)
}

// Writes whose outcome was settled by the read-back may have taken effect
// after their call returned; bounding that by later commits keeps the
// search small even when it has to be exhaustive, as it has to be to find
// a violation. Unbounded, each one would double it.
func TestSettledWritesKeepTheCheckFast(t *testing.T) {
	for _, broken := range []bool{false, true} {
		h := &hist{}
		for i := range 300 {
			c, at, tok := fmt.Sprint("c", i%4), float64(i), int64(i+1)
			h.add(acq(c, "L", tok), at, at+0.1, at+0.1)
			w := op(c, history.Write, "L", tok, history.OK)
			if i%5 == 0 {
				w.Settled = true // the client saw an error; the read-back found it
			}
			h.add(w, at+0.2, at+0.3, at+0.25)
			h.add(op(c, history.Release, "L", tok, history.OK), at+0.4, at+0.5, -1)
		}
		if broken {
			h.add(op("c9", history.Release, "L", 1, history.OK), 400, 401, -1)
		}
		began := time.Now()
		r := check(t, h, history.Config{Timeout: 30 * time.Second})
		assert.Equal(t, !broken, r.OK(), printed(r))
		assert.NotEqual(t, "Unknown", string(r.Linearizability))
		assert.Less(t, time.Since(began), 10*time.Second)
	}
}
