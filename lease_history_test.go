package spanmutex

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// versions is a row's history for lostWrite's search: each version holds
// from its time until the next one's. readAt fails once it has answered
// answers times (none if answers < 0).
type versions struct {
	at      []time.Time
	rows    []row
	answers int
	reads   int // successful exact-timestamp reads
}

func (h *versions) read(_ context.Context, _ string) (row, error) {
	r := h.rows[len(h.rows)-1]
	r.Now = h.at[len(h.at)-1].Add(time.Second)
	return r, nil
}

func (h *versions) readAt(_ context.Context, _ string, at time.Time) (row, error) {
	if h.answers >= 0 && h.reads >= h.answers {
		return row{}, status.Error(codes.Unavailable, "test: answer lost")
	}
	h.reads++
	for i := len(h.at) - 1; i >= 0; i-- {
		if !at.Before(h.at[i]) {
			return h.rows[i], nil
		}
	}
	return row{}, nil
}

// A search cut short by failing reads resumes where it stopped: what it
// learnt of the history is not read again, and it settles whether our
// write or a takeover came first.
func TestLostWriteResumesItsSearch(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		landed bool
	}{{"our write came first", true}, {"a takeover came first", false}} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLease("job", "me", "L1", 6, false, "Locks")
			l.acquiredAt = t0
			held := row{Exists: true, State: StateStarted, LeaseID: "L1", Token: 6}
			next := row{Exists: true, State: StateStarted, LeaseID: "L2", Token: 7}
			if tc.landed {
				next = row{Exists: true, State: StateDone, LeaseID: "L1", Token: 6}
			}
			later := row{Exists: true, State: StateDone, LeaseID: "L2", Token: 7}
			h := &versions{
				at:   []time.Time{t0, t0.Add(700 * time.Millisecond), t0.Add(1300 * time.Millisecond)},
				rows: []row{held, next, later},
			}
			w := newLostWrite(l, StateDone)
			calls := 0
			var landed bool
			var r row
			var err error
			for {
				h.answers = 10 // then every read fails: the call gives up
				if calls > 0 {
					h.answers = -1
				}
				calls++
				if landed, r, err = w.settle(context.Background(), h); err == nil {
					break
				}
				require.Less(t, calls, 3, "settle failed again: %v", err)
				assert.True(t, w.movedOn(), "the row moved on: no try of the write may be sent again")
			}
			assert.Equal(t, 2, calls)
			assert.Equal(t, tc.landed, landed)
			assert.Equal(t, later.LeaseID, r.LeaseID, "settle returns the strong read that showed the row moved on")
			// 2.3 s halved down to a microsecond: 22 reads, 10 of them in
			// the first call; searching again from the start would read 32.
			assert.LessOrEqual(t, h.reads, 22, "the resumed search read again what it had learnt")
		})
	}
}

// A search that needs more than maxHistoryReads reads over all its calls
// gives up: the outcome is unknown.
func TestLostWriteBoundsItsReads(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := newLease("job", "me", "L1", 6, false, "Locks")
	l.acquiredAt = t0
	held := row{Exists: true, State: StateStarted, LeaseID: "L1", Token: 6}
	gone := row{Exists: true, State: StateStarted, LeaseID: "L2", Token: 7}
	// 2^45 µs (about a year) between the last renewal and the strong read.
	h := &versions{at: []time.Time{t0, t0.Add(time.Duration(1<<45) * time.Microsecond)}, rows: []row{held, gone}, answers: -1}
	_, _, err := newLostWrite(l, StateDone).settle(context.Background(), h)
	assert.True(t, errors.Is(err, errHistoryUnknown), "got %v", err)
	assert.Equal(t, maxHistoryReads, h.reads)
}
