package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spanmutex/spanmutex"
)

// takeoverScenario has every instance race again, on a new mutex, but the
// first holder "crashes": its section hangs, so it neither renews nor
// finishes. It checks that another instance takes over no earlier than the
// lease after the first acquisition, by Spanner's clock, with a higher
// token; that the migration completes exactly once; and that the crashed
// holder's late result is rejected when it wakes up.
func (d *demo) takeoverScenario(outer context.Context) (bool, error) {
	ctx := outer
	name := "demo-takeover-" + d.suffix
	n := len(d.clients)
	d.out.Printf("\n== Scenario 3: the first holder crashes mid-migration; another takes over after the lease ==\n")
	d.out.Printf("   mutex %q, lease %v (measured on Spanner's clock)\n\n", name, d.opts.lease)

	var (
		crashed   atomic.Bool
		completed atomic.Int32
		revive    = make(chan struct{}) // closed to wake the crashed holder up
	)
	wake := sync.OnceFunc(func() { close(revive) })
	defer wake()
	results, err := d.contend(ctx, name, func(ctx context.Context, i int, l *spanmutex.Lease) error {
		if crashed.CompareAndSwap(false, true) {
			return d.crash(outer, ctx, i, l, revive)
		}
		verb := "acquired the mutex"
		if l.TookOver() {
			verb = "took over from the silent holder"
		}
		d.out.say(i, "%s: token %d at %s; migrating (%v)", verb, l.Token(), stamp(l.AcquiredAt()), d.opts.work)
		if err := d.migrate(ctx); err != nil {
			return err
		}
		completed.Add(1)
		d.out.say(i, "migration applied; recording DONE")
		return nil
	})
	if err != nil {
		return false, err
	}
	// Everyone but the crashed holder ends; then it wakes up and ends too.
	attempts := d.collect(results, n-1)
	if err := fatal(ctx, attempts); err != nil {
		return false, err
	}
	wake()
	attempts = append(attempts, d.collect(results, 1)...)
	if err := fatal(ctx, attempts); err != nil {
		return false, err
	}
	return d.checkTakeover(ctx, name, attempts, int(completed.Load()))
}

// crash is the section of the first holder: it "crashes" mid-migration by
// freezing and cutting its client off from Spanner, so that it can neither
// renew its lease nor finish. Being dead, it ignores its section's context;
// it wakes up when revive is closed (or the demo ends), reconnects, and
// tries to record its migration as done.
func (d *demo) crash(outer, ctx context.Context, i int, l *spanmutex.Lease, revive <-chan struct{}) error {
	d.out.say(i, "acquired the mutex: token %d at %s; migrating...", l.Token(), stamp(l.AcquiredAt()))
	p := d.partitions[i-1]
	p.cut.Store(true)
	defer p.cut.Store(false)
	d.out.say(i, "CRASHES mid-migration: frozen and cut off from Spanner, it can neither renew its lease nor finish")
	select {
	case <-revive:
	case <-outer.Done():
		return outer.Err()
	}
	p.cut.Store(false)
	if errors.Is(context.Cause(ctx), spanmutex.ErrLeaseLost) {
		d.out.say(i, "wakes up and reconnects: its section's context was cancelled as its lease was lost, "+
			"but, a zombie, it ignores that and tries to record DONE")
	} else {
		d.out.say(i, "wakes up and reconnects; believing its migration finished, it tries to record DONE")
	}
	return nil
}

// checkTakeover prints the table, the two acquisitions and the checks of
// the takeover scenario.
func (d *demo) checkTakeover(ctx context.Context, name string, attempts []attempt, completed int) (bool, error) {
	var first, takeover *attempt
	done := 0
	for i, a := range attempts {
		switch {
		case a.lease != nil && !a.lease.TookOver() && first == nil:
			first = &attempts[i]
		case a.lease != nil && a.lease.TookOver() && a.err == nil:
			takeover = &attempts[i]
		case a.err == nil && a.outcome == spanmutex.AlreadyDone:
			done++
		}
	}
	d.writeAttempts(attempts, func(a attempt) string {
		switch {
		case first != nil && a.instance == first.instance:
			return "crashed; late result rejected"
		case a.lease != nil && a.lease.TookOver():
			return "took over"
		case a.err != nil:
			return oneLine(a.err.Error(), 60)
		}
		return ""
	})
	if first == nil || takeover == nil {
		d.check(false, "a holder crashed and another took over (first holder found: %v, takeover found: %v)", first != nil, takeover != nil)
		return false, nil
	}
	t1, t2 := first.lease.AcquiredAt(), takeover.lease.AcquiredAt()
	gap := t2.Sub(t1)
	d.out.Printf("\n  token %d: acquired by %s at %s, which then crashed\n", first.lease.Token(), ownerOf(first.instance), stamp(t1))
	d.out.Printf("  token %d: taken over by %s at %s\n", takeover.lease.Token(), ownerOf(takeover.instance), stamp(t2))
	d.out.Printf("  gap:     %v by Spanner's commit timestamps (lease %v)\n", gap.Round(time.Millisecond), d.opts.lease)
	r, err := d.row(ctx, name)
	if err != nil {
		return false, err
	}
	d.out.Printf("  row:     %s, token %d, %d attempt(s), owner %s\n\n", r.State, r.Token, r.Attempts, r.Owner)

	ok := d.check(takeover.lease.Token() > first.lease.Token(),
		"the takeover got a higher fencing token (%d > %d)", takeover.lease.Token(), first.lease.Token())
	ok = d.check(gap >= d.opts.lease,
		"the takeover came %v after the first acquisition: at least the %v lease, by Spanner's clock", gap.Round(time.Millisecond), d.opts.lease) && ok
	ok = d.check(completed == 1, "the migration completed exactly once (%d time(s))", completed) && ok
	ok = d.check(done == len(attempts)-2, "the %d other instances saw AlreadyDone (%d did)", len(attempts)-2, done) && ok
	ok = d.check(errors.Is(first.err, spanmutex.ErrLeaseLost),
		"the crashed holder's late DONE was rejected with ErrLeaseLost (%s)", describe(first.err, takeover.lease.Token())) && ok
	ok = d.check(r.State == spanmutex.StateDone && r.Token == takeover.lease.Token() && r.Attempts == 2,
		"the row is DONE with the takeover's token %d after 2 attempts (%s, token %d, %d attempts)", takeover.lease.Token(), r.State, r.Token, r.Attempts) && ok
	return ok, nil
}

// describe sums up the crashed holder's error for its check line; now is
// the token that took the row over.
func describe(err error, now int64) string {
	switch {
	case err == nil:
		return "it got no error"
	case errors.Is(err, spanmutex.ErrLeaseLost):
		return fmt.Sprintf("the row had moved on to token %d", now)
	}
	return "got: " + oneLine(err.Error(), 120)
}
