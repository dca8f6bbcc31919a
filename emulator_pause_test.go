//go:build unix

package spanmutex

import (
	"context"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/spanmutex/spanmutex/emulator"
)

// TestEmulatorPause freezes Spanner itself: the emulator process is stopped
// with SIGSTOP for three leases while a holder runs its section and two
// contenders wait, then continued.
//
// What can be asserted, and why:
//
//   - The holder's section ctx is cancelled with ErrLeaseLost during the
//     pause. Its renewals cannot reach Spanner, and keepAlive declares the
//     lease lost one lease after the send time of the last acknowledged
//     renewal, measured on the local monotonic clock: a decision that needs
//     no answer from Spanner.
//   - The fencing holds: in commit-timestamp order, no Guard-ed write by the
//     old token commits after a write by the new one, and a write the old
//     holder attempts after the takeover is rejected.
//   - One contender completes the section, with token 2, and the row ends
//     DONE.
//
// What cannot be asserted: the emulator's clock is the machine's, so it
// advanced through the pause, and when the emulator resumes the row has
// already been silent for longer than the lease by Spanner's clock. The
// contenders may so take over at once, with no lease between the old
// holder's last write and the takeover; only the holder's own local timer
// kept the two apart, which is why the first assertion matters. Requests
// that were in the emulator's socket when it stopped are served when it
// resumes, after their callers gave up on them: so the old holder may still
// record FAILED (if it reaches the row before a contender does; the
// contender then retries the section instead of taking it over), and a
// write whose caller saw it cancelled may still commit, ordered before the
// takeover. Neither TookOver nor the number of the old holder's writes is
// therefore fixed.
func TestEmulatorPause(t *testing.T) {
	t.Parallel() // an emulator of its own, paused: it waits beside the other waiting tests
	needEmulator(t)
	bin, err := emulator.FindBinary()
	if err != nil {
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	own, err := emulator.Start(ctx, emulator.WithBinary(bin), emulator.WithDDL(historyDDL))
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, own.Close()) })
	pid := own.PID()
	require.NotZero(t, pid, "an emulator of our own, which we may pause")
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })

	const (
		lease = 2 * time.Second
		pause = 3 * lease
		name  = "paused-emulator"
	)
	client := func() *spanner.Client {
		c, err := own.NewClient(ctx, own.Database())
		require.NoError(t, err)
		t.Cleanup(c.Close)
		return c
	}
	ca := client()
	a, err := New(ca, name, WithOwner("a"), WithLease(lease))
	require.NoError(t, err)

	// The holder writes, fenced, every 100ms until its ctx ends.
	var (
		leaseA   = make(chan *Lease, 1)
		lostA    = make(chan error, 1) // the section ctx's cause, once it ends
		writesA  atomic.Int32
		resultA  = make(chan contenderResult, 1)
		pausedAt time.Time
	)
	go func() {
		out, err := a.Run(ctx, func(sctx context.Context, l *Lease) error {
			leaseA <- l
			for {
				if err := guardedWrite(sctx, ca, l); err == nil {
					writesA.Add(1)
				}
				timer := time.NewTimer(100 * time.Millisecond)
				select {
				case <-timer.C:
				case <-sctx.Done():
					timer.Stop()
					lostA <- context.Cause(sctx)
					return context.Cause(sctx)
				}
			}
		})
		resultA <- contenderResult{out, err}
	}()
	var la *Lease
	select {
	case la = <-leaseA:
	case r := <-resultA:
		t.Fatalf("the holder ended before acquiring: %v %v", r.outcome, r.err)
	}
	waitFor(t, 30*time.Second, "the holder to make three writes", func() bool { return writesA.Load() >= 3 })

	// Two contenders wait for the section (their reads will hang in the pause).
	var (
		wg      sync.WaitGroup
		results = make([]contenderResult, 2)
		leases  = make([]*Lease, 2)
	)
	for i, owner := range []string{"b", "c"} {
		c := client()
		m, err := New(c, name, WithOwner(owner), WithLease(lease))
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := m.Run(ctx, func(sctx context.Context, l *Lease) error {
				leases[i] = l
				for range 3 {
					if err := guardedWrite(sctx, c, l); err != nil {
						return err
					}
				}
				return nil
			})
			results[i] = contenderResult{out, err}
		}()
	}

	require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
	pausedAt = time.Now()
	resume := time.NewTimer(pause)
	select {
	case cause := <-lostA:
		t.Logf("the holder's section ctx was cancelled %v into the pause", time.Since(pausedAt).Round(time.Millisecond))
		assert.ErrorIs(t, cause, ErrLeaseLost)
		assert.ErrorIs(t, la.Err(), ErrLeaseLost)
	case <-resume.C:
		t.Errorf("the holder's section ctx was not cancelled during a pause of %v (lease %v)", pause, lease)
	}
	<-resume.C
	require.NoError(t, syscall.Kill(pid, syscall.SIGCONT))
	resumedAt := time.Now()

	ra := <-resultA
	wg.Wait()
	t.Logf("after the resume, everyone returned within %v; the holder made %d acknowledged writes", time.Since(resumedAt).Round(time.Millisecond), writesA.Load())
	assert.Equal(t, Executed, ra.outcome)
	assert.ErrorIs(t, ra.err, ErrLeaseLost, "the holder's Run reports the lost lease")
	executed := 0
	for i, r := range results {
		switch {
		case r.err == nil && r.outcome == Executed:
			executed++
			assert.Equal(t, la.Token()+1, leases[i].Token())
			t.Logf("contender %d completed the section with token %d (took over: %v)", i, leases[i].Token(), leases[i].TookOver())
		case r.err == nil && r.outcome == AlreadyDone:
		default:
			t.Errorf("contender %d: %v, %v", i, r.outcome, r.err)
		}
	}
	assert.Equal(t, 1, executed, "one contender completes the section")

	cc := client()
	st := inspectOne(t, cc, name)
	assert.Equal(t, StateDone, st.State)
	assert.Equal(t, la.Token()+1, st.Token)
	assert.ErrorIs(t, guardedWrite(ctx, ca, la), ErrLeaseLost, "a write the old holder attempts after the resume is rejected")

	h := readHistory(t, cc) // fails the test if an old token wrote after a newer one
	tokens := map[int64]int{}
	for _, e := range h {
		tokens[e.Token]++
	}
	assert.GreaterOrEqual(t, tokens[la.Token()], int(writesA.Load()), "every write acknowledged to the old holder committed")
	assert.Equal(t, 3, tokens[la.Token()+1], "the new holder's three writes")
	assert.Len(t, tokens, 2)
	t.Logf("history: %v writes per token", tokens)
}
