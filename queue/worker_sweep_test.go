package queue

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSkipLineStopsAtTheFirstEntryNotPassedOver(t *testing.T) {
	at := time.Unix(100, 0)
	entry := func(i int, resource string) pendingEntry {
		return pendingEntry{since: at.Add(time.Duration(i)), id: resource, resource: resource}
	}
	w := &Worker{cfg: defaultWorkerConfig()}
	s := w.newPassState(false)
	s.pass("held")
	s.pass("refused")
	s.advance([]pendingEntry{entry(1, "held"), entry(2, "refused"), entry(3, "held")})
	require.Equal(t, skipLine{at: line{since: at.Add(3), id: "held"}, count: 3}, s.line, "a page passed over: the line at its end")
	s.tried["tried"] = true // tried and held: the line stops before it, for good
	s.advance([]pendingEntry{entry(4, "refused"), entry(5, "tried"), entry(6, "held")})
	require.Equal(t, skipLine{at: line{since: at.Add(4), id: "refused"}, count: 4}, s.line)
	s.advance([]pendingEntry{entry(5, "tried"), entry(6, "held")}) // read again
	require.Equal(t, 4, s.line.count)

	w.endPass(s, false)
	require.Equal(t, s.line, w.behind, "a pass with no work leaves the line for the next")
	require.Equal(t, s.line, w.newPassState(false).line, "which starts there")
	require.Zero(t, w.newPassState(true).line, "a sweep starts at the start")
	require.Zero(t, w.behind)
	w.endPass(s, true)
	require.Zero(t, w.behind, "a pass that did work: the next starts at the start")
}

func TestSweepEveryFollowsTheLeaseWithinBounds(t *testing.T) {
	w := &Worker{cfg: defaultWorkerConfig()}
	require.Equal(t, DefaultMaxPollInterval, w.sweepEvery(), "no lease seen: every maximum poll interval")
	w.noteLease(time.Second)
	require.Equal(t, DefaultMaxPollInterval, w.sweepEvery(), "a lease shorter than the maximum poll interval")
	w.noteLease(20 * time.Second)
	w.noteLease(10 * time.Second)
	require.Equal(t, 5*time.Second, w.sweepEvery(), "a quarter of the longest lease left seen")
	w.noteLease(time.Hour)
	require.Equal(t, maxSweepEvery, w.sweepEvery(), "at most a quarter of spanmutex's default lease")
}
