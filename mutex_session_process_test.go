//go:build unix

package spanmutex

// A process that runs several run-once Mutex sections through its Scope's
// session (issue 44), killed (SIGKILL) or paused (SIGSTOP) mid-section:
// another process takes every section over within a lease of the
// session's last renewal and completes it, once; a paused holder, resumed,
// has its sections' ctx cancelled, and its late writes and its record of
// the sections' end are fenced. The "sections" role: runSections
// (process_session_roles_test.go).

import (
	"context"
	"sync"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A process runs 3 sections through its Scope's session, and a Run of each
// in this test's process waits. The process is killed (SIGKILL)
// mid-section: each waiting Run takes its section over no sooner than a
// lease after the session's (or the row's) last renewal by Spanner's
// clock, within a lease plus manySlack of it and of the kill, and
// completes it: its section runs once, its guarded write lands, the row is
// DONE with its token, and a later Run finds it AlreadyDone.
func TestMutexProcessesKilledSectionsThroughSession(t *testing.T) {
	t.Parallel() // waits out leases beside the other waiting tests (own database)
	sessionDialects(t, killedSections)
}

// sectionsLease is the lease of the sections the process tests run.
const sectionsLease = 2 * time.Second

// sectionsInAProcess starts a process running 3 sections through its
// Scope's session, checks that their rows name it, and makes a Run of each
// here that waits for it: the process, a client, the names, the session,
// and what the Runs here report.
func sectionsInAProcess(t *testing.T, db string) (*contender, *spanner.Client, []string, string, <-chan ranSection) {
	names := lockNames("section", 3)
	a := startContender(t, procSpec{Role: "sections", ID: "a", Database: db, Holds: names, Lease: sectionsLease, Sessions: true})
	a.await(t, time.Minute, 0, "holding", nil)
	check := newClient(t, db)
	session := requireHeldThroughSessions(t, check, names, true)
	return a, check, names, session, runSectionsHere(t, check, names, sectionsLease)
}

func killedSections(t *testing.T, db string) {
	const wm = sectionsLease
	a, check, names, session, got := sectionsInAProcess(t, db)

	a.signal(syscall.SIGKILL)
	killed := time.Now()
	<-a.done
	last := lastSectionRenewals(t, check, session, names)
	for range names {
		r := <-got
		requireTakenOver(t, r.taken, killed, last[r.name], wm)
		requireCompletedOnce(t, check, r)
	}
}

// The process of TestMutexProcessesKilledSectionsThroughSession is paused
// (SIGSTOP) mid-section past its lease: each waiting Run takes its section
// over, as when it is killed, and completes it. Resumed (SIGCONT), the
// process has every section's ctx cancelled with an error matching
// ErrLeaseLost within a second; each section's late guarded write is
// refused (ErrLeaseLost) and each Run, recording its section's end, gets
// ErrLeaseLost: the row stays DONE with the taker's token, and the fence
// keeps it.
func TestMutexProcessesPausedSectionsThroughSession(t *testing.T) {
	t.Parallel() // waits out leases beside the other waiting tests (own database)
	sessionDialects(t, pausedSections)
}

func pausedSections(t *testing.T, db string) {
	const wm = sectionsLease
	a, check, names, session, got := sectionsInAProcess(t, db)

	a.signal(syscall.SIGSTOP)
	stopped := time.Now()
	last := lastSectionRenewals(t, check, session, names) // or earlier, if a renewal was in flight
	var ran []ranSection
	for range names {
		r := <-got
		requireTakenOver(t, r.taken, stopped, last[r.name], wm)
		ran = append(ran, r)
	}
	a.signal(syscall.SIGCONT)
	resumed := time.Now()
	for i, name := range names {
		c, _ := a.await(t, time.Minute, 0, "cancelled", func(e procEvent) bool { return e.Call == i })
		assert.Equal(t, "lease-lost", c.Class, "%s: the resumed section's ctx's cause: %s", name, c.Err)
		assert.LessOrEqual(t, time.Unix(0, c.End).Sub(resumed), time.Second, "%s: the section's ctx cancelled on resuming", name)
		g, _ := a.await(t, time.Minute, 0, "guard", func(e procEvent) bool { return e.Call == i })
		assert.Equal(t, "lease-lost", g.Class, "%s: the resumed section's guarded write: %s", name, g.Err)
		r, _ := a.await(t, time.Minute, 0, "run", func(e procEvent) bool { return e.Call == i })
		assert.Equal(t, "lease-lost", r.Class, "%s: the resumed Run (outcome %s): %s", name, r.Outcome, r.Err)
	}
	for _, r := range ran {
		requireCompletedOnce(t, check, r)
	}
	a.send(t, "exit")
	a.wait(t, time.Minute)
}

// ranSection is how a Run of runSectionsHere ended: taken holds its
// section's lease (nil if none ran) and when the section began, by the
// local clock.
type ranSection struct {
	taken
	outcome Outcome
	runs    int // how often the section ran in this Run
}

// runSectionsHere runs, in this test's process, a section of a Mutex of
// each of names (owner "taker-NAME", lease wm, all of one Scope made
// WithSessions), and returns a channel that gets each Run's result. Each
// section makes a guarded write (guardedFenceWrite, resource the name) and
// returns its error. When the test ends, it waits for the Runs.
func runSectionsHere(t *testing.T, c *spanner.Client, names []string, wm time.Duration) <-chan ranSection {
	t.Helper()
	got := make(chan ranSection, len(names))
	scope := NewScope(WithSessions())
	var wg sync.WaitGroup
	for _, name := range names {
		m, err := New(c, name, WithOwner("taker-"+name), WithLease(wm), WithJitter(0), WithScope(scope))
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			r := ranSection{taken: taken{name: name}}
			r.outcome, r.err = m.Run(ctx, func(ctx context.Context, lease *Lease) error {
				r.runs++
				r.lease, r.at = lease, time.Now()
				return guardedFenceWrite(ctx, c, lease, name)
			})
			got <- r
		}()
	}
	t.Cleanup(wg.Wait)
	return got
}

// lastSectionRenewals is, by Spanner's clock, the last renewal of each row
// of names held through session: the later of the session's RenewedAt and
// its own.
func lastSectionRenewals(t *testing.T, c *spanner.Client, session string, names []string) map[string]time.Time {
	t.Helper()
	renewed := sessionRenewedAt(t, c, session)
	last := map[string]time.Time{}
	for _, name := range names {
		last[name] = latest(renewed, rowRenewedAt(t, c, name))
	}
	return last
}

// requireCompletedOnce checks that r's Run ran its section once and
// completed it (Executed), that the row is DONE with its token and the
// fence holds it for the section's resource, and that a later Run of
// another Mutex finds the section AlreadyDone without running it.
func requireCompletedOnce(t *testing.T, c *spanner.Client, r ranSection) {
	t.Helper()
	require.NoError(t, r.err, r.name)
	assert.Equal(t, Executed, r.outcome, r.name)
	assert.Equal(t, 1, r.runs, "%s: runs of the taker's section", r.name)
	st := inspectOne(t, c, r.name)
	t.Logf("%s: %s by token %d, attempt %d", r.name, st.State, st.Token, st.Attempts)
	assert.Equal(t, StateDone, st.State, r.name)
	assert.Equal(t, r.lease.Token(), st.Token, "%s: DONE by the taker", r.name)
	assert.Equal(t, r.lease.Token(), fencedToken(t, c, r.name), "%s: the fence holds the taker's token", r.name)
	m, err := New(c, r.name, WithOwner("late-"+r.name), WithJitter(0))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := m.Run(ctx, func(context.Context, *Lease) error {
		t.Errorf("%s: the section ran again", r.name)
		return nil
	})
	require.NoError(t, err, r.name)
	assert.Equal(t, AlreadyDone, out, r.name)
}
