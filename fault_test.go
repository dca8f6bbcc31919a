package spanmutex

// Fault tests: the library against the real emulator while a gRPC
// interceptor (internal/faultinject) drops the responses of commits that
// succeeded, fails and delays calls, or holds them; and while the emulator
// itself aborts commits at random (--enable_fault_injection).

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"cloud.google.com/go/spanner/apiv1/spannerpb"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/option"
	"google.golang.org/api/option/internaloption"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/spanmutex/spanmutex/internal/faultinject"
	"github.com/spanmutex/spanmutex/internal/testutil"
)

// historyDDL is a table of the writes holders make, fenced with Guard: one
// row per write, with its token and commit timestamp.
const historyDDL = "CREATE TABLE History (Token INT64 NOT NULL, Seq STRING(36) NOT NULL, " +
	"WrittenAt TIMESTAMP NOT NULL OPTIONS (allow_commit_timestamp = true)) PRIMARY KEY (Token, Seq)"

// guardedWrite appends a row for lease's token to History, in a transaction
// that checks with Guard that the lease is still held.
func guardedWrite(ctx context.Context, c *spanner.Client, l *Lease) error {
	_, err := c.ReadWriteTransaction(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		if err := l.Guard(ctx, txn); err != nil {
			return err
		}
		return txn.BufferWrite([]*spanner.Mutation{spanner.Insert("History",
			[]string{"Token", "Seq", "WrittenAt"}, []any{l.Token(), uuid.NewString(), spanner.CommitTimestamp})})
	})
	return err
}

// historyEntry is one committed write.
type historyEntry struct {
	Token int64
	At    time.Time
}

// readHistory returns the committed writes in commit order, and fails the
// test if a write by a token committed after a write by a higher token: the
// tokens, in commit order, must never go down.
func readHistory(t *testing.T, c *spanner.Client) []historyEntry {
	t.Helper()
	var h []historyEntry
	stmt := spanner.Statement{SQL: "SELECT Token, WrittenAt FROM History ORDER BY WrittenAt, Token"}
	require.NoError(t, c.Single().Query(context.Background(), stmt).Do(func(r *spanner.Row) error {
		var e historyEntry
		if err := r.Columns(&e.Token, &e.At); err != nil {
			return err
		}
		h = append(h, e)
		return nil
	}))
	for i := 1; i < len(h); i++ {
		if h[i].Token < h[i-1].Token {
			t.Errorf("a write by token %d committed at %v, after token %d had written at %v: fencing failed",
				h[i].Token, h[i].At, h[i-1].Token, h[i-1].At)
		}
	}
	return h
}

func historyTokens(h []historyEntry) []int64 {
	var out []int64
	for _, e := range h {
		out = append(out, e.Token)
	}
	return out
}

// commitWrites returns a faultinject Match for Commit requests that write
// column (any column if "") of table.
func commitWrites(table, column string) func(string, any) bool {
	return func(_ string, req any) bool {
		cr, ok := req.(*spannerpb.CommitRequest)
		if !ok {
			return false
		}
		for _, m := range cr.GetMutations() {
			var w *spannerpb.Mutation_Write
			switch op := m.GetOperation().(type) {
			case *spannerpb.Mutation_Insert:
				w = op.Insert
			case *spannerpb.Mutation_Update:
				w = op.Update
			case *spannerpb.Mutation_InsertOrUpdate:
				w = op.InsertOrUpdate
			case *spannerpb.Mutation_Replace:
				w = op.Replace
			}
			if w != nil && w.GetTable() == table && (column == "" || slices.Contains(w.GetColumns(), column)) {
				return true
			}
		}
		return false
	}
}

// networkFaults is a flaky network between a client and Spanner: 30% of
// the commits that succeed have their answer lost (UNAVAILABLE, which the
// client retries by committing again, or DEADLINE_EXCEEDED, which it reports
// as an unknown outcome), 10% of all calls fail with UNAVAILABLE before they
// are sent, and 30% are delayed by up to 15ms.
func networkFaults(t *testing.T, seed uint64) *faultinject.Injector {
	t.Helper()
	in, err := faultinject.New(seed,
		faultinject.Rule{Name: "commit answer lost", Methods: []string{"Commit"}, Action: faultinject.DropResponse,
			Probability: 0.3, Codes: []codes.Code{codes.Unavailable, codes.DeadlineExceeded}},
		faultinject.Rule{Name: "unavailable", Action: faultinject.Fail, Probability: 0.1, Codes: []codes.Code{codes.Unavailable}},
		faultinject.Rule{Name: "delayed", Action: faultinject.Delay, Probability: 0.3, MaxDelay: 15 * time.Millisecond},
	)
	require.NoError(t, err)
	return in
}

// faultyClients opens n clients of db whose RPCs go through in. The faults
// start once every client has made a read, so that opening them is not
// what is tested; in is left enabled.
func faultyClients(t *testing.T, db string, in *faultinject.Injector, n int) []*spanner.Client {
	t.Helper()
	in.SetEnabled(false)
	clients := make([]*spanner.Client, n)
	for i := range clients {
		c, err := emu.NewClient(context.Background(), db, in.ClientOptions()...)
		require.NoError(t, err)
		t.Cleanup(c.Close)
		_, err = Inspect(context.Background(), c, "warm-up")
		require.NoError(t, err)
		clients[i] = c
	}
	in.SetEnabled(true)
	t.Cleanup(func() { in.SetEnabled(false); in.Release() })
	return clients
}

// logCounter is a slog.Handler that counts the library's log messages of
// level Info and above, to show which recovery paths the faults exercised.
type logCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

func newLogCounter() *logCounter { return &logCounter{counts: map[string]int{}} }

func (h *logCounter) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }

func (h *logCounter) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.counts[r.Message]++
	return nil
}

func (h *logCounter) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logCounter) WithGroup(string) slog.Handler      { return h }

// snapshot returns the counts so far, without the messages of normal runs.
func (h *logCounter) snapshot() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := maps.Clone(h.counts)
	for _, normal := range []string{"acquired", "section done"} {
		delete(out, normal)
	}
	return out
}

// contenderResult is how one contender's Run ended.
type contenderResult struct {
	outcome Outcome
	err     error
}

// documentedMiss reports whether err is an error Run documents for a call
// that did not run the section: it gave up, or its ctx ended.
func documentedMiss(out Outcome, err error) bool {
	return out == NoOutcome && (errors.Is(err, ErrAttemptsExhausted) || errors.Is(err, ErrNotObtained))
}

// 16 contenders over 4 clients race for a run-once section, 10 rounds (6
// without SPANMUTEX_SOAK), on a flaky network: the section runs exactly once per round, in the contender
// that reports Executed; the others report AlreadyDone or a documented
// error; the row ends DONE.
func TestFaultMutexExactlyOnce(t *testing.T) {
	db := freshDatabase(t)
	const seed, contenders = 1, 16
	rounds := testutil.Scale(4, 10)
	in := networkFaults(t, seed)
	clients := faultyClients(t, db, in, 4)
	check := newClient(t, db)
	logs := newLogCounter()
	opts := []MutexOption{WithLease(2 * time.Second), WithMaxAttempts(5), WithMaxFailures(5), WithLogger(slog.New(logs))}
	began := time.Now()
	misses := map[string]int{}
	tokens := map[int64]int{}
	for round := range rounds {
		name := fmt.Sprintf("fault-once/round-%d", round)
		res := raceOnce(t, clients, contenders, name, opts...)

		executed := 0
		for i, r := range res.results {
			switch {
			case r.err == nil && r.outcome == Executed:
				executed++
			case r.err == nil && r.outcome == AlreadyDone:
			case documentedMiss(r.outcome, r.err):
				misses[r.err.Error()]++
				t.Logf("round %d, contender %d: %v (documented)", round, i, r.err)
			default:
				t.Errorf("round %d, contender %d: %v with error %v: not an outcome Run documents for this case", round, i, r.outcome, r.err)
			}
		}
		assert.Equal(t, int64(1), res.executions, "round %d: the section must run exactly once", round)
		assert.Equal(t, 1, executed, "round %d: exactly one contender reports Executed", round)
		st := inspectOne(t, check, name)
		assert.Equal(t, StateDone, st.State, "round %d", round)
		tokens[st.Token]++
	}
	stats := in.Stats()
	t.Logf("%d rounds x %d contenders in %v; final tokens %v (a token above 1: an acquisition given back or taken over); documented misses %v",
		rounds, contenders, time.Since(began).Round(time.Millisecond), tokens, misses)
	t.Logf("faults injected (seed %d): %v", seed, stats)
	t.Logf("recoveries the library logged: %v", logs.snapshot())
	assert.Positive(t, stats.Injected(faultinject.DropResponse), "some commit answers were lost")
}

// lockRaceResult is what a lockRace saw.
type lockRaceResult struct {
	leases      int
	notObtained int
	exhausted   int
	other       []error
	tokens      []int64 // in the order the holders got the lock
	overlaps    int     // times a holder found another holding at once
	lost        int     // leases lost while held
	wrongRow    []string
	unlockErrs  []error
}

// lockRace runs contenders goroutines, each with a Lock of its own on
// clients[i%len], each taking the lock times times. While holding, a
// holder checks through check that the row shows its own token.
func lockRace(t *testing.T, clients []*spanner.Client, check *spanner.Client, name string, contenders, times int, opts ...LockOption) lockRaceResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	var (
		res     lockRaceResult
		mu      sync.Mutex
		holders atomic.Int32
		wg      sync.WaitGroup
		start   = make(chan struct{})
	)
	for i := range contenders {
		l, err := NewLock(clients[i%len(clients)], name, append([]LockOption{WithOwner(fmt.Sprintf("w%d", i))}, opts...)...)
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for range times {
				lease, err := l.Lock(ctx)
				if err != nil {
					mu.Lock()
					switch {
					case errors.Is(err, ErrNotObtained):
						res.notObtained++
					case errors.Is(err, ErrAttemptsExhausted):
						res.exhausted++
					default:
						res.other = append(res.other, err)
					}
					mu.Unlock()
					continue
				}
				if h := holders.Add(1); h != 1 {
					mu.Lock()
					res.overlaps++
					mu.Unlock()
				}
				mu.Lock()
				res.leases++
				res.tokens = append(res.tokens, lease.Token())
				mu.Unlock()
				rows, err := Inspect(ctx, check, name)
				if err == nil && (len(rows) != 1 || rows[0].State != StateStarted || rows[0].Token != lease.Token()) {
					mu.Lock()
					res.wrongRow = append(res.wrongRow, fmt.Sprintf("holder of token %d read the row as %+v", lease.Token(), rows))
					mu.Unlock()
				}
				lost := lease.Err() != nil
				holders.Add(-1)
				uerr := l.Unlock(ctx)
				mu.Lock()
				if lost {
					res.lost++
				}
				if uerr != nil {
					res.unlockErrs = append(res.unlockErrs, uerr)
				}
				mu.Unlock()
			}
		}()
	}
	close(start)
	wg.Wait()
	return res
}

// checkLockRace asserts mutual exclusion, strictly increasing tokens and
// that every Lock call got the lock.
func checkLockRace(t *testing.T, res lockRaceResult, want int) {
	t.Helper()
	assert.Zero(t, res.overlaps, "two holders at once")
	assert.Zero(t, res.lost, "leases lost while held (renewals failed for a whole lease)")
	assert.Empty(t, res.wrongRow, "a holder found the row not showing its lease")
	assert.Empty(t, res.other, "Lock errors other than ErrNotObtained and ErrAttemptsExhausted")
	assert.Empty(t, res.unlockErrs, "Unlock errors")
	for i := 1; i < len(res.tokens); i++ {
		if res.tokens[i] <= res.tokens[i-1] {
			t.Errorf("acquisition %d got token %d after token %d: tokens must strictly increase", i, res.tokens[i], res.tokens[i-1])
		}
	}
	assert.Equal(t, want, res.leases, "every Lock call got the lock (ErrNotObtained: %d, ErrAttemptsExhausted: %d, other: %v)",
		res.notObtained, res.exhausted, res.other)
}

// 8 contenders each take and release a lock 10 times (6 without
// SPANMUTEX_SOAK) on a flaky network:
// never two holders at once, tokens strictly increase in the order the lock
// was taken, and every Lock call gets the lock.
func TestFaultLockMutualExclusion(t *testing.T) {
	db := freshDatabase(t)
	const seed, contenders = 2, 8
	times := testutil.Scale(4, 10)
	in := networkFaults(t, seed)
	clients := faultyClients(t, db, in, 4)
	began := time.Now()
	logs := newLogCounter()
	res := lockRace(t, clients, newClient(t, db), "fault-lock", contenders, times,
		WithLease(2*time.Second), WithMaxFailures(20), WithLogger(slog.New(logs)))
	require.NotEmpty(t, res.tokens, "no Lock call got the lock: %v", res.other)
	last := res.tokens[len(res.tokens)-1]
	t.Logf("%d Lock calls in %v: %d leases, %d ErrNotObtained, %d ErrAttemptsExhausted, %d other errors; tokens 1..%d for %d acquisitions",
		contenders*times, time.Since(began).Round(time.Millisecond), res.leases, res.notObtained, res.exhausted, len(res.other), last, res.leases)
	t.Logf("faults injected (seed %d): %v", seed, in.Stats())
	t.Logf("recoveries the library logged: %v", logs.snapshot())
	checkLockRace(t, res, contenders*times)
	st := inspectOne(t, newClient(t, db), "fault-lock")
	assert.Equal(t, StateNeeded, st.State, "the lock ends free")
	assert.GreaterOrEqual(t, st.Token, last)
	assert.Empty(t, queued(t, newClient(t, db), "fault-lock"), "the queue ends empty")
}

// The same, against an emulator that aborts commits at random.
func TestFaultLockUnderEmulatorFaultInjection(t *testing.T) {
	clients := faultyEmulatorClients(t, 4)
	const contenders, times = 8, 10
	began := time.Now()
	logs := newLogCounter()
	res := lockRace(t, clients, clients[0], "emulator-faults", contenders, times,
		WithLease(2*time.Second), WithMaxFailures(20), WithLogger(slog.New(logs)))
	t.Logf("%d Lock calls in %v: %d leases, %d ErrNotObtained, %d ErrAttemptsExhausted, %d other errors (emulator aborting commits at random)",
		contenders*times, time.Since(began).Round(time.Millisecond), res.leases, res.notObtained, res.exhausted, len(res.other))
	t.Logf("recoveries the library logged: %v", logs.snapshot())
	checkLockRace(t, res, contenders*times)
	rows, err := Inspect(context.Background(), clients[0], "emulator-faults")
	require.NoError(t, err)
	require.Len(t, rows, 1)
	assert.Equal(t, StateNeeded, rows[0].State)
}

// faultyAndPlainLocks returns two Locks of name in db: a, owned "a", on a
// client whose RPCs go through in (disabled until the test enables it),
// and b, owned "b", on a plain client; and a plain client to check with.
func faultyAndPlainLocks(t *testing.T, db, name string, in *faultinject.Injector) (a, b *Lock, check *spanner.Client) {
	t.Helper()
	ca := faultyClients(t, db, in, 1)[0]
	in.SetEnabled(false)
	a, err := NewLock(ca, name, WithOwner("a"))
	require.NoError(t, err)
	b, err = NewLock(newClient(t, db), name, WithOwner("b"))
	require.NoError(t, err)
	return a, b, newClient(t, db)
}

// The answer to the Commit of an Unlock is lost: Unlock settles it by
// reading the row and returns nil, and the lock is handed on exactly once:
// to the waiter, with the next token, or freed when nobody waits.
func TestFaultUnlockAnswerLost(t *testing.T) {
	t.Parallel() // waits out leases beside the other tests that do (own database)
	for _, code := range []codes.Code{codes.Unavailable, codes.DeadlineExceeded} {
		for _, waiter := range []bool{true, false} {
			t.Run(fmt.Sprintf("%v/waiter=%v", code, waiter), func(t *testing.T) {
				db := freshDatabase(t)
				name := "unlock-lost"
				in, err := faultinject.New(4, faultinject.Rule{Name: "unlock answer lost", Methods: []string{"Commit"},
					Action: faultinject.DropResponse, Probability: 1, Limit: 1, Codes: []codes.Code{code},
					Match: commitWrites(defaultTable, "State")}) // an unlock writes State; a renewal does not
				require.NoError(t, err)
				a, b, check := faultyAndPlainLocks(t, db, name, in)
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()

				la, err := a.Lock(ctx)
				require.NoError(t, err)
				got := make(chan *Lease, 1)
				if waiter {
					go func() {
						lb, err := b.Lock(ctx)
						assert.NoError(t, err)
						got <- lb
					}()
					waitFor(t, 20*time.Second, "b to queue", func() bool { return len(queued(t, check, name)) == 1 })
				}
				in.SetEnabled(true)
				require.NoError(t, a.Unlock(ctx), "Unlock settles a lost answer by reading the row")
				in.SetEnabled(false)
				assert.Equal(t, int64(1), in.Stats().Injected(faultinject.DropResponse), "the unlock's answer was lost")

				if waiter {
					lb := <-got
					require.NotNil(t, lb)
					assert.Equal(t, la.Token()+1, lb.Token(), "handed on once, with the next token")
					st := inspectOne(t, check, name)
					assert.Equal(t, StateStarted, st.State)
					assert.Equal(t, "b", st.Owner)
					assert.Equal(t, la.Token()+1, st.Token)
					require.NoError(t, b.Unlock(ctx))
				} else {
					st := inspectOne(t, check, name)
					assert.Equal(t, StateNeeded, st.State, "freed")
					assert.Equal(t, la.Token(), st.Token)
				}
				assert.Empty(t, queued(t, check, name))
				// The lock still works, and its tokens go on from where they were.
				lb, err := b.TryLock(ctx)
				require.NoError(t, err)
				want := la.Token() + 1
				if waiter {
					want++
				}
				assert.Equal(t, want, lb.Token())
				require.NoError(t, b.Unlock(ctx))
			})
		}
	}
}

// A holder is cut off from Spanner (its process paused, say) while the
// commit of one of its Guard-ed writes is in flight. Its section's ctx is
// cancelled with ErrLeaseLost; another contender takes over after the
// lease and writes; when the old holder comes back, its late commit and
// every write it attempts are rejected, and it learns its lease was lost.
func TestFaultPausedHolderWritesAreRejected(t *testing.T) {
	db := freshDatabase(t, historyDDL)
	const lease = time.Second
	var cutOff atomic.Bool
	in, err := faultinject.New(5,
		faultinject.Rule{Name: "late write held", Methods: []string{"Commit"}, Action: faultinject.Hold,
			Probability: 1, Skip: 1, Match: commitWrites("History", "")},
		faultinject.Rule{Name: "cut off", Action: faultinject.Fail, Probability: 1,
			Match: func(string, any) bool { return cutOff.Load() }},
	)
	require.NoError(t, err)
	ca := faultyClients(t, db, in, 1)[0]
	cb := newClient(t, db)
	a, err := New(ca, "paused", WithOwner("a"), WithLease(lease), WithJitter(0))
	require.NoError(t, err)
	b, err := New(cb, "paused", WithOwner("b"), WithLease(lease), WithJitter(0))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()

	ha := startHolder(t, a)
	la := ha.acquired(t)
	require.NoError(t, guardedWrite(ctx, ca, la), "the holder's first write commits")
	late := make(chan error, 1)
	go func() { late <- guardedWrite(context.Background(), ca, la) }()
	waitFor(t, 20*time.Second, "the late write's commit to be in flight", func() bool { return in.Stats().Injected(faultinject.Hold) == 1 })
	cutOff.Store(true)

	select {
	case cause := <-ha.lost:
		assert.ErrorIs(t, cause, ErrLeaseLost, "the section's ctx is cancelled with a lease-lost cause")
	case <-time.After(30 * time.Second):
		t.Fatal("the cut-off holder's section ctx was not cancelled")
	}
	assert.ErrorIs(t, la.Err(), ErrLeaseLost)

	hb := startHolder(t, b)
	lb := hb.acquired(t)
	assert.True(t, lb.TookOver())
	assert.Equal(t, la.Token()+1, lb.Token())
	require.NoError(t, guardedWrite(ctx, cb, lb))
	rb := hb.result(t)
	require.NoError(t, rb.err)
	assert.Equal(t, Executed, rb.outcome)

	// The old holder comes back: its in-flight commit goes out now.
	cutOff.Store(false)
	in.Release()
	select {
	case err := <-late:
		assert.ErrorIs(t, err, ErrLeaseLost, "the late commit is rejected")
	case <-time.After(30 * time.Second):
		t.Fatal("the late write did not return")
	}
	assert.ErrorIs(t, guardedWrite(ctx, ca, la), ErrLeaseLost, "a write attempted after coming back is rejected")
	ra := ha.result(t)
	assert.Equal(t, Executed, ra.outcome)
	assert.ErrorIs(t, ra.err, ErrLeaseLost, "the old holder learns that its lease was lost instead of recording DONE")

	h := readHistory(t, cb)
	assert.Equal(t, []int64{la.Token(), lb.Token()}, historyTokens(h), "one write per holder; the late one was rejected")
	st := inspectOne(t, cb, "paused")
	assert.Equal(t, StateDone, st.State)
	assert.Equal(t, lb.Token(), st.Token)
	t.Logf("faults injected: %v", in.Stats())
}

// afterDroppedCommit returns two faultinject rules for a network blip: the
// answer to the first Commit that writes table (column, if not "") is lost
// with DEADLINE_EXCEEDED, and the next stream call (a query or key read) made after it
// fails with DEADLINE_EXCEEDED before it is sent. The read (query or key read) that would
// settle the lost answer so fails too.
func afterDroppedCommit(table, column string) []faultinject.Rule {
	var armed atomic.Bool
	writes := commitWrites(table, column)
	return []faultinject.Rule{
		{Name: "commit answer lost", Methods: []string{"Commit"}, Action: faultinject.DropResponse, Probability: 1, Limit: 1,
			Codes: []codes.Code{codes.DeadlineExceeded},
			Match: func(method string, req any) bool {
				if !writes(method, req) {
					return false
				}
				armed.Store(true)
				return true
			}},
		{Name: "next read fails", Methods: []string{"ExecuteStreamingSql", "StreamingRead"}, Action: faultinject.Fail, Probability: 1, Limit: 1,
			Codes: []codes.Code{codes.DeadlineExceeded},
			Match: func(string, any) bool { return armed.Load() }},
	}
}

// An Unlock whose commit answer is lost and whose settling read fails too
// tries the unlock again; that finds the lock handed on (by its own first
// try) and must not be reported as a lost lease: the lease was never lost.
func TestFaultUnlockAnswerLostThenReadFails(t *testing.T) {
	t.Parallel() // waits out leases beside the other tests that do (own database)
	db := freshDatabase(t)
	name := "unlock-blip"
	in, err := faultinject.New(6, afterDroppedCommit(defaultTable, "State")...)
	require.NoError(t, err)
	a, b, check := faultyAndPlainLocks(t, db, name, in)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	la, err := a.Lock(ctx)
	require.NoError(t, err)
	got := make(chan *Lease, 1)
	go func() {
		lb, err := b.Lock(ctx)
		assert.NoError(t, err)
		got <- lb
	}()
	waitFor(t, 20*time.Second, "b to queue", func() bool { return len(queued(t, check, name)) == 1 })

	in.SetEnabled(true)
	err = a.Unlock(ctx)
	in.SetEnabled(false)
	st := in.Stats()
	require.Equal(t, int64(1), st.Rules[0].Injected, "the unlock's answer was lost: %v", st)
	require.Equal(t, int64(1), st.Rules[1].Injected, "the settling read failed: %v", st)
	lb := <-got
	require.NotNil(t, lb)
	assert.Equal(t, la.Token()+1, lb.Token(), "the lock was handed on once, by the first try")
	assert.NoError(t, err, "Unlock reports a lost lease although nobody took the lock over: its own first try handed it on")
	require.NoError(t, b.Unlock(ctx))
}

// A waiter's join whose commit answer is lost and whose settling look-up
// fails too joins again: its id is now queued twice. It is handed the lock
// through the older entry; its own Unlock must then not hand the lock to
// its other entry, that is to itself, leaving a holder that nobody is and
// that blocks everyone for a lease.
func TestFaultLostJoinAnswerThenLookUpFails(t *testing.T) {
	db := freshDatabase(t)
	name := "join-blip"
	queueTable := defaultTable + "Queue"
	in, err := faultinject.New(7, afterDroppedCommit(queueTable, "")...)
	require.NoError(t, err)
	cw := faultyClients(t, db, in, 1)[0]
	check := newClient(t, db)
	h, err := NewLock(check, name, WithOwner("holder"))
	require.NoError(t, err)
	w, err := NewLock(cw, name, WithOwner("w"))
	require.NoError(t, err)
	x, err := NewLock(newClient(t, db), name, WithOwner("x"))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	lh, err := h.Lock(ctx)
	require.NoError(t, err)
	got := make(chan *Lease, 1)
	go func() {
		lw, err := w.Lock(ctx)
		assert.NoError(t, err)
		got <- lw
	}()
	waitFor(t, 20*time.Second, "the waiter to join (twice, after the blip)", func() bool {
		return in.Stats().Rules[1].Injected == 1 && len(queued(t, check, name)) == 2
	})
	in.SetEnabled(false)
	t.Logf("queue after the blip: %v; faults: %v", queued(t, check, name), in.Stats())

	require.NoError(t, h.Unlock(ctx))
	lw := <-got
	require.NotNil(t, lw)
	assert.Equal(t, lh.Token()+1, lw.Token())
	require.NoError(t, w.Unlock(ctx))

	st := inspectOne(t, check, name)
	assert.Equal(t, StateNeeded, st.State, "after the only waiter unlocked, the lock is free; the row shows %s, owner %q, token %d", st.State, st.Owner, st.Token)
	assert.Empty(t, queued(t, check, name))
	_, err = x.TryLock(ctx)
	assert.NoError(t, err, "the lock is free for the next contender")
	if err == nil {
		require.NoError(t, x.Unlock(ctx))
	}
}

// A Spanner read that fails once with a transient error costs Run a retry,
// wherever it happens: MaxAttempts bounds "failed Spanner reads in a row".
// The first read of a Mutex is its schema check.
func TestFaultTransientErrorOnFirstRead(t *testing.T) {
	for _, skip := range []int{0, 1} {
		what := map[int]string{0: "schema check", 1: "first read of the row"}[skip]
		t.Run(what, func(t *testing.T) {
			db := freshDatabase(t)
			in, err := faultinject.New(8, faultinject.Rule{Name: "read fails once", Methods: []string{"ExecuteStreamingSql", "StreamingRead"},
				Action: faultinject.Fail, Probability: 1, Skip: skip, Limit: 1, Codes: []codes.Code{codes.DeadlineExceeded}})
			require.NoError(t, err)
			c := faultyClients(t, db, in, 1)[0]
			m, err := New(c, "transient")
			require.NoError(t, err)
			out, err := m.Run(context.Background(), func(context.Context, *Lease) error { return nil })
			assert.Equal(t, int64(1), in.Stats().Injected(faultinject.Fail))
			assert.NoError(t, err, "one failed read with %d attempts allowed", defaultMaxAttempts)
			assert.Equal(t, Executed, out)
		})
	}
}

// Spanner is not running (nothing listens where the client connects): Run,
// Lock and Inspect give up when their ctx ends, write nothing, and say why
// in a way that points at the cause: that Spanner could not be reached.
func TestFaultSpannerNotRunning(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: waits out three deadlines")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close()) // nothing listens there now
	c, err := spanner.NewClientWithConfig(context.Background(), "projects/spanmutex-test/instances/spanmutex/databases/nowhere",
		spanner.ClientConfig{DisableNativeMetrics: true},
		option.WithEndpoint("passthrough:///"+addr),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
		option.WithoutAuthentication(), internaloption.SkipDialSettingsValidation())
	require.NoError(t, err, "opening a client does not connect")
	t.Cleanup(c.Close)
	const wait = 2 * time.Second
	// clear reports whether err names the cause rather than a symptom.
	clear := func(err error) bool {
		msg := strings.ToLower(err.Error())
		return strings.Contains(msg, "unavailable") || strings.Contains(msg, "connection refused") ||
			strings.Contains(msg, "reach") || strings.Contains(msg, addr)
	}
	calls := []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"Mutex.Run", func(ctx context.Context) error {
			m, err := New(c, "x")
			require.NoError(t, err)
			out, err := m.Run(ctx, func(context.Context, *Lease) error { t.Error("ran"); return nil })
			assert.Equal(t, NoOutcome, out)
			return err
		}},
		{"Lock.Lock", func(ctx context.Context) error {
			l, err := NewLock(c, "x")
			require.NoError(t, err)
			lease, err := l.Lock(ctx)
			assert.Nil(t, lease)
			return err
		}},
		{"Inspect", func(ctx context.Context) error {
			_, err := Inspect(ctx, c, "")
			return err
		}},
	}
	for _, tc := range calls {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // each waits out its deadline; none touches the others
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			began := time.Now()
			err := tc.call(ctx)
			took := time.Since(began)
			require.Error(t, err)
			t.Logf("after %v: %v", took.Round(time.Millisecond), err)
			assert.Less(t, took, wait+5*time.Second, "it gives up when ctx ends")
			assert.True(t, clear(err), "the error says that Spanner at %s could not be reached, not only that time ran out: %q", addr, err)
		})
	}
}
