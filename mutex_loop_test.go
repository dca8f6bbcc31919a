package spanmutex

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// memStore is an in-memory store for unit tests of Run's loop: how it reacts
// to commits of unknown outcome and failed reads. It is not a model of
// Spanner; the integration tests run against the real emulator.
type memStore struct {
	mu  sync.Mutex
	r   row
	now time.Time
	// acquireFault, if set, is called before an acquisition commits and
	// returns whether to commit and the error to report.
	acquireFault func(n int) (commit bool, err error)
	acquires     int
	readFault    func(n int) error
	reads        int
	finishFault  func(n int) (commit bool, err error)
	finishes     int
	renewFault   func(n int) error
	renewals     int
}

func (s *memStore) checkSchema(context.Context) error { return nil }

// reset re-arms the row as spannerStore.reset does, on the store's clock.
func (s *memStore) reset(_ context.Context, name string, lease time.Duration, leaseID string, force bool) (ResetResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.r
	r.Now = s.now
	w, res, err := planReset(name, r, lease, leaseID, force)
	if err != nil {
		return ResetResult{}, err
	}
	w.Now = time.Time{}
	s.r = w
	return res, nil
}

// readAt keeps no history: it fails, so that settling by Spanner's clock
// reports a lost lease, as it does when a read fails.
func (s *memStore) readAt(context.Context, string, time.Time) (row, error) {
	return row{}, errors.New("memStore: no history")
}

func (s *memStore) read(ctx context.Context, name string) (row, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	if s.readFault != nil {
		if err := s.readFault(s.reads); err != nil {
			return row{}, err
		}
	}
	r := s.r
	r.Now = s.now
	return r, nil
}

func (s *memStore) acquire(ctx context.Context, name string, p policy, c claim) (decision, *Lease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.acquires++
	r := s.r
	r.Now = s.now
	d := decide(r, p)
	if d.action != actAcquire && d.action != actTakeOver {
		return d, nil, nil
	}
	commit, err := true, error(nil)
	if s.acquireFault != nil {
		commit, err = s.acquireFault(s.acquires)
	}
	if commit {
		s.r = row{Exists: true, State: StateStarted, Owner: c.owner, LeaseID: c.leaseID, Token: r.Token + 1,
			Attempts: r.Attempts + 1, StartedAt: s.now, RenewedAt: s.now, UpdatedAt: s.now}
	}
	if err != nil {
		return d, nil, err
	}
	return d, newLease(name, c.owner, c.leaseID, r.Token+1, d.action == actTakeOver, "T"), nil
}

func (s *memStore) finish(ctx context.Context, l *Lease, to State, lastError string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.finishes++
	if s.r.State != StateStarted || s.r.LeaseID != l.id {
		return &leaseLostError{Name: l.name, Token: l.token, CurrentState: s.r.State, CurrentToken: s.r.Token}
	}
	commit, err := true, error(nil)
	if s.finishFault != nil {
		commit, err = s.finishFault(s.finishes)
	}
	if commit {
		s.r.State, s.r.LastError, s.r.FinishedAt = to, lastError, s.now
	}
	return err
}

func (s *memStore) renew(ctx context.Context, l *Lease) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.renewals++
	if s.renewFault != nil {
		if err := s.renewFault(s.renewals); err != nil {
			return err
		}
	}
	if s.r.State != StateStarted || s.r.LeaseID != l.id {
		return &leaseLostError{Name: l.name, Token: l.token, CurrentState: s.r.State, CurrentToken: s.r.Token}
	}
	s.r.RenewedAt = s.now
	return nil
}

func (s *memStore) release(ctx context.Context, l *Lease) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.r.State == StateStarted && s.r.LeaseID == l.id {
		s.r.State, s.r.Attempts = StateNeeded, s.r.Attempts-1
	}
	return nil
}

func (s *memStore) interrupt(ctx context.Context, l *Lease, reason string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.r.State != StateStarted || s.r.LeaseID != l.id {
		return &leaseLostError{Name: l.name, Token: l.token, CurrentState: s.r.State, CurrentToken: s.r.Token}
	}
	s.r.State, s.r.Attempts, s.r.LastError = StateNeeded, s.r.Attempts-1, reason
	return nil
}

func newTestMutex(t *testing.T, st mutexStore, opts ...MutexOption) *Mutex {
	t.Helper()
	opts = append([]MutexOption{WithBackOff(func() backoff.BackOff { return &backoff.ZeroBackOff{} })}, opts...)
	m, err := newMutex("section", opts)
	require.NoError(t, err)
	m.store = st
	return m
}

var unavailable = status.Error(codes.Unavailable, "connection reset during Commit")

// lostUncommittedOnce is a commit fault: the first commit does not happen
// and its answer is lost (unavailable); the later ones commit.
func lostUncommittedOnce(n int) (commit bool, err error) {
	if n == 1 {
		return false, unavailable
	}
	return true, nil
}

// A commit that succeeded but whose answer was lost is read back as ours:
// the section runs exactly once, here.
func TestRunResolvesCommittedUnknownOutcome(t *testing.T) {
	st := &memStore{now: time.Unix(1000, 0), acquireFault: func(n int) (bool, error) {
		return true, unavailable // committed, answer lost
	}}
	m := newTestMutex(t, st)
	var runs atomic.Int32
	out, err := m.Run(context.Background(), func(ctx context.Context, l *Lease) error {
		runs.Add(1)
		assert.Equal(t, int64(1), l.Token())
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, Executed, out)
	assert.Equal(t, int32(1), runs.Load())
	assert.Equal(t, 1, st.acquires, "the outcome was settled by a read, not by acquiring again")
	assert.Equal(t, StateDone, st.r.State)
}

// A takeover whose commit landed but whose answer was lost is read back as
// ours, and the lease says it was a takeover.
func TestRunResolvedTakeoverReportsTookOver(t *testing.T) {
	st := &memStore{now: time.Unix(1000, 0), acquireFault: func(n int) (bool, error) {
		return true, unavailable // committed, answer lost
	}}
	// The holder went silent an hour ago (by the store's Spanner clock).
	st.r = row{Exists: true, State: StateStarted, Owner: "other", LeaseID: "x", Token: 4, Attempts: 1,
		RenewedAt: st.now.Add(-time.Hour)}
	m := newTestMutex(t, st, WithJitter(0))
	var tookOver, ran bool
	out, err := m.Run(context.Background(), func(ctx context.Context, l *Lease) error {
		ran, tookOver = true, l.TookOver()
		assert.Equal(t, int64(5), l.Token())
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, Executed, out)
	assert.True(t, ran)
	assert.True(t, tookOver, "an acquisition settled by reading back keeps its takeover")
	assert.Equal(t, 1, st.acquires)
}

// A commit that did not happen and whose answer was lost is read back as not
// ours: the loop tries again and runs the section once.
func TestRunResolvesUncommittedUnknownOutcome(t *testing.T) {
	st := &memStore{now: time.Unix(1000, 0), acquireFault: lostUncommittedOnce}
	m := newTestMutex(t, st)
	var runs atomic.Int32
	out, err := m.Run(context.Background(), func(ctx context.Context, l *Lease) error { runs.Add(1); return nil })
	require.NoError(t, err)
	assert.Equal(t, Executed, out)
	assert.Equal(t, int32(1), runs.Load())
	assert.Equal(t, 2, st.acquires)
	assert.Equal(t, int64(1), st.r.Token)
}

// When even the read that should settle an unknown outcome fails, the next
// successful read recognises the acquisition by its lease id.
func TestRunRecognisesUnresolvedAcquisitionOnALaterRead(t *testing.T) {
	st := &memStore{now: time.Unix(1000, 0)}
	st.acquireFault = func(n int) (bool, error) { return true, unavailable }
	st.readFault = func(n int) error {
		if n == 2 { // the read that settles the outcome
			return unavailable
		}
		return nil
	}
	m := newTestMutex(t, st)
	var runs atomic.Int32
	out, err := m.Run(context.Background(), func(ctx context.Context, l *Lease) error { runs.Add(1); return nil })
	require.NoError(t, err)
	assert.Equal(t, Executed, out)
	assert.Equal(t, int32(1), runs.Load())
	assert.Equal(t, 1, st.acquires)
}

// A context cancelled while an acquisition's outcome is unknown gives the
// acquisition back if it committed, so nobody waits a lease for nothing.
func TestRunGivesBackAnAcquisitionItCannotUse(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	st := &memStore{now: time.Unix(1000, 0)}
	st.acquireFault = func(n int) (bool, error) { cancel(); return true, context.Canceled }
	m := newTestMutex(t, st)
	out, err := m.Run(ctx, func(ctx context.Context, l *Lease) error {
		t.Error("the section must not run after ctx was cancelled")
		return nil
	})
	assert.Equal(t, NoOutcome, out)
	assert.ErrorIs(t, err, ErrNotObtained)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, StateNeeded, st.r.State)
	assert.Equal(t, int64(0), st.r.Attempts)
	assert.Equal(t, int64(1), st.r.Token, "the token was used and is never handed out again")
}

// A DONE whose commit answer was lost is read back as done, not reported as
// a failure and not retried into a lease-lost error.
func TestFinishResolvesUnknownOutcome(t *testing.T) {
	st := &memStore{now: time.Unix(1000, 0), finishFault: func(n int) (bool, error) { return true, unavailable }}
	m := newTestMutex(t, st)
	out, err := m.Run(context.Background(), func(ctx context.Context, l *Lease) error { return nil })
	require.NoError(t, err)
	assert.Equal(t, Executed, out)
	assert.Equal(t, 1, st.finishes)
	assert.Equal(t, StateDone, st.r.State)
}

// A DONE that did not commit is tried again.
func TestFinishRetriesWhenNotCommitted(t *testing.T) {
	st := &memStore{now: time.Unix(1000, 0), finishFault: lostUncommittedOnce}
	m := newTestMutex(t, st)
	_, err := m.Run(context.Background(), func(ctx context.Context, l *Lease) error { return nil })
	require.NoError(t, err)
	assert.Equal(t, 2, st.finishes)
	assert.Equal(t, StateDone, st.r.State)
}

// Reads that keep failing end in an *outageError after MaxFailures: it
// matches ErrOutage, and ErrAttemptsExhausted as before it existed, but
// errors.As finds no *exhaustedError (used-up attempts) in it.
func TestRunGivesUpAfterFailedReads(t *testing.T) {
	st := &memStore{now: time.Unix(1000, 0), readFault: func(int) error { return unavailable }}
	m := newTestMutex(t, st, WithMaxFailures(4))
	out, err := m.Run(context.Background(), func(ctx context.Context, l *Lease) error { return nil })
	assert.Equal(t, NoOutcome, out)
	assert.ErrorIs(t, err, ErrAttemptsExhausted)
	assertOutage(t, err, 4)
	assert.Equal(t, 4, st.reads)
}

// assertOutage checks that err is an outage after failures failed calls,
// told apart from used-up attempts.
func assertOutage(t *testing.T, err error, failures int) {
	t.Helper()
	assert.ErrorIs(t, err, ErrOutage)
	assert.ErrorIs(t, err, unavailable, "the last failed call's error")
	var outage *outageError
	if assert.ErrorAs(t, err, &outage) {
		assert.Equal(t, failures, outage.Failures)
		assert.Equal(t, failures, outage.MaxFailures)
	}
	var ex *exhaustedError
	assert.False(t, errors.As(err, &ex), "an outage is no *exhaustedError: %v", err)
	assert.Contains(t, err.Error(), "Spanner kept failing")
}

// A backoff policy that says Stop ends the wait.
func TestRunStopsWhenBackOffStops(t *testing.T) {
	st := &memStore{now: time.Unix(1000, 0)}
	st.r = row{Exists: true, State: StateStarted, Owner: "other", LeaseID: "x", Token: 4, Attempts: 1, RenewedAt: st.now}
	m := newTestMutex(t, st, WithBackOff(func() backoff.BackOff { return &backoff.StopBackOff{} }))
	out, err := m.Run(context.Background(), func(ctx context.Context, l *Lease) error { return nil })
	assert.Equal(t, NoOutcome, out)
	assert.ErrorIs(t, err, ErrAttemptsExhausted)
	assert.ErrorContains(t, err, "the backoff policy stopped")
}

// Acquisitions that keep failing are bounded by MaxFailures too.
func TestRunGivesUpAfterFailedAcquisitions(t *testing.T) {
	st := &memStore{now: time.Unix(1000, 0), acquireFault: func(n int) (bool, error) { return false, unavailable }}
	m := newTestMutex(t, st, WithMaxFailures(3))
	out, err := m.Run(context.Background(), func(ctx context.Context, l *Lease) error { t.Error("ran"); return nil })
	assert.Equal(t, NoOutcome, out)
	assert.ErrorIs(t, err, ErrAttemptsExhausted)
	assertOutage(t, err, 3)
	assert.Equal(t, 3, st.acquires)
}

// An acquisition given back unused returns its attempt, and the generation
// goes on: the attempt limit still holds across give-backs.
func TestGivenBackAttemptKeepsTheLimit(t *testing.T) {
	st := &memStore{now: time.Unix(1000, 0)}
	ctx, cancel := context.WithCancel(context.Background())
	st.acquireFault = func(n int) (bool, error) {
		if n == 1 {
			cancel()
			return true, context.Canceled
		}
		return true, nil
	}
	m := newTestMutex(t, st, WithMaxAttempts(1))
	_, err := m.Run(ctx, func(context.Context, *Lease) error { t.Error("ran"); return nil })
	require.ErrorIs(t, err, ErrNotObtained)
	require.Equal(t, StateNeeded, st.r.State)

	runs := 0
	fail := func(context.Context, *Lease) error { runs++; return errors.New("boom") }
	_, err = m.Run(context.Background(), fail)
	assert.ErrorContains(t, err, "boom")
	_, err = m.Run(context.Background(), fail)
	assert.ErrorIs(t, err, ErrAttemptsExhausted)
	assert.NotErrorIs(t, err, ErrOutage, "used-up attempts are no outage")
	assert.Equal(t, 1, runs, "MaxAttempts(1): one start in all")
}

// A lease whose renewals fail for a whole lease is declared lost and the
// section's ctx is cancelled with that cause, before anyone could take over.
func TestRenewalFailuresCancelTheSection(t *testing.T) {
	st := &memStore{now: time.Unix(1000, 0), renewFault: func(int) error { return unavailable }}
	m := newTestMutex(t, st, WithLease(300*time.Millisecond), WithRenewInterval(50*time.Millisecond))
	var cause error
	out, err := m.Run(context.Background(), func(ctx context.Context, l *Lease) error {
		<-ctx.Done()
		cause = context.Cause(ctx)
		assert.ErrorIs(t, l.Err(), ErrLeaseLost)
		return ctx.Err()
	})
	assert.Equal(t, Executed, out)
	assert.ErrorIs(t, cause, ErrLeaseLost)
	assert.ErrorContains(t, cause, "renewals failed for a whole lease")
	assert.ErrorIs(t, err, context.Canceled, "the section's own error is returned")
	assert.GreaterOrEqual(t, st.renewals, 2)
}

// A renewal that finds the row taken over cancels the section at once.
func TestRenewalSeesTakeover(t *testing.T) {
	st := &memStore{now: time.Unix(1000, 0)}
	m := newTestMutex(t, st, WithLease(time.Minute), WithRenewInterval(10*time.Millisecond))
	out, err := m.Run(context.Background(), func(ctx context.Context, l *Lease) error {
		st.mu.Lock()
		st.r.LeaseID, st.r.Token, st.r.Owner = "someone-else", st.r.Token+1, "thief"
		st.mu.Unlock()
		<-ctx.Done()
		var lost *leaseLostError
		require.ErrorAs(t, context.Cause(ctx), &lost)
		assert.Equal(t, l.Token()+1, lost.CurrentToken)
		return nil
	})
	assert.Equal(t, Executed, out)
	assert.ErrorIs(t, err, ErrLeaseLost, "DONE is not written over the new holder")
}

// A panicking section is recorded FAILED and the panic goes on.
func TestRunRecordsPanicAsFailed(t *testing.T) {
	st := &memStore{now: time.Unix(1000, 0)}
	m := newTestMutex(t, st)
	assert.PanicsWithValue(t, "boom", func() {
		_, _ = m.Run(context.Background(), func(ctx context.Context, l *Lease) error { panic("boom") })
	})
	assert.Equal(t, StateFailed, st.r.State)
	assert.Equal(t, "panic: boom", st.r.LastError)
}

// The Needed callback runs first; false means the row is not touched.
func TestRunNotNeededTouchesNothing(t *testing.T) {
	st := &memStore{now: time.Unix(1000, 0)}
	m := newTestMutex(t, st, WithNeeded(func(context.Context) (bool, error) { return false, nil }))
	out, err := m.Run(context.Background(), func(ctx context.Context, l *Lease) error { t.Error("ran"); return nil })
	require.NoError(t, err)
	assert.Equal(t, NotNeeded, out)
	assert.Zero(t, st.reads+st.acquires)
}
