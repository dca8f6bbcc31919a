package spanmutex

import (
	"context"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/cenkalti/backoff/v4"
	"google.golang.org/grpc/codes"

	"github.com/spanmutex/spanmutex/internal/pace"
)

// Observe reports the election's leadership terms, in the order they began,
// each once, on the returned channel, until ctx ends; then it closes the
// channel. Observe reads the row once before it returns: the first report is
// the term under way then, if any, and every term that begins later is
// reported. Any instance may observe, candidate or not.
//
// Every term is reported, however short: Observe reads the row every 100 ms
// (by key, a single-use read), and when the token has moved on by more than
// one since the last read, it finds the terms in between by reading the row
// as it was at earlier Spanner timestamps. That history is kept for an
// hour (Spanner's default version retention): when Observe could not look
// for longer than that (its reads failed, or its channel was not drained),
// the terms it can no longer read are skipped, which shows as a gap in the
// tokens, and it goes on with the terms it can still read and the current
// one. A term is reported when it is seen held, even if its leader
// has since stopped renewing: use Leader to ask whether a leader is alive
// now. Reports wait for the receiver: nothing is dropped, and reading falls
// behind while the channel is not drained. Failed reads are retried with
// the Election's backoff, never sooner than the reading pace (100 ms); they
// delay reports, and skip them only once the history is out of reach.
func (e *Election) Observe(ctx context.Context) <-chan LeaderInfo {
	out := make(chan LeaderInfo)
	if ctx == nil || e == nil || e.rows == nil {
		close(out)
		return out
	}
	o := &observer{e: e, out: out, last: -1}
	first, err := e.rows.read(ctx, e.name) // the starting point; if it fails, run reads again
	go func() {
		defer close(out)
		if err == nil {
			if err := o.seen(ctx, first); err != nil {
				return // ctx ended
			}
		}
		o.run(ctx)
	}()
	return out
}

// observer is the state of one Observe call: the highest token reported
// and the Spanner time at which the row was last read with it.
type observer struct {
	e      *Election
	out    chan<- LeaderInfo
	last   int64     // the highest token reported or passed over; -1 before the first read
	lastAt time.Time // the Spanner time of the read that set last
}

// run polls until ctx ends.
func (o *observer) run(ctx context.Context) {
	b := o.e.cfg.newBackOff()
	next := o.e.observeEvery
	if o.last < 0 {
		next = 0 // Observe's first read failed
	}
	for {
		if pace.SleepOn(ctx, o.e.cfg.clock.NewTimer, next) != nil {
			return
		}
		if err := o.poll(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			o.e.cfg.logger.Warn("observe: reading the election failed; retrying", "err", err)
			// A policy that gives up (one with a MaxElapsedTime, say)
			// cannot end Observe, and none retries faster than the
			// reading pace: never back to back.
			if next = b.NextBackOff(); next == backoff.Stop || next < o.e.observeEvery {
				next = o.e.observeEvery
			}
			continue
		}
		b.Reset()
		next = o.e.observeEvery
	}
}

// poll reads the row now, reports the terms that began since the last
// read, and moves last on.
func (o *observer) poll(ctx context.Context) error {
	r, err := o.e.rows.read(ctx, o.e.name)
	if err != nil {
		return err
	}
	switch {
	case o.last < 0 || r.Token < o.last: // the first read, or the row was deleted and begun anew
		o.last = -1
	case r.Token > o.last:
		// Terms o.last+1 .. r.Token-1 began in (lastAt, r.Now]; so did
		// r.Token's, if it is no longer held.
		upTo := r.Token
		if r.State != StateStarted {
			upTo++
		}
		if err := o.fill(ctx, o.lastAt, r.Now, o.last, upTo); err != nil {
			return err
		}
	}
	return o.seen(ctx, r)
}

// seen reports the term r shows held, if any, and moves last on to r.
func (o *observer) seen(ctx context.Context, r row) error {
	if o.last < 0 {
		o.last = r.Token - 1 // r's term, if held, is yet to be reported
	}
	if r.State == StateStarted {
		if err := o.report(ctx, r, r.Now); err != nil {
			return err
		}
	}
	o.last, o.lastAt = max(o.last, r.Token), r.Now
	return nil
}

// fill reports, in token order, the terms with tokens in (a, b) seen held in
// the Spanner time interval (lo, hi], by reading the row at the interval's
// middle and recursing into its halves. Tokens only grow with time, so the
// terms below the middle's token lie in the lower half, those above it in
// the upper half. It ends when no token is left between a and b, or the
// interval is a microsecond (Spanner's timestamp resolution) or less.
//
// A read Spanner refuses as older than its version retention
// (FailedPrecondition) puts the lower half out of reach for good: its terms
// are skipped, and fill looks on in the upper half. So a gap longer than
// the retention costs at most about 42 refused reads (an hour is 2^32 µs),
// never a poll that fails for ever.
func (o *observer) fill(ctx context.Context, lo, hi time.Time, a, b int64) error {
	if b-a <= 1 || hi.Sub(lo) <= time.Microsecond {
		return nil
	}
	mid := lo.Add(hi.Sub(lo) / 2)
	r, err := o.e.rows.readAt(ctx, o.e.name, mid)
	if tooOld(err) {
		o.e.cfg.logger.Warn("observe: the election's history is out of reach (older than Spanner's version retention); terms that began then are skipped",
			"at", mid, "after_token", a, "err", err)
		return o.fill(ctx, mid, hi, a, b)
	}
	if err != nil {
		return err
	}
	switch {
	case r.Token <= a:
		return o.fill(ctx, mid, hi, a, b)
	case r.Token >= b:
		return o.fill(ctx, lo, mid, a, b)
	case r.State == StateStarted:
		if err := o.fill(ctx, lo, mid, a, r.Token); err != nil {
			return err
		}
		if err := o.report(ctx, r, mid); err != nil {
			return err
		}
	default: // r.Token's term ended by mid: it is in the lower half
		if err := o.fill(ctx, lo, mid, a, r.Token+1); err != nil {
			return err
		}
	}
	return o.fill(ctx, mid, hi, r.Token, b)
}

// tooOld reports whether err is Spanner's refusal of a read at a timestamp
// older than the database's version retention ("has exceeded the maximum
// timestamp staleness", code FailedPrecondition). A history read at a
// timestamp the data is not readable at for another reason fails with the
// same code, and is as far out of reach.
func tooOld(err error) bool {
	return err != nil && spanner.ErrCode(err) == codes.FailedPrecondition
}

// report sends the term r shows held at Spanner time at, unless a term at
// least as recent was reported already or ctx has ended, and moves last on
// to it.
func (o *observer) report(ctx context.Context, r row, at time.Time) error {
	if r.Token <= o.last {
		return nil
	}
	// A ctx that has already ended wins over a receiver that is ready,
	// which select would pick between at random.
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case o.out <- termOf(r):
	case <-ctx.Done():
		return ctx.Err()
	}
	o.last, o.lastAt = r.Token, at
	return nil
}
