//go:build unix

package spanmutex

// The roles of contender processes (process_child_test.go) that hold
// Semaphores, RWLocks and run-once Mutex sections of one Scope, as a
// service replica does, and through the Scope's session with
// spec.Sessions: "semmany" (runSemMany) and "sections" (runSections).

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/spanner"
)

// withScope returns spec with its Scope set: spec.scope if any, else a new
// Scope, made WithSessions if spec.Sessions.
func (s procSpec) withScope() procSpec {
	if s.scope == nil {
		s.scope = NewScope()
		if s.Sessions {
			s.scope = NewScope(WithSessions())
		}
	}
	return s
}

// sharedHold is a lease a "semmany" process holds, and how to give it up.
type sharedHold struct {
	lease   *Lease
	release func(context.Context) error
}

// runSemMany holds, all of one Scope (spec.withScope), spec.Count permits
// of a Semaphore of size spec.Size of each name in spec.Holds, then a read
// lock of an RWLock of each name in spec.RHolds, taken in turn (owner
// ID-i, the i-th of them all; an "acquire" event of call i each), and
// waits for spec.Count permits of each name in spec.Waits (owner ID-wj;
// an "acquire" event of call manyWaitCall+j when it returns). It writes a
// "holding" event once every hold is taken and every wait begun, and a
// "lost" event (call i) when a held lease's Done closes. Then it reads
// stdin: "guard" makes a guarded write (guardedFenceWrite, resource
// NAME/ID-i) with each held lease, a "guard" event each; "release"
// releases each, a "release" event each; "exit" ends the role.
func runSemMany(ctx context.Context, client *spanner.Client, spec procSpec, out *eventWriter) error {
	spec = spec.withScope()
	var holds []sharedHold
	take := func(name string, acquire func(context.Context) (*Lease, error), release func(context.Context) error) error {
		i := len(holds)
		start := time.Now()
		lctx, cancel := context.WithTimeout(ctx, time.Minute)
		lease, err := acquire(lctx)
		cancel()
		out.emit(leaseEvent("acquire", i, lease, start, err))
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		holds = append(holds, sharedHold{lease, release})
		go reportLoss(lease, i, out)
		return nil
	}
	for _, name := range spec.Holds {
		s, err := NewSemaphore(client, name, spec.Size, spec.options(fmt.Sprintf("%s-%d", spec.ID, len(holds)))...)
		if err != nil {
			return err
		}
		acquire := func(ctx context.Context) (*Lease, error) { return s.Acquire(ctx, int64(spec.Count)) }
		if err := take(name, acquire, s.Release); err != nil {
			return err
		}
	}
	for _, name := range spec.RHolds {
		rw, err := NewRWLock(client, name, spec.options(fmt.Sprintf("%s-%d", spec.ID, len(holds)))...)
		if err != nil {
			return err
		}
		if err := take(name, rw.RLock, rw.RUnlock); err != nil {
			return err
		}
	}
	for j, name := range spec.Waits {
		s, err := NewSemaphore(client, name, spec.Size, spec.options(fmt.Sprintf("%s-w%d", spec.ID, j))...)
		if err != nil {
			return err
		}
		go func() {
			start := time.Now()
			lease, err := s.Acquire(ctx, int64(spec.Count))
			out.emit(leaseEvent("acquire", manyWaitCall+j, lease, start, err))
		}()
	}
	out.emit(procEvent{Kind: "holding"})
	return heldCommands(ctx, client, holds, out)
}

// heldCommands runs runSemMany's stdin commands on holds until "exit" or
// the end of stdin.
func heldCommands(ctx context.Context, client *spanner.Client, holds []sharedHold, out *eventWriter) error {
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		cmd := strings.TrimSpace(sc.Text())
		if cmd == "exit" {
			return nil
		}
		if cmd != "guard" && cmd != "release" {
			return fmt.Errorf("unknown command %q", cmd)
		}
		for i, h := range holds {
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			start := time.Now()
			var err error
			if cmd == "guard" {
				err = guardedFenceWrite(cctx, client, h.lease, heldResource(h.lease))
			} else {
				err = h.release(cctx)
			}
			cancel()
			out.emit(leaseEvent(cmd, i, h.lease, start, err))
		}
	}
	return sc.Err()
}

// heldResource is the resource a holder's guarded writes go to: one per
// name and owner.
func heldResource(lease *Lease) string { return lease.Name() + "/" + lease.Owner() }

// guardedFenceWrite records lease's token as resource's in the Fences
// table, in a read-write transaction that checks with Guard that the
// lease is still held: a holder's work, which a lost lease must never
// write. Mutations, so the same on both dialects (History is GoogleSQL's
// only).
func guardedFenceWrite(ctx context.Context, c *spanner.Client, lease *Lease, resource string) error {
	_, err := c.ReadWriteTransaction(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		if err := lease.Guard(ctx, txn); err != nil {
			return err
		}
		return txn.BufferWrite([]*spanner.Mutation{spanner.InsertOrUpdate(defaultFenceTable,
			[]string{"Resource", "LockName", "Token", "UpdatedAt"},
			[]any{resource, lease.Name(), lease.Token(), spanner.CommitTimestamp})})
	})
	return err
}

// runSections runs a section of a run-once Mutex of each name in
// spec.Holds at once, all of one Scope (spec.withScope), owner ID-i for
// the i-th. Each section writes a "section" event (call i) when it
// begins, and waits for its ctx to end; then it writes a "cancelled"
// event with the ctx's cause, and a "guard" event with the outcome of a
// guarded write (guardedFenceWrite, resource the name) with its lease: a
// holder that, late, goes on with its work, and returns nil. Each Run writes a "run" event
// with its outcome when it returns. A "holding" event follows the last
// section's "section" event. The role ends on "exit" (or the end of
// stdin).
func runSections(ctx context.Context, client *spanner.Client, spec procSpec, out *eventWriter) error {
	spec = spec.withScope()
	var begun sync.WaitGroup
	for i, name := range spec.Holds {
		var opts []MutexOption
		for _, o := range spec.options(fmt.Sprintf("%s-%d", spec.ID, i)) {
			opts = append(opts, o)
		}
		m, err := New(client, name, opts...)
		if err != nil {
			return err
		}
		begun.Add(1)
		began := sync.OnceFunc(begun.Done) // by the section, or by a Run that ran none
		go func() {
			defer began()
			start := time.Now()
			outcome, err := m.Run(ctx, func(sctx context.Context, lease *Lease) error {
				return lateSection(ctx, sctx, client, lease, i, began, out)
			})
			e := withErr(procEvent{Kind: "run", Call: i, Start: start.UnixNano(), End: time.Now().UnixNano()}, err)
			e.Outcome = outcome.String()
			out.emit(e)
		}()
	}
	begun.Wait()
	out.emit(procEvent{Kind: "holding"})
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		if cmd := strings.TrimSpace(sc.Text()); cmd != "exit" {
			return fmt.Errorf("unknown command %q", cmd)
		}
		return nil
	}
	return sc.Err()
}

// lateSection is runSections' section, the call-th, holding lease: it
// reports its beginning (and calls began), waits for sctx to end, and then
// makes its guarded write with a ctx of the Run's (ctx). It returns nil
// whatever the write's outcome, as a section that believes its work done:
// the Run's record of the section's end must be fenced too.
func lateSection(ctx, sctx context.Context, client *spanner.Client, lease *Lease, call int, began func(), out *eventWriter) error {
	out.emit(leaseEvent("section", call, lease, time.Now(), nil))
	began()
	<-sctx.Done()
	cause := context.Cause(sctx)
	out.emit(leaseEvent("cancelled", call, lease, time.Now(), cause))
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	start := time.Now()
	err := guardedFenceWrite(wctx, client, lease, lease.Name())
	out.emit(leaseEvent("guard", call, lease, start, err))
	return nil
}
