package spanmutex

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// emulatorVersionRetention is Spanner's default version retention, which the
// emulator applies too: an exact-timestamp read older than it is refused
// (FailedPrecondition, "has exceeded the maximum timestamp staleness").
const emulatorVersionRetention = time.Hour

// gapTerms makes watcher's Election see a leader "first", then five short
// terms and a sixth that stays held, all begun now; it returns what
// Observe should report of them: the terms after first, in order.
func gapTerms(t *testing.T, ctx context.Context, db, name string) (first int64, want []LeaderInfo) {
	t.Helper()
	a, b := newTestElection(t, db, name), newTestElection(t, db, name)
	l, err := a.Campaign(ctx, "first")
	require.NoError(t, err)
	first = l.Lease().Token()
	require.NoError(t, l.Resign(ctx))
	for i := range 6 {
		e := []*Election{a, b}[i%2]
		ld, err := e.Campaign(ctx, e.name+string(rune('0'+i)))
		require.NoError(t, err)
		want = append(want, LeaderInfo{Value: ld.Value(), Token: ld.Lease().Token(), Since: ld.Lease().AcquiredAt().UTC()})
		if i < 5 {
			require.NoError(t, ld.Resign(ctx)) // the last term stays held
		}
	}
	return first, want
}

// An observer whose last poll was longer ago than Spanner's version
// retention (its reads failed for hours, or nobody drained its channel)
// finds the history at the gap's middle out of reach. It skips what it can
// no longer read, and still reports the terms it can read and the current
// leader: before, poll failed on the refused read every time, before last
// moved, and Observe never reported again.
func TestElectionObservePollSkipsHistoryOlderThanTheRetention(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := freshDatabase(t)
	watcher := newTestElection(t, db, "gap")
	first, want := gapTerms(t, ctx, db, "gap")

	out := make(chan LeaderInfo)
	// The last poll, three retentions ago: the gap's middle is out of reach.
	o := &observer{e: watcher, out: out, last: first, lastAt: time.Now().Add(-3 * emulatorVersionRetention)}
	var (
		wg  sync.WaitGroup
		err error
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(out)
		err = o.poll(ctx)
	}()
	var got []LeaderInfo
	for info := range out {
		got = append(got, info)
	}
	wg.Wait()
	require.NoError(t, err, "a poll after a gap longer than the version retention")
	// Every term began within the retention: none is out of reach.
	assert.Equal(t, want, got)
	assert.Equal(t, want[len(want)-1].Token, o.last)
}

// Observe itself goes on after such a gap: it reports the current leader
// within a few polls, and its reads keep the reading pace. Before, it made
// a read and a refused history read every backoff interval, for ever, and
// reported nothing.
func TestElectionObserveResumesAfterAGapLongerThanTheRetention(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := freshDatabase(t)
	watcher := newTestElection(t, db, "gap-run")
	watcher.observeEvery = 20 * time.Millisecond
	first, want := gapTerms(t, ctx, db, "gap-run")

	out := make(chan LeaderInfo)
	o := &observer{e: watcher, out: out, last: first, lastAt: time.Now().Add(-3 * emulatorVersionRetention)}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(out)
		o.run(runCtx)
	}()
	current := want[len(want)-1]
	deadline := time.NewTimer(5 * time.Second)
	defer deadline.Stop()
	var got []LeaderInfo
	for waiting := true; waiting && (len(got) == 0 || got[len(got)-1].Token != current.Token); {
		select {
		case info := <-out:
			got = append(got, info)
		case <-deadline.C:
			waiting = false
		}
	}
	stop()
	for range out {
	}
	<-done
	reads := watcher.sp.stats.snapshot().reads
	t.Logf("%d reports, %d reads", len(got), reads)
	require.NotEmpty(t, got, "Observe reported nothing in 5s after the gap (%d reads)", reads)
	assert.Equal(t, current, got[len(got)-1], "the current leader")
	// Six terms to find after the gap: a few dozen history reads (the
	// refused ones included), not hundreds.
	assert.Less(t, reads, int64(200), "reads to get past the gap")
}

// Failed reads are retried no faster than the reading pace, whatever the
// backoff policy: a policy of a millisecond made about a thousand reads a
// second before.
func TestElectionObserveRetriesNoFasterThanTheReadingPace(t *testing.T) {
	db := freshDatabase(t)
	quick := func() backoff.BackOff { return backoff.NewConstantBackOff(time.Millisecond) }
	assertObservePace(t, newTestElection(t, db, "no-table", WithTable("NoSuchTable"), WithBackOff(quick)))
}
