package queue

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"cloud.google.com/go/spanner"

	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/internal/sqldialect"
)

// errPartitionEnded stops reading a partition's query at its child
// partitions record.
var errPartitionEnded = errors.New("queue: capture: partition ended")

// readStreamSQL is the query of a change stream's partition in dialect d.
// It is the one statement written in each dialect: a stream is read with a
// different function in each (GoogleSQL's READ_<stream> returns STRUCTs,
// PostgreSQL's spanner.read_json_<stream> returns one JSONB record per
// row), and decodeChangeRecord takes either. The stream's name was
// validated as an identifier by NewCapture.
func readStreamSQL(d ddl.Dialect, stream string) string {
	if d == ddl.PostgreSQL {
		return fmt.Sprintf(`SELECT * FROM spanner."read_json_%s"(@start, @end, @token, @heartbeat, NULL)`, stream)
	}
	return fmt.Sprintf("SELECT ChangeRecord FROM READ_%s(@start, @end, @token, @heartbeat)", stream)
}

// query reads the partition with readStreamSQL(start, end, token,
// heartbeat) and hands each record to fn, in the order Spanner returns them
// (commit order within a partition). A nil end reads until the partition
// ends; a nil token is the initial query.
func (c spannerCapture) query(ctx context.Context, start time.Time, end *time.Time, token *string, fn func(csRecord) error) error {
	d, err := c.q.dialect.Get(ctx)
	if err != nil {
		return fmt.Errorf("queue: capture %s: %w", c.stream, err)
	}
	// In PostgreSQL, the parameters become $1 to $4, in the order the SQL names them.
	stmt := sqldialect.Statement(d, readStreamSQL(d, c.stream), map[string]any{
		"start":     start,
		"end":       spanner.NullTime{Valid: end != nil, Time: csDeref(end)},
		"token":     spanner.NullString{Valid: token != nil, StringVal: csDeref(token)},
		"heartbeat": c.cfg.heartbeat.Milliseconds(),
	})
	return c.client.Single().Query(ctx, stmt).Do(func(row *spanner.Row) error {
		var col spanner.GenericColumnValue
		if err := row.Column(0, &col); err != nil {
			return err
		}
		recs, err := decodeChangeRecord(col)
		if err != nil {
			return err
		}
		for _, r := range recs {
			if err := fn(r); err != nil {
				return err
			}
		}
		return nil
	})
}

func csDeref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// readPartition reads a claimed partition from its checkpoint until it
// ends (its children are recorded and it is finished), ctx is done, another
// instance takes it over (errPartitionLost), or an error. Each query reads
// one window; each batch of records is written with its checkpoint. skew
// is how far the local clock is behind Spanner's.
//
// A query or checkpoint that fails is retried from the last checkpoint,
// keeping the claim, after a backoff (captureAttempts): at most ten tries a
// second, one every two seconds once failures go on, and never more than
// the failure limit in a row, counted since the last call that succeeded.
func (c *Capture) readPartition(ctx context.Context, p capturePartition, skew time.Duration) error {
	pr := &partitionRead{c: c, p: p, skew: skew, resume: p.resume, lastWrite: time.Now(),
		fails: c.newAttempts("reading partition " + shortToken(p.token))}
	for {
		err := pr.window(ctx)
		switch {
		case errors.Is(err, errPartitionEnded):
			return nil
		case err != nil:
			if err := pr.fails.failed(ctx, err); err != nil {
				return err
			}
		default:
			pr.fails.ok()
		}
	}
}

// partitionRead is one readPartition: where it stands.
type partitionRead struct {
	c         *Capture
	p         capturePartition
	skew      time.Duration
	resume    time.Time // the checkpoint, or past it over an empty stretch
	lastWrite time.Time // the local time of the last checkpoint
	fails     *captureAttempts
}

// window makes one query from pr.resume to one window past Spanner's now
// (by the local clock corrected by skew), writes its records in batches
// with their checkpoints, and moves resume on. It returns errPartitionEnded
// once the partition's children are recorded.
func (pr *partitionRead) window(ctx context.Context) error {
	c, p := pr.c, pr.p
	// The local clock (corrected by skew) decides only how long a query
	// waits for new changes and when an idle partition renews its lease;
	// what is captured and who owns a partition are decided by Spanner's
	// timestamps.
	end := pr.resume
	if now := time.Now().Add(pr.skew); now.After(end) {
		end = now
	}
	end = end.Add(c.cfg.window)

	cp := captureCheckpoint{token: p.token, resume: pr.resume}
	flush := func() error {
		if _, err := c.store.commit(ctx, cp); err != nil {
			return err
		}
		pr.fails.ok() // progress: a later failure starts a new count
		pr.lastWrite = time.Now()
		pr.resume = cp.resume
		cp = captureCheckpoint{token: p.token, resume: cp.resume}
		return nil
	}
	began, wait := time.Now(), end.Sub(time.Now().Add(pr.skew))
	qctx, cut := c.cutAfter(ctx, p.token, wait+c.cfg.lease/4)
	err := c.store.query(qctx, pr.resume, &end, &p.token, func(r csRecord) error {
		return pr.record(r, &cp, flush)
	})
	if cut() && ctx.Err() == nil {
		// The query ran a quarter lease past its end by the monotonic
		// clock: Spanner's clock is behind what the skew made of the
		// local one (stepped forward since it was measured), and a query
		// let run would outlast the lease with no checkpoint. Measure
		// again, and read on from the last checkpoint written.
		pr.measureSkew(ctx)
		return nil
	}
	if err != nil {
		return err
	}
	if time.Since(began) < wait/2 {
		pr.measureSkew(ctx)
	}
	// The query reached end: every record up to it has been returned.
	// Resuming at end (not after it) reads again any record at exactly
	// end, whichever way Spanner bounds the window.
	cp.resume = csMaxTime(cp.resume, end)
	if cp.records > 0 || time.Since(pr.lastWrite) >= c.cfg.lease/4 {
		return flush()
	}
	// Nothing to write yet: read on from here, and let a later checkpoint
	// record it (a restart re-reads an empty stretch).
	pr.resume = cp.resume
	return nil
}

// measureSkew measures the local clock's skew again, after a query that
// should have waited for about a window ended at once: its end was already
// past by Spanner's clock, so the local clock was stepped back since Run
// measured it (or the process paused before the query); or after one cut
// short a quarter lease past its end: the clock was stepped forward.
// Without it, a clock stepped back by D made each query read one past
// window, back to back, D per window times, and one stepped forward by more
// than the lease made every query outlast the lease with no checkpoint
// (TestCaptureClockSteppedForwardKeepsTheLease). A failed measurement keeps
// the old skew: the next query is past or cut short again, and measures
// again.
func (pr *partitionRead) measureSkew(ctx context.Context) {
	skew, err := pr.c.skewOnce(ctx, pr.p.token)
	if err != nil {
		pr.c.cfg.logger.Warn("capture: reading Spanner's clock failed", "partition", shortToken(pr.p.token), "err", err)
		return
	}
	pr.skew = skew
}

// record adds the record r of a query to the checkpoint cp, and flushes
// cp when the batch is full, before a failing change, and at the
// partition's end (then it returns errPartitionEnded).
func (pr *partitionRead) record(r csRecord, cp *captureCheckpoint, flush func() error) error {
	switch {
	case r.Data != nil:
		reqs, err := pr.c.mapRecord(r.Data)
		if err != nil {
			// Keep what came before the failing change.
			if ferr := flush(); ferr != nil {
				return errors.Join(err, ferr)
			}
			return err
		}
		cp.reqs = append(cp.reqs, reqs...)
		cp.records++
		// Inclusive: other records of this commit timestamp may follow,
		// and a replay of this one is a no-op.
		cp.resume = csMaxTime(cp.resume, r.Data.CommitTimestamp)
		if cp.records >= int64(pr.c.cfg.batch) {
			return flush()
		}
	case r.Heartbeat != nil:
		// Every record up to the heartbeat has been returned.
		cp.resume = csMaxTime(cp.resume, *r.Heartbeat)
	case r.Children != nil:
		cp.finish = r.Children
		cp.resume = csMaxTime(cp.resume, r.Children.StartTimestamp)
		if err := flush(); err != nil {
			return err
		}
		return errPartitionEnded
	}
	return nil
}

// mapRecord maps each mod of a data change record and gives the requests
// their ids.
func (c *Capture) mapRecord(d *dataChangeRecord) ([]Request, error) {
	var out []Request
	for _, ch := range d.changes(c.stream) {
		reqs, err := c.mapper(ch)
		if err != nil {
			return nil, newMapperError(ch, err)
		}
		if len(reqs) == 0 {
			continue
		}
		for i := range reqs {
			if reqs[i].ID == "" {
				reqs[i].ID = CaptureRequestID(ch, i)
			}
		}
		prepared, err := c.q.prepare(reqs)
		if err != nil {
			return nil, newMapperError(ch, err)
		}
		out = append(out, prepared...)
	}
	return out, nil
}

func csMaxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// cutAfter returns a ctx that ends d after now (by the monotonic clock), or
// with ctx, and cut, which releases it and reports whether d passed first.
func (c *Capture) cutAfter(ctx context.Context, what string, d time.Duration) (context.Context, func() bool) {
	ctx, cancel := context.WithCancel(ctx)
	var fired atomic.Bool
	fire := func() { fired.Store(true); cancel() }
	var stop func() bool
	if c.cfg.afterFunc != nil {
		stop = c.cfg.afterFunc(what, d, fire)
	} else {
		stop = time.AfterFunc(d, fire).Stop
	}
	return ctx, func() bool {
		stop()
		cancel()
		return fired.Load()
	}
}
