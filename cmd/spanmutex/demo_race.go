package main

import (
	"context"
	"sync/atomic"

	"github.com/spanmutex/spanmutex"
)

// raceScenario has every instance start at once and race to apply the
// migration; it checks that it ran exactly once and that every other
// instance saw AlreadyDone.
func (d *demo) raceScenario(ctx context.Context) (bool, error) {
	name := "demo-migration-" + d.suffix
	n := len(d.clients)
	d.out.printf("\n== Scenario 1: %d instances start at once and race to apply the migration ==\n", n)
	d.out.printf("   mutex %q, table %s\n\n", name, d.opts.table)

	var runs atomic.Int32
	results, err := d.contend(ctx, name, func(ctx context.Context, i int, l *spanmutex.Lease) error {
		runs.Add(1)
		d.out.say(i, "acquired the mutex: token %d at %s; migrating (%v)", l.Token(), stamp(l.AcquiredAt()), d.opts.work)
		if err := d.migrate(ctx); err != nil {
			return err
		}
		d.out.say(i, "migration applied; recording DONE")
		return nil
	})
	if err != nil {
		return false, err
	}
	attempts := d.collect(results, n)
	if err := fatal(ctx, attempts); err != nil {
		return false, err
	}
	d.writeAttempts(attempts, func(a attempt) string {
		if a.err != nil {
			return oneLine(a.err.Error(), 60)
		}
		return ""
	})

	var ran *attempt
	executed, done := 0, 0
	for i, a := range attempts {
		switch {
		case a.err == nil && a.outcome == spanmutex.Executed:
			executed++
			ran = &attempts[i]
		case a.err == nil && a.outcome == spanmutex.AlreadyDone:
			done++
		}
	}
	r, err := d.row(ctx, name)
	if err != nil {
		return false, err
	}
	d.out.printf("\n  row: %s, token %d, %d attempt(s), owner %s\n\n", r.State, r.Token, r.Attempts, r.Owner)

	ok := d.check(runs.Load() == 1 && executed == 1 && ran != nil,
		"the migration ran exactly once (%d run(s), %d Executed)", runs.Load(), executed)
	ok = d.check(done == n-1, "the %d other instances saw AlreadyDone (%d did)", n-1, done) && ok
	wantToken := int64(-1)
	if ran != nil {
		wantToken = ran.lease.Token()
	}
	ok = d.check(r.State == spanmutex.StateDone && r.Token == wantToken && r.Attempts == 1,
		"the row is DONE with the runner's token %d after 1 attempt (%s, token %d, %d attempts)", wantToken, r.State, r.Token, r.Attempts) && ok
	return ok, nil
}
