//go:build go1.25

package spanmutex

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// countedRenewals is a sessionStore whose renewals always commit, at the
// bubble's time, and are counted.
type countedRenewals struct{ n atomic.Int64 }

func (c *countedRenewals) renewSession(context.Context, string) (time.Time, error) {
	c.n.Add(1)
	return time.Now(), nil
}

// newStartTestSession returns a session of lease 3 s in use, in a
// synctest bubble, and what ends the use and lets the bubble's clock run
// until the renewal loop, if it runs, sees no use and returns.
func newStartTestSession(t *testing.T) (*session, *countedRenewals, func()) {
	t.Helper()
	cfg := defaultConfig()
	cfg.lease, cfg.owner = 3*time.Second, "owner-1"
	st := &countedRenewals{}
	s := newSession(st, &cfg)
	done := s.use()
	return s, st, func() {
		done()
		time.Sleep(cfg.lease) // the bubble's clock: the loop's timer fires
		synctest.Wait()
	}
}

// A session is started by the first acknowledged write that names it:
// until then every write that names it carries its row, nothing is
// granted through it, and it is not live; once started, writes name it
// without the row, and a second write that carried the row counts as a
// renewal.
func TestSessionStartsWithItsFirstWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, st, done := newStartTestSession(t)
		defer done()
		id, row := s.next()
		require.NotNil(t, row, "the first write starts the session")
		assert.Equal(t, sessionRow{id: id, owner: "owner-1", lease: 3 * time.Second}, *row)
		again, row2 := s.next()
		assert.Equal(t, id, again, "one session")
		assert.NotNil(t, row2, "every write before an acknowledged one carries the row")
		live, _ := s.live()
		assert.Empty(t, live, "not live before a write is acknowledged")
		l := newLease("lock-a", "owner-1", "lease-a", 1, false, "t")
		_, err := s.admit(context.Background(), st, l, id, func(error) {})
		require.ErrorIs(t, err, errSessionChanged, "no grant through a session not started")

		sent := time.Now()
		s.started(id, sent, sent.Add(time.Millisecond))
		third, row3 := s.next()
		assert.Equal(t, id, third)
		assert.Nil(t, row3, "started: writes name it without its row")
		live, anchor := s.live()
		assert.Equal(t, id, live)
		assert.Equal(t, sent, anchor, "anchored at the starting write's send")
		leave, err := s.admit(context.Background(), st, l, id, func(error) {})
		require.NoError(t, err)
		leave() // before done (deferred): the loop then stops
		assert.Zero(t, st.n.Load(), "a fresh start needs no renewal before the grant")

		later := sent.Add(200 * time.Millisecond)
		s.started(id, later, later) // the second write that carried the row
		_, anchor = s.live()
		assert.Equal(t, later, anchor, "a second start counts as a renewal")
		s.unstarted(id)
		live, _ = s.live()
		assert.Equal(t, id, live, "a failed write does not retire a started session")
	})
}

// A write that would have started the session and failed (its outcome
// perhaps unknown) retires the id: the next write begins another session,
// so that no later write revives a row written long before.
func TestSessionUnstartedIsNotNamedAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _, done := newStartTestSession(t)
		defer done()
		id, _ := s.next()
		s.unstarted(id)
		next, row := s.next()
		assert.NotEqual(t, id, next)
		require.NotNil(t, row)
		assert.Equal(t, next, row.id)
	})
}

// A start answered a lease or more after its write was sent is stale
// before it is used: the session is let go, and a lease written under it
// is refused (errSessionChanged), so the caller hands it back.
func TestSessionStartAnsweredALeaseLateIsLetGo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, st, done := newStartTestSession(t)
		defer done()
		id, _ := s.next()
		sent := time.Now().Add(-3 * time.Second)
		s.started(id, sent, time.Now())
		live, _ := s.live()
		assert.Empty(t, live, "let go")
		l := newLease("lock-a", "owner-1", "lease-a", 1, false, "t")
		_, err := s.admit(context.Background(), st, l, id, func(error) {})
		require.ErrorIs(t, err, errSessionChanged)
		next, row := s.next()
		assert.NotEqual(t, id, next, "another session")
		assert.NotNil(t, row)
	})
}

// A write that would have started the session retires its id only if its
// outcome may be unknown: an aborted one surely committed nothing, and the
// next write carries the same session's row.
func TestSessionWrittenRetiresOnlyOnAnUnknownOutcome(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _, done := newStartTestSession(t)
		defer done()
		id, row := s.next()
		sessionWritten(s, id, row, time.Now(), time.Time{}, status.Error(codes.Aborted, "aborted"))
		again, row := s.next()
		assert.Equal(t, id, again, "aborted: the same session")
		sessionWritten(s, again, row, time.Now(), time.Time{}, status.Error(codes.Unavailable, "no answer"))
		next, _ := s.next()
		assert.NotEqual(t, id, next, "outcome unknown: another session")
	})
}
