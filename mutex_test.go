package spanmutex

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/internal/testutil"
)

// raceResult is what one round of an exactly-once race produced.
type raceResult struct {
	executions int64
	results    []contenderResult // how each contender's Run ended
}

// outcomes counts the contenders' outcomes.
func (r raceResult) outcomes() map[Outcome]int {
	out := map[Outcome]int{}
	for _, c := range r.results {
		out[c.outcome]++
	}
	return out
}

// errs returns the contenders' errors.
func (r raceResult) errs() []error {
	var errs []error
	for _, c := range r.results {
		if c.err != nil {
			errs = append(errs, c.err)
		}
	}
	return errs
}

// raceOnce starts contenders goroutines at once, spread over clients, each
// with a Mutex of its own for name, and counts how often the section ran.
func raceOnce(t *testing.T, clients []*spanner.Client, contenders int, name string, opts ...MutexOption) raceResult {
	t.Helper()
	var (
		executions atomic.Int64
		results    = make([]contenderResult, contenders)
		wg         sync.WaitGroup
		start      = make(chan struct{})
	)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for i := range contenders {
		m, err := New(clients[i%len(clients)], name, append([]MutexOption{WithOwner(fmt.Sprintf("contender-%d", i))}, opts...)...)
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			out, err := m.Run(ctx, func(ctx context.Context, l *Lease) error {
				executions.Add(1)
				return nil
			})
			results[i] = contenderResult{out, err}
		}()
	}
	close(start)
	wg.Wait()
	return raceResult{executions: executions.Load(), results: results}
}

// exactlyOnce runs the race for rounds fresh names and checks every round.
func exactlyOnce(t *testing.T, clients []*spanner.Client, rounds, contenders int) {
	t.Helper()
	for round := 0; round < rounds; round++ {
		name := fmt.Sprintf("%s/round-%d", t.Name(), round)
		res := raceOnce(t, clients, contenders, name)
		require.Empty(t, res.errs(), "round %d", round)
		require.Equal(t, int64(1), res.executions, "round %d: the section must run exactly once", round)
		require.Equal(t, map[Outcome]int{Executed: 1, AlreadyDone: contenders - 1}, res.outcomes(), "round %d", round)
		st := inspectOne(t, clients[0], name)
		require.Equal(t, StateDone, st.State)
		require.Equal(t, int64(1), st.Token)
		require.Equal(t, int64(1), st.Attempts)
	}
}

// 32 goroutines over 4 separate clients race on one name, 20 rounds: the
// section runs exactly once per round and everyone else gets AlreadyDone.
func TestExactlyOnce(t *testing.T) {
	t.Parallel() // beside the tests that wait out leases
	eachDialect(t, testExactlyOnce)
}

func testExactlyOnce(t *testing.T, db string) {
	clients := []*spanner.Client{newClient(t, db), newClient(t, db), newClient(t, db), newClient(t, db)}
	exactlyOnce(t, clients, testutil.Scale(3, 20), 32)
}

// The same race against an emulator that aborts commits at random.
func TestExactlyOnceUnderFaultInjection(t *testing.T) {
	clients := faultyEmulatorClients(t, 4)
	exactlyOnce(t, clients, testutil.Scale(5, 20), 32) // 20 with SPANMUTEX_SOAK (CI)
}

// holder acquires a section and blocks inside it until release is closed.
// If the section's ctx ends first, its cause is sent on lost.
type holder struct {
	lease   chan *Lease
	lost    chan error
	release chan struct{}
	done    chan runResult
}

type runResult struct {
	outcome Outcome
	err     error
}

func startHolder(t *testing.T, m *Mutex) *holder {
	t.Helper()
	h := &holder{lease: make(chan *Lease, 1), lost: make(chan error, 1), release: make(chan struct{}), done: make(chan runResult, 1)}
	go func() {
		out, err := m.Run(context.Background(), func(ctx context.Context, l *Lease) error {
			h.lease <- l
			select {
			case <-h.release:
			case <-ctx.Done():
				h.lost <- context.Cause(ctx)
				<-h.release
			}
			return nil
		})
		h.done <- runResult{out, err}
	}()
	t.Cleanup(func() {
		h.stop()
		<-h.done
	})
	return h
}

// stop lets the section return.
func (h *holder) stop() {
	select {
	case <-h.release:
	default:
		close(h.release)
	}
}

func (h *holder) acquired(t *testing.T) *Lease {
	t.Helper()
	select {
	case l := <-h.lease:
		return l
	case r := <-h.done:
		t.Fatalf("holder ended before acquiring: %v %v", r.outcome, r.err)
	case <-time.After(time.Minute):
		t.Fatal("holder did not acquire within a minute")
	}
	return nil
}

func (h *holder) result(t *testing.T) runResult {
	t.Helper()
	h.stop()
	select {
	case r := <-h.done:
		h.done <- r // for the cleanup
		return r
	case <-time.After(time.Minute):
		t.Fatal("holder did not return within a minute")
	}
	return runResult{}
}

// A holder whose renewals stop reaching Spanner (a paused process, a dropped
// network) has its section's ctx cancelled with ErrLeaseLost and is taken
// over only after the lease, by Spanner's clock, with a higher token;
// when it comes back it learns that its lease was lost instead of marking
// the section DONE.
// Waits out leases: it runs beside the other waiting tests (t.Parallel).
func TestTakeoverOnlyAfterLease(t *testing.T) {
	t.Parallel()
	eachDialect(t, testTakeoverOnlyAfterLease)
}

func testTakeoverOnlyAfterLease(t *testing.T, db string) {
	const lease = 2 * time.Second
	ca, silenceA := silenceableClient(t, db)
	a, err := New(ca, "takeover", WithOwner("a"), WithLease(lease), WithJitter(0))
	require.NoError(t, err)
	b, err := New(newClient(t, db), "takeover", WithOwner("b"), WithLease(lease), WithJitter(0))
	require.NoError(t, err)

	ha := startHolder(t, a)
	la := ha.acquired(t)
	silenceA.Store(true)
	hb := startHolder(t, b)
	lb := hb.acquired(t)

	assert.True(t, lb.TookOver())
	assert.Greater(t, lb.Token(), la.Token())
	assert.GreaterOrEqual(t, lb.AcquiredAt().Sub(la.AcquiredAt()), lease,
		"takeover at %v, acquisition at %v (Spanner commit timestamps)", lb.AcquiredAt(), la.AcquiredAt())

	select {
	case cause := <-ha.lost:
		assert.ErrorIs(t, cause, ErrLeaseLost, "the old holder's ctx is cancelled with a lease-lost cause")
	case <-time.After(time.Minute):
		t.Fatal("the old holder's ctx was not cancelled")
	}
	assert.ErrorIs(t, la.Err(), ErrLeaseLost)
	select {
	case <-la.Done():
	default:
		t.Error("Done of a lost lease is closed")
	}

	silenceA.Store(false) // the old holder comes back
	ra := ha.result(t)
	assert.Equal(t, Executed, ra.outcome)
	var lost *leaseLostError
	require.ErrorAs(t, ra.err, &lost)
	assert.Equal(t, la.Token(), lost.Token)
	assert.Equal(t, lb.Token(), lost.CurrentToken)
	assert.Equal(t, "b", lost.CurrentOwner)

	rb := hb.result(t)
	assert.NoError(t, rb.err)
	assert.ErrorIs(t, lb.Err(), ErrReleased, "once Run returned, the lease is released, not lost")
	st := inspectOne(t, newClient(t, db), "takeover")
	assert.Equal(t, StateDone, st.State)
	assert.Equal(t, lb.Token(), st.Token)
	assert.Equal(t, int64(2), st.Attempts)
}

// A live holder renews its lease: a section that runs five leases long
// is not taken over, and its waiters get AlreadyDone.
func TestRenewalKeepsALongSectionAlive(t *testing.T) {
	t.Parallel() // waits out leases
	db := freshDatabase(t)
	const lease = time.Second
	a, err := New(newClient(t, db), "long", WithOwner("a"), WithLease(lease), WithJitter(0))
	require.NoError(t, err)
	b, err := New(newClient(t, db), "long", WithOwner("b"), WithLease(lease), WithJitter(0))
	require.NoError(t, err)
	ha := startHolder(t, a)
	la := ha.acquired(t)

	waiter := make(chan runResult, 1)
	go func() {
		out, err := b.Run(context.Background(), func(context.Context, *Lease) error {
			t.Error("the waiter must not take over a live holder")
			return nil
		})
		waiter <- runResult{out, err}
	}()
	c := newClient(t, db)
	waitFor(t, time.Minute, "the section to have run for five leases by Spanner's clock", func() bool {
		st := inspectOne(t, c, "long")
		require.Equal(t, la.Token(), st.Token, "no takeover")
		return st.RenewedAt.Sub(st.StartedAt) >= 5*lease
	})
	assert.NoError(t, la.Err())
	r := ha.result(t)
	require.NoError(t, r.err)
	assert.Equal(t, Executed, r.outcome)
	w := <-waiter
	assert.NoError(t, w.err)
	assert.Equal(t, AlreadyDone, w.outcome)
}

// Guard, in the holder's own transaction, lets its writes commit while it
// holds the lease and rejects them, rolling back, once it was taken over.
func TestGuardFencesTheHoldersOwnWrites(t *testing.T) {
	db := freshDatabase(t, "CREATE TABLE Sheets (ID STRING(64) NOT NULL, Writer INT64) PRIMARY KEY (ID)")
	const lease = time.Second
	ca, silenceA := silenceableClient(t, db)
	a, err := New(ca, "sheet-1", WithOwner("a"), WithLease(lease), WithJitter(0))
	require.NoError(t, err)
	b, err := New(newClient(t, db), "sheet-1", WithOwner("b"), WithLease(lease), WithJitter(0))
	require.NoError(t, err)
	write := func(c *spanner.Client, l *Lease) error {
		_, err := c.ReadWriteTransaction(context.Background(), func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
			if err := l.Guard(ctx, txn); err != nil {
				return err
			}
			return txn.BufferWrite([]*spanner.Mutation{spanner.InsertOrUpdate("Sheets", []string{"ID", "Writer"}, []any{"sheet-1", l.Token()})})
		})
		return err
	}
	ha := startHolder(t, a)
	la := ha.acquired(t)
	require.NoError(t, write(ca, la), "the holder's guarded write commits")

	silenceA.Store(true)
	hb := startHolder(t, b)
	lb := hb.acquired(t)
	require.NoError(t, write(newClient(t, db), lb))
	silenceA.Store(false)

	err = write(ca, la)
	assert.ErrorIs(t, err, ErrLeaseLost, "the stale holder's guarded write is rejected")
	r, err := newClient(t, db).Single().ReadRow(context.Background(), "Sheets", spanner.Key{"sheet-1"}, []string{"Writer"})
	require.NoError(t, err)
	var writer int64
	require.NoError(t, r.Columns(&writer))
	assert.Equal(t, lb.Token(), writer, "the new holder's write stands")
}

// skewedClock is a local clock that is far off and whose timers run a
// hundred times fast: a contender using it polls far too often and believes
// it is hours ahead or behind. Neither may change a decision.
type skewedClock struct{ offset time.Duration }

func (c skewedClock) Now() time.Time { return time.Now().Add(c.offset) }
func (c skewedClock) NewTimer(d time.Duration) (<-chan time.Time, func() bool) {
	t := time.NewTimer(d / 100)
	return t.C, t.Stop
}

func withClock(c clock) Option { return anyOption(func(cfg *config) { cfg.clock = c }) }

func TestLocalClockChangesNoDecision(t *testing.T) {
	t.Parallel() // waits out leases
	for _, offset := range []time.Duration{10 * time.Hour, -10 * time.Hour, 365 * 24 * time.Hour} {
		t.Run(offset.String(), func(t *testing.T) {
			db := freshDatabase(t)
			const lease = 2 * time.Second
			ca, silenceA := silenceableClient(t, db)
			a, err := New(ca, "skew", WithOwner("a"), WithLease(lease), WithJitter(0))
			require.NoError(t, err)
			b, err := New(newClient(t, db), "skew", WithOwner("b"), WithLease(lease), WithJitter(0),
				withClock(skewedClock{offset: offset}))
			require.NoError(t, err)
			ha := startHolder(t, a)
			la := ha.acquired(t)
			silenceA.Store(true)
			hb := startHolder(t, b)
			lb := hb.acquired(t)
			silenceA.Store(false)
			assert.GreaterOrEqual(t, lb.AcquiredAt().Sub(la.AcquiredAt()), lease)
			assert.Equal(t, la.Token()+1, lb.Token())
		})
	}
}

// A failing section is recorded FAILED with its error; later calls retry it
// until the attempt limit, then give up without running it.
func TestFailuresAreRetriedUpToTheLimit(t *testing.T) {
	db := freshDatabase(t)
	c := newClient(t, db)
	m, err := New(c, "flaky", WithMaxAttempts(2))
	require.NoError(t, err)
	boom := errors.New("boom")
	runs := 0
	fail := func(ctx context.Context, l *Lease) error { runs++; return fmt.Errorf("attempt %d: %w", runs, boom) }
	ctx := context.Background()

	out, err := m.Run(ctx, fail)
	assert.Equal(t, Executed, out)
	assert.ErrorIs(t, err, boom)
	var se *SectionError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, int64(1), se.Token)
	st := inspectOne(t, c, "flaky")
	assert.Equal(t, StateFailed, st.State)
	assert.Equal(t, "attempt 1: boom", st.LastError)
	assert.Equal(t, int64(1), st.Attempts)

	out, err = m.Run(ctx, fail)
	assert.Equal(t, Executed, out)
	assert.ErrorIs(t, err, boom)
	assert.Equal(t, int64(2), inspectOne(t, c, "flaky").Token)

	out, err = m.Run(ctx, fail)
	assert.Equal(t, NoOutcome, out)
	var ex *exhaustedError
	require.ErrorAs(t, err, &ex)
	assert.Equal(t, int64(2), ex.Attempts)
	assert.Equal(t, "attempt 2: boom", ex.LastError)
	assert.Equal(t, 2, runs)
}

// Contenders waiting on a holder that fails retry the section: exactly one
// of them runs it next.
func TestWaitersRetryAFailedSection(t *testing.T) {
	db := freshDatabase(t)
	c := newClient(t, db)
	first, err := New(c, "retry-by-waiters")
	require.NoError(t, err)
	started, fail := make(chan struct{}), make(chan struct{})
	firstDone := make(chan error, 1)
	go func() {
		_, err := first.Run(context.Background(), func(ctx context.Context, l *Lease) error {
			close(started)
			<-fail
			return errors.New("transient")
		})
		firstDone <- err
	}()
	<-started

	var runs atomic.Int32
	var wg sync.WaitGroup
	outcomes := make(chan Outcome, 5)
	for i := 0; i < 5; i++ {
		m, err := New(newClient(t, db), "retry-by-waiters")
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := m.Run(context.Background(), func(ctx context.Context, l *Lease) error {
				runs.Add(1)
				return nil
			})
			assert.NoError(t, err)
			outcomes <- out
		}()
	}
	// Whether a waiter reads the row before or after the failure is
	// recorded, it must see STARTED then FAILED, or FAILED: either way
	// exactly one of them may run the retry.
	close(fail)
	assert.Error(t, <-firstDone)
	wg.Wait()
	close(outcomes)
	counts := map[Outcome]int{}
	for o := range outcomes {
		counts[o]++
	}
	assert.Equal(t, int32(1), runs.Load())
	assert.Equal(t, map[Outcome]int{Executed: 1, AlreadyDone: 4}, counts)
	st := inspectOne(t, c, "retry-by-waiters")
	assert.Equal(t, StateDone, st.State)
	assert.Equal(t, int64(2), st.Attempts)
}

// A holder that goes silent on the last allowed attempt is recorded FAILED
// as abandoned, and nobody runs the section again.
func TestAbandonedLastAttemptIsRecordedFailed(t *testing.T) {
	db := freshDatabase(t)
	opts := []MutexOption{WithLease(time.Second), WithJitter(0), WithMaxAttempts(1), WithMaxFailures(1)}
	ca, silenceA := silenceableClient(t, db)
	a, err := New(ca, "abandoned", append(opts, WithOwner("a"))...)
	require.NoError(t, err)
	b, err := New(newClient(t, db), "abandoned", append(opts, WithOwner("b"))...)
	require.NoError(t, err)
	ha := startHolder(t, a)
	ha.acquired(t)
	silenceA.Store(true)
	out, err := b.Run(context.Background(), func(ctx context.Context, l *Lease) error {
		t.Error("must not run after the last attempt was abandoned")
		return nil
	})
	assert.Equal(t, NoOutcome, out)
	assert.ErrorIs(t, err, ErrAttemptsExhausted)
	st := inspectOne(t, newClient(t, db), "abandoned")
	assert.Equal(t, StateFailed, st.State)
	assert.Contains(t, st.LastError, `abandoned: holder "a" (token 1)`)

	silenceA.Store(false) // the holder comes back and learns what happened
	r := ha.result(t)
	var lost *leaseLostError
	require.ErrorAs(t, r.err, &lost)
	assert.Contains(t, lost.Error(), "recorded the section FAILED as abandoned")
	assert.Equal(t, StateFailed, inspectOne(t, newClient(t, db), "abandoned").State, "the holder did not overwrite FAILED")
}

// A DONE section older than the staleness threshold, by Spanner's clock,
// runs again, with the next token.
func TestStaleDoneRunsAgain(t *testing.T) {
	db := freshDatabase(t)
	c := newClient(t, db)
	m, err := New(c, "stale", WithLease(500*time.Millisecond), WithStaleness(time.Second))
	require.NoError(t, err)
	ran := func(ctx context.Context, l *Lease) error { return nil }
	out, err := m.Run(context.Background(), ran)
	require.NoError(t, err)
	assert.Equal(t, Executed, out)
	out, err = m.Run(context.Background(), ran)
	require.NoError(t, err)
	assert.Equal(t, AlreadyDone, out)

	waitFor(t, 30*time.Second, "the DONE row to be a second old by Spanner's clock", func() bool {
		return inspectOne(t, c, "stale").Age >= time.Second
	})
	out, err = m.Run(context.Background(), ran)
	require.NoError(t, err)
	assert.Equal(t, Executed, out)
	st := inspectOne(t, c, "stale")
	assert.Equal(t, int64(2), st.Token)
	assert.Equal(t, int64(1), st.Attempts, "a stale row starts a new generation")
}

// The Needed callback can say there is nothing to do: no row is written.
func TestNotNeededWritesNothing(t *testing.T) {
	db := freshDatabase(t)
	c := newClient(t, db)
	m, err := New(c, "unneeded", WithNeeded(func(context.Context) (bool, error) { return false, nil }))
	require.NoError(t, err)
	out, err := m.Run(context.Background(), func(context.Context, *Lease) error { return nil })
	require.NoError(t, err)
	assert.Equal(t, NotNeeded, out)
	rows, err := Inspect(context.Background(), c, "")
	require.NoError(t, err)
	assert.Empty(t, rows)

	broken := errors.New("cannot tell")
	m, err = New(c, "unneeded", WithNeeded(func(context.Context) (bool, error) { return false, broken }))
	require.NoError(t, err)
	_, err = m.Run(context.Background(), func(context.Context, *Lease) error { return nil })
	assert.ErrorIs(t, err, broken)
}

// A waiter whose ctx ends returns ErrNotObtained joined with ctx.Err(), and
// the section does not run there.
func TestWaiterHonoursContext(t *testing.T) {
	db := freshDatabase(t)
	a, err := New(newClient(t, db), "ctx")
	require.NoError(t, err)
	startHolder(t, a).acquired(t)
	b, err := New(newClient(t, db), "ctx")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	out, err := b.Run(ctx, func(context.Context, *Lease) error { t.Error("ran"); return nil })
	assert.Equal(t, NoOutcome, out)
	assert.ErrorIs(t, err, ErrNotObtained)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}

// A missing table, a table without our columns, a wrong table name and a
// database that does not exist each give an error that names the problem,
// and nothing is written.
func TestSchemaAndDatabaseProblems(t *testing.T) {
	needEmulator(t)
	ctx := context.Background()
	empty, err := emu.CreateDatabase(ctx)
	require.NoError(t, err)
	partial, err := emu.CreateDatabase(ctx, "CREATE TABLE Mutexes (Name STRING(256) NOT NULL, State STRING(16) NOT NULL, Token STRING(10)) PRIMARY KEY (Name)")
	require.NoError(t, err)
	good := freshDatabase(t)
	missing := emu.Instance() + "/databases/never-created"
	emptyPG, err := emu.CreateDatabaseIn(ctx, ddl.PostgreSQL)
	require.NoError(t, err)
	partialPG, err := emu.CreateDatabaseIn(ctx, ddl.PostgreSQL, `CREATE TABLE "Mutexes" ("Name" varchar(256) NOT NULL, "State" varchar(16) NOT NULL, "Token" varchar(10), PRIMARY KEY ("Name"))`)
	require.NoError(t, err)

	tests := []struct {
		name string
		db   string
		opts []MutexOption
		is   error
		want []string
	}{
		{"no table", empty, nil, ErrSchema, []string{"table Mutexes: does not exist", "spanmutex ddl --table Mutexes"}},
		{"wrong table name", good, []MutexOption{WithTable("Locks")}, ErrSchema, []string{"table Locks: does not exist", "spanmutex ddl --table Locks"}},
		{"missing and mistyped columns", partial, nil, ErrSchema, []string{"does not have the columns", "LeaseID STRING(36) missing", "Token is STRING(10), want INT64"}},
		{"no database", missing, nil, nil, []string{"database " + missing + " does not exist"}},
		{"no table (postgresql)", emptyPG, nil, ErrSchema, []string{"table Mutexes: does not exist", "spanmutex ddl --dialect postgresql --table Mutexes"}},
		{"missing and mistyped columns (postgresql)", partialPG, nil, ErrSchema, []string{"does not have the columns", "LeaseID character varying(36) missing", "Token is character varying(10), want bigint", "UpdatedAt spanner.commit_timestamp missing"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClient(t, tt.db)
			m, err := New(c, "x", tt.opts...)
			require.NoError(t, err)
			out, err := m.Run(ctx, func(context.Context, *Lease) error { t.Error("ran"); return nil })
			assert.Equal(t, NoOutcome, out)
			require.Error(t, err)
			if tt.is != nil {
				assert.ErrorIs(t, err, tt.is)
			}
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
	rows, err := Inspect(ctx, newClient(t, good), "")
	require.NoError(t, err)
	assert.Empty(t, rows, "nothing was written")
}

// Tokens grow strictly over every kind of acquisition of one name: fresh,
// retry after failure, takeover, and a new generation after staleness.
// Waits out leases: it runs beside the other waiting tests (t.Parallel).
func TestTokensStrictlyIncrease(t *testing.T) {
	t.Parallel()
	eachDialect(t, testTokensStrictlyIncrease)
}

func testTokensStrictlyIncrease(t *testing.T, db string) {
	c := newClient(t, db)
	opts := []MutexOption{WithLease(time.Second), WithStaleness(1500 * time.Millisecond), WithJitter(0), WithMaxAttempts(5), WithMaxFailures(5)}
	var tokens []int64
	record := func(err error) func(context.Context, *Lease) error {
		return func(ctx context.Context, l *Lease) error { tokens = append(tokens, l.Token()); return err }
	}
	m, err := New(c, "tokens", opts...)
	require.NoError(t, err)
	_, _ = m.Run(context.Background(), record(errors.New("fail once"))) // fresh: 1, FAILED
	cs, silence := silenceableClient(t, db)
	silent, err := New(cs, "tokens", opts...)
	require.NoError(t, err)
	ha := startHolder(t, silent) // retry: 2, then silent
	tokens = append(tokens, ha.acquired(t).Token())
	silence.Store(true)
	_, err = m.Run(context.Background(), record(nil)) // takeover: 3, DONE
	require.NoError(t, err)
	silence.Store(false)
	waitFor(t, 30*time.Second, "staleness", func() bool { return inspectOne(t, c, "tokens").Age >= 1500*time.Millisecond })
	_, err = m.Run(context.Background(), record(nil)) // new generation: 4
	require.NoError(t, err)
	assert.Equal(t, []int64{1, 2, 3, 4}, tokens)
}
