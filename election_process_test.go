//go:build unix

package spanmutex

// Tests of the Election whose candidates and observer are separate OS
// processes (see process_test.go).

import (
	"context"
	"slices"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/spanmutex/spanmutex/internal/testutil"
)

// Eight candidate processes each lead several terms (two guarded writes a
// term) and resign; an observer process observes. At most one leader at any
// Spanner time: the guarded writes, in commit order, never interleave two
// terms, and by commit timestamps each term begins after the previous
// term's last write; every term is observed, in order, with its leader's value; every
// resignation hands over within one hand-off, far below the 10 s lease a
// lease wait would cost.
func TestElectionProcesses(t *testing.T) {
	db := freshDatabase(t, historyDDL)
	check := newClient(t, db)
	const name = "election"
	terms := testutil.Scale(3, 8)
	wm := 10 * time.Second
	observer := startContender(t, procSpec{Role: "observer", ID: "observer", Database: db, Lock: name})
	observer.await(t, time.Minute, 0, "ready", nil)
	candidates := startContenders(t, 8, func(i int) procSpec {
		return procSpec{Role: "candidate", ID: "candidate-" + string(rune('a'+i)), Database: db, Lock: name,
			Lease: wm, Count: terms, Duration: 20 * time.Millisecond, Listen: true}
	})
	evs := waitAll(t, candidates, 5*time.Minute)

	var leads, resigns []procEvent
	for _, e := range evs {
		switch e.Kind {
		case "lock":
			leads = append(leads, e)
		case "unlock":
			resigns = append(resigns, e)
		}
	}
	require.Len(t, leads, 8*terms, "every campaign led")
	sort.Slice(leads, func(i, j int) bool { return leads[i].Token < leads[j].Token })
	sort.Slice(resigns, func(i, j int) bool { return resigns[i].Token < resigns[j].Token })
	last := leads[len(leads)-1].Token

	// The guarded writes: two per term, adjacent in commit order.
	h := readHistory(t, check)
	require.Len(t, h, 2*len(leads))
	for i := 0; i+1 < len(h); i += 2 {
		assert.Equal(t, h[i].Token, h[i+1].Token, "writes %d and %d: another term wrote between a term's two writes", i, i+1)
	}
	// By commit timestamps: each term began after the previous term's
	// last write, and wrote only after it began.
	lastWrite := map[int64]time.Time{}
	for _, w := range h {
		lastWrite[w.Token] = w.At
	}
	for i, l := range leads {
		if i > 0 {
			assert.True(t, l.AcquiredAt.After(lastWrite[leads[i-1].Token]),
				"term %d began at %v, before term %d's last write at %v", l.Token, l.AcquiredAt, leads[i-1].Token, lastWrite[leads[i-1].Token])
		}
	}
	for _, w := range h {
		for _, l := range leads {
			if l.Token == w.Token {
				assert.False(t, w.At.Before(l.AcquiredAt), "token %d wrote at %v, before its term began at %v", w.Token, w.At, l.AcquiredAt)
			}
		}
	}

	// Every term observed, in order, with its value.
	observer.await(t, time.Minute, 0, "observed", func(e procEvent) bool { return e.Token == last })
	require.NoError(t, observer.stdin.Close())
	observer.wait(t, time.Minute)
	var seen []procEvent
	for _, e := range observer.history() {
		if e.Kind == "observed" {
			seen = append(seen, e)
		}
	}
	require.Len(t, seen, len(leads), "terms observed: %v", tokensOf(seen))
	for i, e := range seen {
		assert.Equal(t, leads[i].Token, e.Token, "observed term %d", i)
		assert.Equal(t, leads[i].Proc, e.Owner, "the value of token %d", e.Token)
		assert.True(t, leads[i].AcquiredAt.Equal(e.AcquiredAt), "the start of token %d", e.Token)
	}

	// Hand-offs: from a Resign's return to the next term's Campaign return.
	var gaps []time.Duration
	handedOff := 0
	for i := 1; i < len(leads); i++ {
		gaps = append(gaps, time.Duration(leads[i].End-resigns[i-1].End))
		if leads[i].HandedOff {
			handedOff++
		}
	}
	slices.Sort(gaps)
	t.Logf("%d terms over 8 processes, %d begun by hand-off; Resign return -> next leader's Campaign return: p50 %v, max %v",
		len(leads), handedOff, gaps[len(gaps)/2], gaps[len(gaps)-1])
	assert.Less(t, gaps[len(gaps)-1], 2*time.Second, "a resignation waited for the lease (%v) instead of handing over", wm)
	assert.Greater(t, handedOff, len(leads)/2, "most terms begin by hand-off: candidates keep queueing")
}

// tokensOf lists the events' tokens.
func tokensOf(evs []procEvent) []int64 {
	var out []int64
	for _, e := range evs {
		out = append(out, e.Token)
	}
	return out
}

// startCandidate starts an interactive candidate (runInteractive with an
// Election) of election name in db, with lease wm and default jitter.
func startCandidate(t *testing.T, id, db, name string, wm time.Duration) *contender {
	t.Helper()
	c := startContender(t, procSpec{Role: "interactive", ID: id, Database: db, Lock: name, Lease: wm,
		Jitter: defaultJitter, Election: true})
	c.await(t, time.Minute, 0, "ready", nil)
	return c
}

// The leader process is killed; the next candidate leads once the leader's
// declared lease and the candidate's jitter have passed, not much later.
func TestElectionProcessesKilledLeader(t *testing.T) {
	t.Parallel() // waits out leases beside the other waiting tests (own database or emulator)
	db := freshDatabase(t)
	const name = "killed-leader"
	wm := 2 * time.Second
	leader := startCandidate(t, "leader", db, name, wm)
	led := leader.do(t, "lock", time.Minute)
	require.True(t, led.ok(), led.Err)
	next := startCandidate(t, "next", db, name, wm)
	next.send(t, "lock")
	check := newClient(t, db)
	waitFor(t, time.Minute, "the candidate to queue", func() bool { return slices.Equal(queued(t, check, name), []string{"next"}) })

	killed := time.Now()
	leader.signal(syscall.SIGKILL)
	<-leader.done
	nl, _ := next.await(t, time.Minute, 0, "lock", nil)
	require.True(t, nl.ok(), nl.Err)
	after := time.Unix(0, nl.End).Sub(killed)
	t.Logf("the next candidate led %v after the leader was killed (lease %v, jitter up to %v; took over: %v)",
		after, wm, time.Duration(defaultJitter*float64(wm)), nl.TookOver)
	assert.True(t, nl.TookOver, "the dead leader's term was taken over")
	assert.Greater(t, nl.Token, led.Token)
	assert.LessOrEqual(t, after, wm+time.Duration(defaultJitter*float64(wm))+time.Second,
		"failover later than the leader's lease plus jitter plus a second")

	e, err := NewElection(check, name)
	require.NoError(t, err)
	info, err := e.Leader(context.Background())
	require.NoError(t, err)
	assert.Equal(t, LeaderInfo{Value: "next", Token: nl.Token, Since: nl.AcquiredAt.UTC()}, info)
}

// A leader process is paused past its lease; another candidate takes over
// and writes. When the old leader resumes, it learns that it lost
// leadership, and its guarded writes are refused.
func TestElectionProcessesPausedLeader(t *testing.T) {
	t.Parallel() // waits out leases beside the other waiting tests (own database or emulator)
	db := freshDatabase(t, historyDDL)
	check := newClient(t, db)
	const name = "paused-leader"
	wm := 2 * time.Second
	leader, taker, led, tl := takeOverPaused(t, "leader", func(id string) *contender { return startCandidate(t, id, db, name, wm) }, wm)

	leader.signal(syscall.SIGCONT)
	lost, _ := leader.await(t, time.Minute, 0, "lost", nil)
	assert.Equal(t, "lease-lost", lost.Class, "the old leader's Err after Done: %s", lost.Err)
	assert.Equal(t, "lease-lost", leader.do(t, "guard", time.Minute).Class, "the old leader's guarded write after it resumed")
	assert.True(t, leader.do(t, "unlock", time.Minute).ok(), "Resign after the loss is a no-op")
	assert.True(t, taker.do(t, "unlock", time.Minute).ok(), "the new leader resigns")
	assert.Equal(t, []int64{led.Token, tl.Token}, historyTokens(readHistory(t, check)), "committed writes' tokens, in commit order")
}
