//go:build unix

package spanmutex

// The self-driven roles of contender processes (process_child_test.go).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/spanner"
)

// Files of the counter role, in spec.Dir.
const (
	counterFile   = "counter"
	counterTokens = "tokens.log"
)

// runCounter takes the lock spec.Count times with one Lock, and each time,
// while holding it, increments the number in spec.Dir/counter and appends
// the lease's token to spec.Dir/tokens.log. Any error ends the role.
func runCounter(ctx context.Context, client *spanner.Client, spec procSpec, out *eventWriter) error {
	l, err := NewLock(client, spec.Lock, spec.options(spec.ID)...)
	if err != nil {
		return err
	}
	for call := 1; call <= spec.Count; call++ {
		start := time.Now()
		lctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		lease, err := l.Lock(lctx)
		cancel()
		out.emit(leaseEvent("lock", call, lease, start, err))
		if err != nil {
			return err
		}
		start = time.Now()
		err = increment(spec.Dir, lease.Token())
		out.emit(leaseEvent("count", call, lease, start, err))
		start = time.Now()
		uerr := l.Unlock(ctx)
		out.emit(leaseEvent("unlock", call, lease, start, uerr))
		if err = errors.Join(err, uerr); err != nil {
			return err
		}
	}
	return nil
}

// increment reads the counter in dir (0 if absent), writes it back plus one,
// and appends token to the token log: a read-modify-write that loses counts
// unless its callers exclude each other.
func increment(dir string, token int64) error {
	path := filepath.Join(dir, counterFile)
	b, err := os.ReadFile(path)
	n := 0
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	default:
		if n, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil {
			return fmt.Errorf("counter file: %w", err)
		}
	}
	if err := os.WriteFile(path, []byte(strconv.Itoa(n+1)), 0o644); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(dir, counterTokens), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(f, token)
	return errors.Join(err, f.Close())
}

// runStorm calls Lock for spec.Duration, one call after another, each with a
// Lock of its own (owner ID-cNNNN, so that queue entries name their call)
// and a deadline drawn from [MinDeadline, MaxDeadline]; a call that gets the
// lease holds it for spec.Hold (0: unlocks it at once). Every call writes a
// "lock" event (with its deadline and owner), and every Unlock an "unlock"
// event.
func runStorm(ctx context.Context, client *spanner.Client, spec procSpec, out *eventWriter) error {
	end := time.Now().Add(spec.Duration)
	for call := 1; time.Now().Before(end); call++ {
		owner := fmt.Sprintf("%s-c%04d", spec.ID, call)
		l, err := NewLock(client, spec.Lock, spec.options(owner)...)
		if err != nil {
			return err
		}
		d := spec.MinDeadline + rand.N(spec.MaxDeadline-spec.MinDeadline+1)
		lctx, cancel := context.WithTimeout(ctx, d)
		start := time.Now()
		lease, err := l.Lock(lctx)
		cancel()
		e := leaseEvent("lock", call, lease, start, err)
		e.Owner, e.Deadline = owner, d
		out.emit(e)
		if lease == nil {
			continue
		}
		time.Sleep(spec.Hold)
		start = time.Now()
		uctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err = l.Unlock(uctx)
		cancel()
		out.emit(leaseEvent("unlock", call, lease, start, err))
	}
	return nil
}

// runCandidate campaigns spec.Count times in the election spec.Lock, with
// spec.ID as value. Each term it makes a guarded write (History), holds
// leadership for spec.Duration, makes a second guarded write, and resigns;
// it writes a "lock" event when it leads and an "unlock" event when Resign
// returns. Any error ends the role.
func runCandidate(ctx context.Context, client *spanner.Client, spec procSpec, out *eventWriter) error {
	e, err := NewElection(client, spec.Lock, spec.shared()...)
	if err != nil {
		return err
	}
	for call := 1; call <= spec.Count; call++ {
		start := time.Now()
		ld, err := e.Campaign(ctx, spec.ID)
		out.emit(leaseEvent("lock", call, leaseOf(ld), start, err))
		if err != nil {
			return err
		}
		if err := leaderTerm(ctx, client, ld, spec.Duration); err != nil {
			return err
		}
		start = time.Now()
		err = ld.Resign(ctx)
		out.emit(leaseEvent("unlock", call, ld.Lease(), start, err))
		if err != nil {
			return err
		}
	}
	return nil
}

// leaseOf is ld's lease, nil if ld is.
func leaseOf(ld *Leadership) *Lease {
	if ld == nil {
		return nil
	}
	return ld.Lease()
}

// leaderTerm is a leader's work: two guarded writes, hold apart.
func leaderTerm(ctx context.Context, client *spanner.Client, ld *Leadership, hold time.Duration) error {
	if err := guardedWrite(ctx, client, ld.Lease()); err != nil {
		return fmt.Errorf("token %d: first guarded write: %w", ld.Lease().Token(), err)
	}
	t := time.NewTimer(hold)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ld.Context().Done():
		return fmt.Errorf("token %d: leadership ended while leading: %w", ld.Lease().Token(), context.Cause(ld.Context()))
	}
	if err := guardedWrite(ctx, client, ld.Lease()); err != nil {
		return fmt.Errorf("token %d: second guarded write: %w", ld.Lease().Token(), err)
	}
	return nil
}

// runObserver observes the election spec.Lock and writes an "observed"
// event (Owner: the leader's value, Token, AcquiredAt: the term's start) for
// every term reported, until its stdin closes or says "exit".
func runObserver(ctx context.Context, client *spanner.Client, spec procSpec, out *eventWriter) error {
	e, err := NewElection(client, spec.Lock, spec.shared()...)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin) // until the test closes stdin or kills us
		cancel()
	}()
	for info := range e.Observe(ctx) {
		out.emit(procEvent{Kind: "observed", Owner: info.Value, Token: info.Token, AcquiredAt: info.Since})
	}
	return nil
}
