package history_test

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/option"
	"google.golang.org/grpc"

	"github.com/spanmutex/spanmutex"
	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/internal/faultinject"
	"github.com/spanmutex/spanmutex/internal/history"
)

// writesTable is the table of guarded writes in the tests' databases.
const writesTable = "Writes"

// lease is short, so that a silenced holder is taken over quickly.
const lease = time.Second

// openClient opens a Spanner client of db for workload client id, with the
// renewal observer and, if silenced is not nil, a fault that fails every
// call while silenced is set: the process is cut off, as if paused.
func openClient(t *testing.T, db string, rec *history.Recorder, id string, silenced *atomic.Bool) *history.Client {
	t.Helper()
	var opts []option.ClientOption
	if silenced != nil {
		in, err := faultinject.New(1, faultinject.Rule{Name: "silence", Action: faultinject.Fail, Probability: 1,
			Match: func(string, any) bool { return silenced.Load() }})
		require.NoError(t, err)
		opts = append(opts, in.ClientOptions()...)
	}
	opts = append(opts, option.WithGRPCDialOption(grpc.WithChainUnaryInterceptor(rec.RenewalObserver(id, ddl.DefaultMutexTable))))
	c, err := emu.NewClient(context.Background(), db, opts...)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return &history.Client{ID: id, Spanner: c, Rec: rec, Writes: writesTable}
}

// unfenced is a deliberately broken lock for the checker to catch: its
// holders' "guarded" writes skip Lease.Guard and trust the holder's belief
// that it still holds the lock.
func unfenced(*spanmutex.Lease) history.Guard {
	return func(context.Context, *spanner.ReadWriteTransaction) error { return nil }
}

// fenced is the real thing.
func fenced(l *spanmutex.Lease) history.Guard { return l.Guard }

// pausedHolder runs the scenario fencing exists for, against the emulator:
// holder A writes, is cut off past the lease, B takes the lock over and
// writes, then A comes back and, still believing it holds the lock, writes
// again with guard. It returns the checked history and what A's late write
// returned.
func pausedHolder(t *testing.T, guard func(*spanmutex.Lease) history.Guard) (*history.Report, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, err := emu.NewDatabase(ctx, history.WritesDDL(writesTable))
	require.NoError(t, err)
	rec := history.NewRecorder()
	var silenced atomic.Bool
	a, b := openClient(t, db, rec, "A", &silenced), openClient(t, db, rec, "B", nil)
	lock := func(c *history.Client) *spanmutex.Lock {
		l, err := spanmutex.NewLock(c.Spanner, "L", spanmutex.WithOwner(c.ID), spanmutex.WithLease(lease),
			spanmutex.WithMaxFailures(1000))
		require.NoError(t, err)
		return l
	}
	lockA, lockB := lock(a), lock(b)

	leaseA, err := a.Lock(ctx, "L", lockA, false)
	require.NoError(t, err)
	require.NoError(t, a.Write(ctx, leaseA, "L", guard(leaseA)))

	silenced.Store(true)
	type locked struct {
		lease *spanmutex.Lease
		err   error
	}
	got := make(chan locked, 1)
	go func() {
		l, err := b.Lock(ctx, "L", lockB, false)
		got <- locked{l, err}
	}()
	var leaseB *spanmutex.Lease
	select {
	case r := <-got:
		require.NoError(t, r.err)
		leaseB = r.lease
	case <-ctx.Done():
		t.Fatal("B never took the lock over from the silenced A")
	}
	require.True(t, leaseB.TookOver())
	require.NoError(t, b.Write(ctx, leaseB, "L", guard(leaseB)))
	select {
	case <-leaseA.Done(): // A's renewals failed for a lease: it knows, and writes anyway
	case <-ctx.Done():
		t.Fatal("A's lease was never declared lost")
	}

	silenced.Store(false)
	errA := a.Write(ctx, leaseA, "L", guard(leaseA))
	require.NoError(t, b.Unlock(ctx, lockB, leaseB))
	assert.ErrorIs(t, a.Unlock(ctx, lockA, leaseA), spanmutex.ErrLeaseLost)

	ops := rec.Ops()
	rb, err := history.ReadBack(ctx, b.Spanner, writesTable, "", ops)
	require.NoError(t, err)
	rep := history.Check(ops, history.Config{Lease: lease, Readback: rb, VisualizeDir: t.TempDir()})
	var out bytes.Buffer
	rep.Write(&out)
	t.Logf("the checked history:\n%s", out.String())
	return rep, errA
}

// With Lease.Guard, the paused holder's late write is refused, and the
// history passes every check.
func TestFencedPausedHolderPasses(t *testing.T) {
	needEmulator(t)
	rep, late := pausedHolder(t, fenced)
	assert.ErrorIs(t, late, spanmutex.ErrLeaseLost)
	assert.True(t, rep.OK())
	assert.Equal(t, 1, rep.Takeovers)
	assert.Equal(t, 1, rep.StaleWritesRefused, "A's late write was refused by Guard")
	assert.Equal(t, 2, rep.Checked[history.CheckResourceTokens], "the two writes that committed")
}

// Without the fence, the paused holder's late write commits after the
// takeover, and the checker reports it three ways: no linearization,
// overlapping holders by commit timestamps, a stale token on the resource.
func TestBrokenFencingIsCaught(t *testing.T) {
	needEmulator(t)
	rep, late := pausedHolder(t, unfenced)
	require.NoError(t, late, "the unfenced late write commits")
	require.False(t, rep.OK())
	assert.Subset(t, rep.ChecksViolated(), []string{history.CheckLinearizable, history.CheckDisjoint, history.CheckResourceTokens})
	assert.Zero(t, rep.StaleWritesRefused)
	require.Len(t, rep.Visualizations, 1)
	assert.FileExists(t, rep.Visualizations[0])
}
