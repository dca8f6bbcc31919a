package spanmutex

import (
	"context"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/cenkalti/backoff/v4"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// newTestElection is a candidate of name in db with its own client and
// Scope, as a separate process would be.
func newTestElection(t *testing.T, db, name string, opts ...ElectionOption) *Election {
	t.Helper()
	e, err := NewElection(newClient(t, db), name, opts...)
	require.NoError(t, err)
	return e
}

func TestNewElectionRejects(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts []ElectionOption
		want string
	}{
		{"lease", []ElectionOption{WithLease(time.Millisecond)}, "WithLease"},
		{"nil", []ElectionOption{nil}, "option 0 is nil"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewElection(&spanner.Client{}, "e", tc.opts...) // rejected before the client is used
			require.ErrorIs(t, err, ErrInvalidConfig)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	_, err := NewElection(nil, "e")
	assert.ErrorIs(t, err, ErrInvalidConfig)
}

// Leader names the leader; Resign hands over to the waiting candidate at
// once (by hand-off, with a higher token) and ends the old term's context
// with ErrResigned; a Campaign while leading, or with a bad value, is
// refused; once nobody leads, Leader says so.
func TestElectionLeaderAndResign(t *testing.T) { eachDialect(t, testElectionLeaderAndResign) }

func testElectionLeaderAndResign(t *testing.T, db string) {
	ctx := context.Background()
	a, b := newTestElection(t, db, "lead"), newTestElection(t, db, "lead")
	_, err := a.Leader(ctx)
	assert.ErrorIs(t, err, ErrNoLeader, "before any campaign")

	la, err := a.Campaign(ctx, "a:8080")
	require.NoError(t, err)
	info, err := b.Leader(ctx)
	require.NoError(t, err)
	assert.Equal(t, LeaderInfo{Value: "a:8080", Token: la.Lease().Token(), Since: la.Lease().AcquiredAt().UTC()}, info)
	_, err = a.Campaign(ctx, "again")
	assert.ErrorContains(t, err, "already campaigns or leads")
	_, err = b.Campaign(ctx, "")
	assert.ErrorContains(t, err, "value")

	tctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = b.Campaign(tctx, "b:8080")
	cancel()
	assert.ErrorIs(t, err, ErrNotObtained, "a campaign whose ctx ends while another leads")

	won := make(chan *Leadership, 1)
	go func() {
		lb, err := b.Campaign(ctx, "b:8080")
		assert.NoError(t, err)
		won <- lb
	}()
	check := newClient(t, db)
	waitFor(t, time.Minute, "b to queue", func() bool { return len(queued(t, check, "lead")) == 1 })
	require.NoError(t, la.Resign(ctx))
	assert.ErrorIs(t, context.Cause(la.Context()), ErrResigned)
	assert.ErrorIs(t, context.Cause(la.Context()), ErrResigned)
	lb := <-won
	require.NotNil(t, lb)
	assert.True(t, lb.Lease().HandedOff(), "Resign handed leadership over")
	assert.Greater(t, lb.Lease().Token(), la.Lease().Token())
	assert.NoError(t, context.Cause(lb.Context()))
	info, err = a.Leader(ctx)
	require.NoError(t, err)
	assert.Equal(t, "b:8080", info.Value)

	require.NoError(t, lb.Resign(ctx))
	require.NoError(t, lb.Resign(ctx), "a second Resign")
	_, err = a.Leader(ctx)
	assert.ErrorIs(t, err, ErrNoLeader, "after the last leader resigned")
	la2, err := a.Campaign(ctx, "a:8080")
	require.NoError(t, err, "a campaigns again after its term ended")
	require.NoError(t, la2.Resign(ctx))
}

// Terms shorter than Observe's reads are found by reading the row's
// history: an observer that reads only now and then still reports every
// term, once, in order, with its value.
func TestElectionObserveFindsShortTerms(t *testing.T) {
	eachDialect(t, testElectionObserveFindsShortTerms)
}

func testElectionObserveFindsShortTerms(t *testing.T, db string) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watcher := newTestElection(t, db, "short")
	watcher.observeEvery = time.Hour
	a, b := newTestElection(t, db, "short"), newTestElection(t, db, "short")

	first, err := a.Campaign(ctx, "first")
	require.NoError(t, err)
	reports := watcher.Observe(ctx)
	got := []LeaderInfo{<-reports}
	want := []LeaderInfo{{Value: "first", Token: first.Lease().Token(), Since: first.Lease().AcquiredAt().UTC()}}
	require.NoError(t, first.Resign(ctx))
	for i := range 6 {
		e := []*Election{a, b}[i%2]
		ld, err := e.Campaign(ctx, e.name+string(rune('0'+i)))
		require.NoError(t, err)
		want = append(want, LeaderInfo{Value: ld.Value(), Token: ld.Lease().Token(), Since: ld.Lease().AcquiredAt().UTC()})
		if i < 5 {
			require.NoError(t, ld.Resign(ctx)) // the last term stays held
		}
	}
	// The next read is an hour away: make one now, as the hour passing would.
	out := make(chan LeaderInfo)
	o := &observer{e: watcher, out: out, last: want[0].Token, lastAt: first.Lease().AcquiredAt()}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		assert.NoError(t, o.poll(ctx))
		close(out)
	}()
	for info := range out {
		got = append(got, info)
	}
	wg.Wait()
	assert.Equal(t, want, got)
	assert.Equal(t, want[len(want)-1].Token, o.last)
}

// Run calls the callbacks in order: every new leader (this one included),
// the leading function under a live context, then the end; it returns nil
// after handing over.
func TestElectionRun(t *testing.T) {
	db := freshDatabase(t)
	ctx := context.Background()
	e := newTestElection(t, db, "run")
	var (
		mu     sync.Mutex
		seen   []string
		events []string
	)
	err := e.Run(ctx, "me", LeaderCallbacks{
		OnStartedLeading: func(lctx context.Context) {
			assert.NoError(t, lctx.Err())
			waitFor(t, time.Minute, "OnNewLeader to see this term", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(seen) == 1
			})
			mu.Lock()
			events = append(events, "started")
			mu.Unlock()
		},
		OnStoppedLeading: func() {
			mu.Lock()
			events = append(events, "stopped")
			mu.Unlock()
		},
		OnNewLeader: func(info LeaderInfo) {
			mu.Lock()
			seen = append(seen, info.Value)
			mu.Unlock()
		},
	})
	require.NoError(t, err)
	assert.Equal(t, []string{"started", "stopped"}, events)
	assert.Equal(t, []string{"me"}, seen)
	_, err = e.Leader(ctx)
	assert.ErrorIs(t, err, ErrNoLeader, "Run resigned")
	assert.ErrorIs(t, e.Run(ctx, "me", LeaderCallbacks{}), ErrInvalidConfig, "Run without OnStartedLeading")
	assert.ErrorContains(t, e.Run(ctx, "", LeaderCallbacks{OnStartedLeading: func(context.Context) {}}), "value", "Run with an empty value")
}

// Observe keeps its reading pace while reads fail, even under a backoff
// policy that gives up (backoff.Stop): it never retries back to back.
func TestElectionObserveKeepsItsPaceWhenTheBackOffStops(t *testing.T) {
	db := freshDatabase(t)
	stop := func() backoff.BackOff { return &backoff.StopBackOff{} }
	assertObservePace(t, newTestElection(t, db, "no-table", WithTable("NoSuchTable"), WithBackOff(stop)))
}

// assertObservePace observes e, whose reads all fail, for a second, and
// checks that it read no faster than its reading pace.
func assertObservePace(t *testing.T, e *Election) {
	t.Helper()
	const window = time.Second
	ctx, cancel := context.WithTimeout(context.Background(), window)
	defer cancel()
	for range e.Observe(ctx) {
		t.Fatal("a term reported from a table that does not exist")
	}
	reads := e.sp.stats.snapshot().reads
	t.Logf("%d reads in %v at one read per %v", reads, window, e.observeEvery)
	assert.LessOrEqual(t, reads, int64(window/e.observeEvery)+3, "failed reads retried faster than the reading pace")
}
