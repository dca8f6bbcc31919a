package spanmutex

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/cenkalti/backoff/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/emulator"
	"github.com/spanmutex/spanmutex/internal/faultinject"
	"github.com/spanmutex/spanmutex/internal/sqldialect"
)

// guardIn runs lease.Guard in a read-write transaction of c and returns its
// error.
func guardIn(t *testing.T, c *spanner.Client, lease *Lease) error {
	t.Helper()
	_, err := c.ReadWriteTransaction(context.Background(), func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
		return lease.Guard(ctx, tx)
	})
	return err
}

// Once its holder lets go of a lease (Unlock, or Run's section returned),
// Done is closed, Err says released, and Guard refuses saying so, not that
// the lease was taken over.
func TestLeaseEndsWhenReleased(t *testing.T) {
	needEmulator(t)
	c := newClient(t, freshDatabase(t))
	ctx := context.Background()
	cases := []struct {
		name string
		hold func(t *testing.T) *Lease // returns the lease after its release
	}{
		{"Unlock", func(t *testing.T) *Lease {
			l, err := NewLock(c, "released-lock")
			require.NoError(t, err)
			lease, err := l.Lock(ctx)
			require.NoError(t, err)
			require.NoError(t, guardIn(t, c, lease), "held")
			require.NoError(t, l.Unlock(ctx))
			return lease
		}},
		{"Run done", func(t *testing.T) *Lease { return runAndKeep(t, c, "released-done", nil) }},
		{"Run failed", func(t *testing.T) *Lease { return runAndKeep(t, c, "released-failed", errors.New("boom")) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			lease := tc.hold(t)
			select {
			case <-lease.Done():
			default:
				t.Fatal("Done is open after the release")
			}
			assert.ErrorIs(t, lease.Err(), ErrReleased)
			assert.NotErrorIs(t, lease.Err(), ErrLeaseLost)
			err := guardIn(t, c, lease)
			assert.ErrorIs(t, err, ErrReleased)
			assert.NotContains(t, err.Error(), "takeover")
			assert.Contains(t, err.Error(), "released")
		})
	}
}

// runAndKeep runs a section of name that returns fnErr, checks that its
// lease was held while it ran, and returns the lease.
func runAndKeep(t *testing.T, c *spanner.Client, name string, fnErr error) *Lease {
	t.Helper()
	m, err := New(c, name)
	require.NoError(t, err)
	var kept *Lease
	_, err = m.Run(context.Background(), func(ctx context.Context, lease *Lease) error {
		kept = lease
		assert.NoError(t, lease.Err())
		assert.NoError(t, guardIn(t, c, lease), "held")
		return fnErr
	})
	if fnErr == nil {
		require.NoError(t, err)
	} else {
		require.ErrorIs(t, err, fnErr)
	}
	return kept
}

// A call whose own ctx ended returns an error matching ctx.Err(), not an
// *unreachableError: Spanner was reachable (the emulator), or the caller
// cancelled before anything could be said about it.
func TestEndedContextIsNotUnreachable(t *testing.T) {
	needEmulator(t)
	calls := []struct {
		name string
		call func(ctx context.Context, c *spanner.Client) error
	}{
		{"Ping", Ping},
		{"Inspect", func(ctx context.Context, c *spanner.Client) error { _, err := Inspect(ctx, c, ""); return err }},
		{"Reset", func(ctx context.Context, c *spanner.Client) error {
			m, err := New(c, "ended-reset")
			if err != nil {
				return err
			}
			_, err = m.Reset(ctx)
			return err
		}},
		{"Run", func(ctx context.Context, c *spanner.Client) error {
			m, err := New(c, "ended-run")
			if err != nil {
				return err
			}
			_, err = m.Run(ctx, func(context.Context, *Lease) error { return nil })
			return err
		}},
		{"Lock", func(ctx context.Context, c *spanner.Client) error {
			l, err := NewLock(c, "ended-lock")
			if err != nil {
				return err
			}
			_, err = l.Lock(ctx)
			return err
		}},
	}
	ends := []struct {
		name string
		ctx  func() context.Context
		want error
	}{
		{"cancelled", func() context.Context {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx
		}, context.Canceled},
		{"deadline passed", func() context.Context {
			ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
			t.Cleanup(cancel)
			return ctx
		}, context.DeadlineExceeded},
	}
	db := freshDatabase(t)
	for _, call := range calls {
		for _, end := range ends {
			t.Run(call.name+"/"+end.name, func(t *testing.T) {
				err := call.call(end.ctx(), newClient(t, db)) // a new client: no call of it has succeeded yet
				require.ErrorIs(t, err, end.want)
				require.NotErrorIs(t, err, ErrUnreachable)
				requireOneLine(t, err)
			})
		}
	}
}

// A cancelled ctx is not reported as unreachable even where nothing
// listens: the caller stopped waiting.
func TestCancelledContextOnUnreachableEndpoint(t *testing.T) {
	c := unreachableClient(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := Ping(ctx, c)
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, ErrUnreachable)
	_, err = Inspect(ctx, c, "")
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, ErrUnreachable)
}

// A WithDialect that is not the database's fails on first use, uncontended
// too, naming both dialects, with nothing written; a right one is checked
// once per Scope.
func TestWrongDialectFailsOnFirstUse(t *testing.T) {
	eachDialect(t, func(t *testing.T, db string) {
		c := newClient(t, db)
		actual, err := sqldialect.Detect(context.Background(), c)
		require.NoError(t, err)
		wrong := ddl.PostgreSQL
		if actual == ddl.PostgreSQL {
			wrong = ddl.GoogleSQL
		}
		// Bounded: a wrong dialect that is not caught can make a call retry
		// until its ctx ends.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		calls := []struct {
			name string
			call func() error
		}{
			{"Lock", func() error { l := mustLock(t, c, WithDialect(wrong)); _, err := l.Lock(ctx); return err }},
			{"TryLock", func() error { l := mustLock(t, c, WithDialect(wrong)); _, err := l.TryLock(ctx); return err }},
			{"Run", func() error {
				m, err := New(c, "dialect", WithDialect(wrong))
				require.NoError(t, err)
				_, err = m.Run(ctx, func(context.Context, *Lease) error { t.Error("the section ran"); return nil })
				return err
			}},
			{"Reset", func() error {
				m, err := New(c, "dialect", WithDialect(wrong))
				require.NoError(t, err)
				_, err = m.Reset(ctx)
				return err
			}},
			{"Inspect", func() error { _, err := Inspect(ctx, c, "", WithDialect(wrong)); return err }},
			{"Campaign", func() error {
				e, err := NewElection(c, "dialect", WithDialect(wrong))
				require.NoError(t, err)
				_, err = e.Campaign(ctx, "v")
				return err
			}},
			{"Fence.Admit", func() error {
				f, err := NewFence(c, WithDialect(wrong))
				require.NoError(t, err)
				return f.Admit(ctx, "res", "dialect", 1)
			}},
		}
		for _, tc := range calls {
			t.Run(tc.name, func(t *testing.T) {
				err := tc.call()
				require.ErrorIs(t, err, ErrInvalidConfig)
				requireOneLine(t, err, "WithDialect(ddl."+goName(wrong)+")", "is "+goName(actual))
			})
		}
		assert.Empty(t, inspectAll(t, c), "nothing written to the mutex table")
		_, err = c.Single().ReadRow(ctx, defaultFenceTable, spanner.Key{"res"}, []string{"Token"})
		assert.ErrorIs(t, err, spanner.ErrRowNotFound, "nothing written to the fence table")

		scope := NewScope(WithoutWakeUps())
		a, b := mustLock(t, c, WithDialect(actual), WithScope(scope)), mustLock(t, c, WithDialect(actual), WithScope(scope))
		assert.Same(t, a.sp.dialect, b.sp.dialect, "the Locks of a Scope check the dialect once")
		for range 2 {
			_, err := a.Lock(ctx)
			require.NoError(t, err)
			require.NoError(t, a.Unlock(ctx))
		}
	})
}

// mustLock makes a Lock named "dialect" of c with opts.
// A declared dialect whose check fails (Spanner briefly refuses the read)
// does not end the Lock call: the call's first statement reads it again,
// and its failures are retried as any call's are.
func TestDialectCheckThatFailsIsRetried(t *testing.T) {
	eachDialect(t, func(t *testing.T, db string) {
		probe := newClient(t, db)
		actual, err := sqldialect.Detect(context.Background(), probe)
		require.NoError(t, err)
		in, err := faultinject.New(7, faultinject.Rule{Name: "dialect read refused", Methods: []string{"ExecuteStreamingSql"},
			Action: faultinject.Fail, Probability: 1, Limit: 1, Codes: []codes.Code{codes.ResourceExhausted}})
		require.NoError(t, err)
		c, err := emu.NewClient(context.Background(), db, in.ClientOptions()...)
		require.NoError(t, err)
		t.Cleanup(c.Close)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		l := mustLock(t, c, WithDialect(actual))
		_, err = l.Lock(ctx)
		require.NoError(t, err, "a failed dialect check ends the call")
		require.NoError(t, l.Unlock(ctx))
		assert.Equal(t, int64(1), in.Stats().Injected(faultinject.Fail), "the dialect read was refused once")
	})
}

func mustLock(t *testing.T, c *spanner.Client, opts ...LockOption) *Lock {
	t.Helper()
	l, err := NewLock(c, "dialect", opts...)
	require.NoError(t, err)
	return l
}

// inspectAll returns every row of the mutex table.
func inspectAll(t *testing.T, c *spanner.Client) []Record {
	t.Helper()
	rows, err := Inspect(context.Background(), c, "")
	require.NoError(t, err)
	return rows
}

// Admit refuses, with a one-line ErrInvalidConfig and nothing written,
// resources that are not printable UTF-8 and tokens below 1.
func TestFenceAdmitRefusesBadInput(t *testing.T) {
	needEmulator(t)
	c := newClient(t, freshDatabase(t))
	f, err := NewFence(c)
	require.NoError(t, err)
	cases := []struct {
		name, resource string
		token          int64
		want           string
	}{
		{"NUL", "a\x00b", 1, "control character"},
		{"newline", "a\nb", 1, "control character"},
		{"invalid UTF-8", "a\xffb", 1, "not valid UTF-8"},
		{"empty", "", 1, "empty"},
		{"too long", strings.Repeat("é", 1025), 1, "at most 1024"},
		{"token 0", "res", 0, "tokens start at 1"},
		{"token -5", "res", -5, "tokens start at 1"},
	}
	ctx := context.Background()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := f.Admit(ctx, tc.resource, "lock", tc.token)
			require.ErrorIs(t, err, ErrInvalidConfig)
			requireOneLine(t, err, tc.want)
			_, err = c.ReadWriteTransaction(ctx, func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
				return f.AdmitTx(ctx, tx, tc.resource, "lock", tc.token)
			})
			require.ErrorIs(t, err, ErrInvalidConfig)
		})
	}
	n := 0
	require.NoError(t, c.Single().Read(ctx, defaultFenceTable, spanner.AllKeys(), []string{"Resource"}).Do(func(*spanner.Row) error { n++; return nil }))
	assert.Zero(t, n, "nothing written")
	require.NoError(t, f.Admit(ctx, "res", "lock", 1), "a good resource is admitted")
}

// The zero values of the primitives, and nil pointers, return errors that
// name the constructor instead of panicking.
func TestZeroValuesSayWhichConstructor(t *testing.T) {
	ctx := context.Background()
	var nilLock *Lock
	var nilMutex *Mutex
	var nilElection *Election
	var nilFence *Fence
	var nilLease *Lease
	cases := []struct {
		name, ctor string
		call       func() error
	}{
		{"Lock{}.Lock", "NewLock", func() error { _, err := (&Lock{}).Lock(ctx); return err }},
		{"Lock{}.TryLock", "NewLock", func() error { _, err := (&Lock{}).TryLock(ctx); return err }},
		{"Lock{}.Unlock", "NewLock", func() error { return (&Lock{}).Unlock(ctx) }},
		{"nil Lock", "NewLock", func() error { _, err := nilLock.Lock(ctx); return err }},
		{"Mutex{}.Run", "New", func() error {
			_, err := (&Mutex{}).Run(ctx, func(context.Context, *Lease) error { return nil })
			return err
		}},
		{"Mutex{}.Reset", "New", func() error { _, err := (&Mutex{}).Reset(ctx); return err }},
		{"nil Mutex", "New", func() error { _, err := nilMutex.Reset(ctx); return err }},
		{"Election{}.Campaign", "NewElection", func() error { _, err := (&Election{}).Campaign(ctx, "v"); return err }},
		{"Election{}.Leader", "NewElection", func() error { _, err := (&Election{}).Leader(ctx); return err }},
		{"nil Election", "NewElection", func() error {
			return nilElection.Run(ctx, "v", LeaderCallbacks{OnStartedLeading: func(context.Context) {}})
		}},
		{"Fence{}.Admit", "NewFence", func() error { return (&Fence{}).Admit(ctx, "r", "lock", 1) }},
		{"nil Fence", "NewFence", func() error { return nilFence.AdmitTx(ctx, nil, "r", "lock", 1) }},
		{"nil Lease.Err", "Lock.Lock", nilLease.Err},
		{"nil Lease.Guard", "Lock.Lock", func() error { return nilLease.Guard(ctx, nil) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			require.ErrorIs(t, err, ErrInvalidConfig)
			requireOneLine(t, err, tc.ctor)
		})
	}
	assert.Empty(t, nilLease.Name()+nilLease.Owner())
	assert.Zero(t, nilLease.Token())
	<-nilLease.Done() // closed
	_, open := <-(&Election{}).Observe(ctx)
	assert.False(t, open)
}

// ForceReset breaks a live-looking lease that Reset refuses: the evicted
// holder's Guard fails at once, its Unlock leaves the new holder alone,
// and the next Lock gets a token above the bumped one; the result says
// whom it evicted.
func TestForceResetEvictsAndFences(t *testing.T) {
	eachDialect(t, func(t *testing.T, db string) {
		c := newClient(t, db)
		ctx := context.Background()
		old, err := NewLock(c, "forced", WithOwner("dead"), WithLease(maxLease))
		require.NoError(t, err)
		lease, err := old.Lock(ctx)
		require.NoError(t, err)
		m, err := New(c, "forced", WithLease(time.Second))
		require.NoError(t, err)

		_, err = m.Reset(ctx)
		require.ErrorIs(t, err, ErrResetRefused, "a live-looking holder is never reset without force")
		assert.ErrorContains(t, err, "force")
		res, err := m.ForceReset(ctx)
		require.NoError(t, err)
		assert.Equal(t, ResetResult{Before: StateStarted, Token: lease.Token(), Evicted: "dead", Forced: true}, res)

		assert.ErrorIs(t, guardIn(t, c, lease), ErrLeaseLost, "the evicted holder's Guard fails")
		next, err := NewLock(c, "forced", WithOwner("next"))
		require.NoError(t, err)
		nl, err := next.Lock(ctx)
		require.NoError(t, err)
		assert.Greater(t, nl.Token(), lease.Token()+1, "the token was bumped past the evicted one")
		assert.ErrorIs(t, old.Unlock(ctx), ErrLeaseLost, "the evicted holder's Unlock is fenced")
		assert.NoError(t, guardIn(t, c, nl), "and left the new holder alone")
		require.NoError(t, next.Unlock(ctx))

		_, err = m.ForceReset(ctx)
		require.NoError(t, err, "a NEEDED row is reset, nobody evicted")
	})
}

// Schema problems are *SchemaErrors that say what to do, in both dialects:
// a table named in another case (the same table in GoogleSQL, another one
// in PostgreSQL), a Lock's missing queue table, and a column of the
// table's that every insert must write.
func TestSchemaHintsDoNotMislead(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.String(), func(t *testing.T) {
			stmts, err := d.Statements("NoQueue")
			require.NoError(t, err)
			extra, err := d.Statements("Extra")
			require.NoError(t, err)
			col := "Extra INT64 NOT NULL, "
			if d == ddl.PostgreSQL {
				col = `"Extra" bigint NOT NULL, `
			}
			i := strings.Index(extra[0], "(") + 1
			c := newClient(t, freshDatabaseIn(t, d, stmts[0], extra[0][:i]+col+extra[0][i:], extra[1]))
			lock := func(table string) error {
				l, err := NewLock(c, "hint-lock", WithTable(table))
				require.NoError(t, err)
				if _, err = l.Lock(context.Background()); err != nil {
					return err
				}
				return l.Unlock(context.Background())
			}
			run := func(table string) error {
				m, err := New(c, "hint-run", WithTable(table))
				require.NoError(t, err)
				_, err = m.Run(context.Background(), func(context.Context, *Lease) error { return nil })
				return err
			}
			cases := []struct {
				name, table string
				call        func(table string) error
				want        []string // in the error; none: it works
			}{
				// A Lock on PostgreSQL finds it at its first SQL statement
				// (contention), a Mutex at once (its schema check).
				{"table in lower case", "mutexes", run, map[ddl.Dialect][]string{
					ddl.PostgreSQL: {"table mutexes: does not exist", "but Mutexes does", "case-sensitive", "--table Mutexes"}}[d]},
				{"no queue table", "NoQueue", lock, []string{"NoQueueQueue, which a Lock needs, does not exist", "spanmutex ddl", "--table NoQueue"}},
				{"extra NOT NULL column, Lock", "Extra", lock, []string{"NOT NULL with no default", "Extra", "DEFAULT"}},
				{"extra NOT NULL column, Run", "Extra", run, []string{"NOT NULL with no default", "Extra", "DEFAULT"}},
			}
			if d == ddl.GoogleSQL {
				cases = append(cases, struct {
					name, table string
					call        func(table string) error
					want        []string
				}{"Lock in lower case", "mutexes", lock, nil})
			}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					err := tc.call(tc.table)
					if tc.want == nil {
						require.NoError(t, err)
						return
					}
					require.ErrorIs(t, err, ErrSchema)
					requireOneLine(t, err, tc.want...)
					assert.NotContains(t, err.Error(), "create the schema with")
				})
			}
		})
	}
}

// Concurrent Runs that all fail each learn, from the row their own
// acquisition committed, which attempt they had: the attempts are 1 to
// MaxAttempts, each once, so only one of them can say it was the last;
// the rest give up.
func TestFailedRunsSeeTheirOwnAttempt(t *testing.T) {
	needEmulator(t)
	db := freshDatabase(t)
	const runs, maxAttempts = 5, 3
	var wg sync.WaitGroup
	errs := make(chan error, runs)
	for range runs {
		m, err := New(newClient(t, db), "attempts", WithMaxAttempts(maxAttempts),
			WithBackOff(func() backoff.BackOff { return backoff.NewConstantBackOff(10 * time.Millisecond) }))
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := m.Run(context.Background(), func(context.Context, *Lease) error { return errors.New("boom") })
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	var attempts []int64
	exhausted := 0
	for err := range errs {
		var se *SectionError
		switch {
		case errors.As(err, &se):
			attempts = append(attempts, se.Attempt)
		case errors.Is(err, ErrAttemptsExhausted):
			exhausted++
		default:
			t.Errorf("unexpected error: %v", err)
		}
	}
	slices.Sort(attempts)
	assert.Equal(t, []int64{1, 2, 3}, attempts)
	assert.Equal(t, runs-maxAttempts, exhausted)
}

// A deadline that passes while an endpoint accepts connections but never
// answers is still diagnosed, as Ping is for, and matches the deadline too;
// the same endpoint with the ctx cancelled is reported as cancelled.
func TestSilentEndpointAtTheDeadline(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	accepted := make(chan []net.Conn, 1)
	go func() {
		var conns []net.Conn // held open, never answered
		for {
			conn, err := ln.Accept()
			if err != nil {
				accepted <- conns
				return
			}
			conns = append(conns, conn)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		for _, c := range <-accepted {
			c.Close()
		}
	})
	t.Setenv(emulator.HostEnv, ln.Addr().String())
	c, err := spanner.NewClientWithConfig(context.Background(), "projects/p/instances/i1/databases/d1",
		spanner.ClientConfig{SessionPoolConfig: spanner.DefaultSessionPoolConfig, DisableNativeMetrics: true})
	require.NoError(t, err)
	t.Cleanup(c.Close)

	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	err = Ping(ctx, c)
	require.ErrorIs(t, err, ErrUnreachable)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	requireOneLine(t, err, "accepts connections but Spanner did not answer")

	cctx, ccancel := context.WithCancel(context.Background())
	time.AfterFunc(1500*time.Millisecond, ccancel)
	err = Ping(cctx, c)
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, ErrUnreachable)
}
