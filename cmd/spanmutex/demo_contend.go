package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spanmutex/spanmutex"
)

// attempt is how one simulated instance's Run ended.
type attempt struct {
	instance int
	outcome  spanmutex.Outcome
	err      error
	lease    *spanmutex.Lease // the lease its section ran under; nil if it did not run
	took     time.Duration    // by the local clock, for display only
}

// section is the migration as instance runs it under lease.
type section func(ctx context.Context, instance int, lease *spanmutex.Lease) error

// contend makes every instance run name's section fn through its own Mutex
// and client. The goroutines are all parked on one channel that is then
// closed, so they start at the same moment. Each attempt arrives on the
// returned channel, which has room for all of them.
func (d *demo) contend(ctx context.Context, name string, fn section) (<-chan attempt, error) {
	mutexes := make([]*spanmutex.Mutex, len(d.clients))
	for i := range mutexes {
		m, err := d.mutex(i+1, name)
		if err != nil {
			return nil, err
		}
		mutexes[i] = m
	}
	results := make(chan attempt, len(mutexes))
	start := make(chan struct{})
	var parked sync.WaitGroup
	for i, m := range mutexes {
		instance := i + 1
		parked.Add(1)
		go func() {
			parked.Done()
			<-start
			began := time.Now()
			var lease *spanmutex.Lease // Run calls the section on this goroutine
			outcome, err := m.Run(ctx, func(ctx context.Context, l *spanmutex.Lease) error {
				lease = l
				return fn(ctx, instance, l)
			})
			results <- attempt{instance: instance, outcome: outcome, err: err, lease: lease, took: time.Since(began)}
		}()
	}
	parked.Wait()
	close(start)
	return results, nil
}

// collect receives n attempts, printing each as it ends.
func (d *demo) collect(results <-chan attempt, n int) []attempt {
	var out []attempt
	for range n {
		a := <-results
		switch {
		case a.err == nil && a.outcome == spanmutex.Executed:
			d.out.say(a.instance, "Executed: the migration ran here (%v)", a.took.Round(10*time.Millisecond))
		case a.err == nil:
			d.out.say(a.instance, "%v after %v: the migration did not run here", a.outcome, a.took.Round(10*time.Millisecond))
		case errors.Is(a.err, spanmutex.ErrLeaseLost):
			d.out.say(a.instance, "its late result was rejected (ErrLeaseLost): its lease had been taken over")
		default:
			d.out.say(a.instance, "%v: %v", a.outcome, a.err)
		}
		out = append(out, a)
	}
	return out
}

// fatal returns the first error among attempts that makes the demo
// meaningless (no schema, no connection, interrupted), or nil.
func fatal(ctx context.Context, attempts []attempt) error {
	for _, a := range attempts {
		if a.err != nil && (errors.Is(a.err, spanmutex.ErrSchema) || ctx.Err() != nil) {
			return a.err
		}
	}
	return nil
}

// writeAttempts prints the attempts as a table, by instance.
func (d *demo) writeAttempts(attempts []attempt, note func(attempt) string) {
	attempts = slices.Clone(attempts)
	slices.SortFunc(attempts, func(a, b attempt) int { return a.instance - b.instance })
	var buf strings.Builder
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\n  INSTANCE\tOUTCOME\tTOKEN\tACQUIRED AT (SPANNER'S CLOCK)\tTOOK\tNOTE")
	for _, a := range attempts {
		token, at := "-", "-"
		if a.lease != nil {
			token, at = fmt.Sprint(a.lease.Token()), stamp(a.lease.AcquiredAt())
		}
		fmt.Fprintf(tw, "  %s\t%v\t%s\t%s\t%v\t%s\n", ownerOf(a.instance), a.outcome, token, at, a.took.Round(10*time.Millisecond), note(a))
	}
	_ = tw.Flush()
	lines := strings.Split(buf.String(), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	d.out.Printf("%s", strings.Join(lines, "\n"))
}

// row reads name's row, for the checks.
func (d *demo) row(ctx context.Context, name string) (spanmutex.Record, error) {
	rows, err := spanmutex.Inspect(ctx, d.clients[0], name, spanmutex.WithTable(d.opts.table))
	if err != nil {
		return spanmutex.Record{}, err
	}
	if len(rows) != 1 {
		return spanmutex.Record{}, fmt.Errorf("mutex %q has no row in table %s", name, d.opts.table)
	}
	return rows[0], nil
}

// check prints a PASS or FAIL line and returns ok.
func (d *demo) check(ok bool, format string, args ...any) bool {
	verdict := "FAIL"
	if ok {
		verdict = "PASS"
		d.checks++
	}
	d.out.Printf("  %s  %s\n", verdict, fmt.Sprintf(format, args...))
	return ok
}

// stamp formats a Spanner timestamp to the microsecond, in UTC.
func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000Z") }
