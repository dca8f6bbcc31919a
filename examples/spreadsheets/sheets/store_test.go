package sheets_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spanmutex/spanmutex/examples/spreadsheets/sheets"

	"github.com/spanmutex/spanmutex/internal/testutil"
)

// newStore returns a store whose writes are instant.
func newStore(t *testing.T, opts ...sheets.StoreOption) *sheets.Store {
	t.Helper()
	s, err := sheets.NewStore(append([]sheets.StoreOption{sheets.WithWriteDuration(0)}, opts...)...)
	require.NoError(t, err)
	return s
}

// clicks returns one click per key, whose payload is its key.
func clicks(keys ...string) []sheets.Click {
	out := make([]sheets.Click, len(keys))
	for i, k := range keys {
		out[i] = sheets.Click{Key: k, Payload: []byte(k)}
	}
	return out
}

// kinds returns the kinds of the store's violations, in order.
func kinds(s *sheets.Store) []sheets.ViolationKind {
	var out []sheets.ViolationKind
	for _, v := range s.Violations() {
		out = append(out, v.Kind)
	}
	return out
}

// TestStoreDetectsSequentialViolations plays sequences of writes to one
// sheet and checks which violations the store records and what it returns.
func TestStoreDetectsSequentialViolations(t *testing.T) {
	type write struct {
		kind    sheets.OpKind
		token   int64
		key     string // of a create
		wantErr error
	}
	create := func(token int64, key string, want error) write { return write{sheets.OpCreate, token, key, want} }
	update := func(token int64, want error) write { return write{sheets.OpUpdate, token, "", want} }
	cases := []struct {
		name   string
		writes []write
		want   []sheets.ViolationKind
	}{
		{"create then updates with rising tokens", []write{create(1, "c", nil), update(2, nil), update(5, nil)}, nil},
		{"one holder writes twice with its token", []write{create(3, "c", nil), update(3, nil), update(3, nil)}, nil},
		{"a create replayed after a lost lease", []write{create(1, "c", nil), create(2, "c", nil)}, nil},
		{"double create", []write{create(1, "c", nil), create(2, "other", sheets.ErrSheetExists)}, []sheets.ViolationKind{sheets.DoubleCreate}},
		{"update before create", []write{update(1, sheets.ErrNoSheet), create(2, "c", nil)}, []sheets.ViolationKind{sheets.UpdateBeforeCreate}},
		{"stale update after a takeover", []write{create(1, "c", nil), update(4, nil), update(3, nil)}, []sheets.ViolationKind{sheets.StaleToken}},
		{"stale double create", []write{create(2, "c", nil), create(1, "other", sheets.ErrSheetExists)}, []sheets.ViolationKind{sheets.StaleToken, sheets.DoubleCreate}},
		{"a stale replay is still stale", []write{create(2, "c", nil), create(1, "c", nil)}, []sheets.ViolationKind{sheets.StaleToken}},
		{"a refused write still raises the highest token", []write{update(5, sheets.ErrNoSheet), create(4, "c", nil)},
			[]sheets.ViolationKind{sheets.UpdateBeforeCreate, sheets.StaleToken}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			ctx := context.Background()
			for i, w := range tc.writes {
				var err error
				if w.kind == sheets.OpCreate {
					err = s.Create(ctx, "s1", w.token, w.key)
				} else {
					err = s.Update(ctx, "s1", w.token, clicks(fmt.Sprint("click-", i)))
				}
				if w.wantErr == nil {
					require.NoError(t, err, "write %d", i)
				} else {
					require.ErrorIs(t, err, w.wantErr, "write %d", i)
				}
			}
			require.Equal(t, tc.want, kinds(s))
			sum := s.Summary()
			total := 0
			for _, n := range sum.Violations {
				total += n
			}
			require.Equal(t, len(tc.want), total, "Summary counts every violation")
			require.Len(t, sum.Violations, len(sheets.ViolationKinds()), "Summary has an entry for every kind")
		})
	}
}

// TestStoreDetectsConcurrentWriters holds writes in flight (updates of
// sheet "a" take an hour, until their context is cancelled) and checks that
// a second writer of the same sheet is flagged while a writer of another
// sheet is not, and that the aborted writes are not applied.
func TestStoreDetectsConcurrentWriters(t *testing.T) {
	s := newStore(t, sheets.WithWriteLatency(func(op sheets.Op) time.Duration {
		if op.Kind == sheets.OpUpdate && op.Sheet == "a" {
			return time.Hour
		}
		return 0
	}))
	ctx := context.Background()
	require.NoError(t, s.Create(ctx, "a", 1, "create-a"))
	require.NoError(t, s.Create(ctx, "b", 1, "create-b"))

	held, release := context.WithCancel(ctx)
	defer release()
	first := make(chan error, 1)
	go func() { first <- s.Update(held, "a", 2, clicks("first")) }()
	waitFor(t, "the first update to be in flight", func() bool { return s.Summary().InFlight == 1 })

	require.NoError(t, s.Update(ctx, "b", 2, clicks("other sheet")), "a writer of another sheet")
	require.Empty(t, s.Violations(), "a writer of another sheet is not a concurrent writer")

	second := make(chan error, 1)
	go func() { second <- s.Update(held, "a", 3, clicks("second")) }()
	waitFor(t, "the second update to be in flight", func() bool { return s.Summary().InFlight == 2 })
	require.Equal(t, []sheets.ViolationKind{sheets.ConcurrentWriters}, kinds(s))
	v := s.Violations()[0]
	require.Equal(t, "a", v.Sheet)
	require.Equal(t, int64(3), v.Token)
	require.Contains(t, v.String(), "concurrent writers on sheet \"a\"")

	release()
	require.ErrorIs(t, <-first, context.Canceled)
	require.ErrorIs(t, <-second, context.Canceled)
	sheet, ok := s.Sheet("a")
	require.True(t, ok)
	require.Empty(t, sheet.Payloads, "aborted writes are not applied")
	sum := s.Summary()
	require.Equal(t, 2, sum.Aborted)
	require.Equal(t, 0, sum.InFlight)
	require.Equal(t, 1, sum.Updates, "only sheet b's update was applied")
}

// TestStoreDetectsOverlappingCreates flags a create that begins while
// another create of the same sheet is in flight, and an update that begins
// while the create is in flight.
func TestStoreDetectsOverlappingCreates(t *testing.T) {
	s := newStore(t, sheets.WithWriteLatency(func(op sheets.Op) time.Duration {
		if op.Kind == sheets.OpCreate && op.Token == 1 {
			return time.Hour
		}
		return 0
	}))
	held, release := context.WithCancel(context.Background())
	defer release()
	first := make(chan error, 1)
	go func() { first <- s.Create(held, "a", 1, "create-a") }()
	waitFor(t, "the create to be in flight", func() bool { return s.Summary().InFlight == 1 })

	require.ErrorIs(t, s.Create(context.Background(), "a", 2, "create-a"), sheets.ErrSheetExists)
	require.ErrorIs(t, s.Update(context.Background(), "a", 2, clicks("x")), sheets.ErrNoSheet)
	require.Equal(t, []sheets.ViolationKind{
		sheets.ConcurrentWriters, sheets.DoubleCreate,
		sheets.ConcurrentWriters, sheets.UpdateBeforeCreate,
	}, kinds(s))
	release()
	require.ErrorIs(t, <-first, context.Canceled)
	_, ok := s.Sheet("a")
	require.False(t, ok, "an aborted create creates nothing")
}

// TestStoreAppliesInOrder checks a clean history: grouped payloads are
// applied in order, the log has every write with its token, and nothing is
// flagged.
func TestStoreAppliesInOrder(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	require.NoError(t, s.Create(ctx, "a", 1, "create-a"))
	require.NoError(t, s.Update(ctx, "a", 2, clicks("1", "2", "3")))
	require.NoError(t, s.Update(ctx, "a", 4, clicks("4")))

	sheet, ok := s.Sheet("a")
	require.True(t, ok)
	require.Equal(t, [][]byte{[]byte("1"), []byte("2"), []byte("3"), []byte("4")}, sheet.Payloads)
	require.Equal(t, int64(1), sheet.CreatedToken)
	require.Equal(t, int64(4), sheet.LastToken)
	require.Equal(t, 2, sheet.Updates)

	log := s.Log()
	require.Len(t, log, 3)
	for i, want := range []struct {
		kind   sheets.OpKind
		token  int64
		clicks int
	}{{sheets.OpCreate, 1, 0}, {sheets.OpUpdate, 2, 3}, {sheets.OpUpdate, 4, 1}} {
		require.Equal(t, int64(i+1), log[i].Seq)
		require.Equal(t, want.kind, log[i].Kind)
		require.Equal(t, want.token, log[i].Token)
		require.Equal(t, want.clicks, log[i].Clicks)
		require.Equal(t, sheets.OpApplied, log[i].Outcome)
		require.False(t, log[i].Ended.Before(log[i].Began))
	}
	sum := s.Summary()
	require.Equal(t, sheets.Summary{Sheets: 1, Creates: 1, Updates: 2, Clicks: 4,
		Violations: map[sheets.ViolationKind]int{sheets.DoubleCreate: 0, sheets.UpdateBeforeCreate: 0, sheets.ConcurrentWriters: 0, sheets.StaleToken: 0}}, sum)
	require.Equal(t, []string{"a"}, s.SheetIDs())
}

// TestStoreSkipsReplays does an update again, as the worker that takes a
// sheet over does when the worker before it wrote and then lost its lease:
// the clicks applied before are skipped, the new ones applied, and the
// write is counted as a replay, not a violation.
func TestStoreSkipsReplays(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	require.NoError(t, s.Create(ctx, "a", 1, "c"))
	require.NoError(t, s.Update(ctx, "a", 2, clicks("u1", "u2")))
	require.NoError(t, s.Update(ctx, "a", 3, clicks("u1", "u2", "u3")))
	require.NoError(t, s.Update(ctx, "a", 4, clicks("u3")))
	require.NoError(t, s.Create(ctx, "a", 5, "c"))

	sheet, ok := s.Sheet("a")
	require.True(t, ok)
	require.Equal(t, [][]byte{[]byte("u1"), []byte("u2"), []byte("u3")}, sheet.Payloads)
	require.Equal(t, int64(3), sheet.LastToken, "a replay applies nothing")
	require.Equal(t, int64(5), sheet.HighestToken)
	log := s.Log()
	require.Equal(t, []sheets.OpOutcome{sheets.OpApplied, sheets.OpApplied, sheets.OpApplied, sheets.OpReplayed, sheets.OpReplayed},
		[]sheets.OpOutcome{log[0].Outcome, log[1].Outcome, log[2].Outcome, log[3].Outcome, log[4].Outcome})
	require.Equal(t, []int{0, 0, 2, 1, 1}, []int{log[0].Replayed, log[1].Replayed, log[2].Replayed, log[3].Replayed, log[4].Replayed})
	sum := s.Summary()
	require.Equal(t, 3, sum.Clicks)
	require.Equal(t, 2, sum.Updates)
	require.Equal(t, 3, sum.Replayed)
	require.Empty(t, s.Violations())
}

// TestStoreRejectsBadInput checks the constructor and the writes' input.
func TestStoreRejectsBadInput(t *testing.T) {
	_, err := sheets.NewStore(sheets.WithWriteDuration(-time.Second))
	require.ErrorIs(t, err, sheets.ErrInvalidConfig)
	_, err = sheets.NewStore(nil)
	require.ErrorIs(t, err, sheets.ErrInvalidConfig)

	s := newStore(t)
	ctx := context.Background()
	for name, err := range map[string]error{
		"empty id":       s.Create(ctx, "", 1, "k"),
		"zero token":     s.Create(ctx, "a", 0, "create-a"),
		"no create key":  s.Create(ctx, "a", 1, ""),
		"no clicks":      s.Update(ctx, "a", 1, nil),
		"no click key":   s.Update(ctx, "a", 1, []sheets.Click{{Payload: []byte("x")}}),
		"negative token": s.Update(ctx, "a", -1, clicks("x")),
	} {
		require.ErrorIs(t, err, sheets.ErrInvalidWrite, name)
	}
	require.Empty(t, s.Log(), "invalid writes are not recorded")
	require.False(t, errors.Is(s.Create(ctx, "a", 1, "create-a"), sheets.ErrInvalidWrite))
}

// waitFor polls cond until it holds, failing the test after 10 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testutil.WaitFor(t, 10*time.Second, what, cond)
}
