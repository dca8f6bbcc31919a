package queue

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/spanmutex/spanmutex"
	"github.com/spanmutex/spanmutex/internal/names"
	"github.com/spanmutex/spanmutex/internal/spanerr"
)

// Worker claims requests from a Queue and hands them to its Handler, one
// resource at a time, under the resource's spanmutex lease. Run as many
// workers as you like, in as many processes: a resource is handled by one
// worker at a time, its create before its updates, and requests in FIFO
// order as far as resources allow.
//
// How Run works (the request-queue state machine, the Spanner way):
//
//  1. Scan: a pass reads the pending index (new and in-progress requests, in
//     enqueue order) in pages of 512 with lock-free strong single-use reads,
//     moving a "line in the sand" past each request it looks at. For each
//     resource not yet tried in the pass it calls TryLock on the resource's
//     lock; a resource held by another worker is skipped (Stats.Skipped),
//     and the worker then goes on from a random place in the page, so that
//     workers spread over its resources (tryPage).
//     Between recovery sweeps (see pass), a resource whose request is
//     in-progress is skipped without a lock read, and a pass starts where
//     the last one found every entry before skipped (in progress, or
//     refused until later), rather than at the start of the queue.
//  2. Claim: holding the resource's lease, one read-write transaction fenced
//     by Lease.Guard claims the resource's pending create, or, once the
//     create is complete, its pending updates (up to 1,000, the oldest:
//     a commit stays within Spanner's mutation limit) as one job. Requests found
//     in-progress belong to a worker that lost the lease, and are claimed
//     again (Stats.Recovered). Claims are committed rows, never open
//     transactions.
//  3. Handle: the Handler runs with a context that is cancelled if the lease
//     is lost.
//  4. Finish: one read-write transaction fenced by Lease.Guard records the
//     outcome; if the lease was lost it writes nothing, and the next holder
//     claims the requests again.
//  5. While it holds the lease the worker claims again (the create, then its
//     updates), until nothing is claimable; then it unlocks.
//  6. A pass that did any work is followed at once by another from the start
//     of the queue, since it may have made others skip what is now free.
//     After a pass with no work the worker is idle until the Queue's Notify
//     (Enqueue calls it), or its poll interval passes: while idle, a worker
//     costs one single-use read of the pending index per poll interval (by
//     default 50ms doubling to 2s), however many requests other workers
//     hold, and once per sweep interval one read per 512 requests pending.
//     The sweep interval is a quarter of the longest lease left that
//     refused TryLocks reported (HeldError.LeaseLeft: about the holders'
//     lease), at least the maximum poll interval and at most 7.5s. Measured
//     (TestIdleWorkerReadsAboutOnePagePerPollBehindABacklogOthersHold): see
//     doc/queue.md.
//
// Bounds. A request before the line a pass between sweeps starts from that
// becomes claimable (its holder unlocked with work left, released a failed
// or overrun job, or died; this worker's refusal of its resource expired)
// is found by the first sweep once it is claimable and the refusal, if
// any, has expired (a refusal lasts the lease its holder had left, at
// least the maximum poll interval): within one sweep interval and one
// maximum poll interval of then; sooner after a Notify, or after a pass of
// this worker that did work, which read from the start. A claim abandoned
// by a dead worker is so recovered within its lease, the takeover's jitter
// (spanmutex.WithJitter: by default up to a fifth of the lease), one sweep
// interval and two maximum poll intervals of the holder's last renewal
// (measured in the same test).
//
// A Worker is safe for concurrent use; Run may run once at a time.
type Worker struct {
	q   *Queue
	h   Handler
	cfg workerConfig
	// scope makes the Worker's resource locks the contenders of one
	// process (see spanmutex.Scope).
	scope   *spanmutex.Scope
	running atomic.Bool
	stats   workerCounters
	// crowded reports that a resource this worker tried in its last pass,
	// or in this one so far, was held by another worker (tryPage); touched
	// only by Run's goroutine.
	crowded bool
	// refused reports that a resource this pass tried was held by another
	// worker; touched only by Run's goroutine.
	refused bool
	// refusedUntil holds, for each resource this worker could not lock,
	// until when passes leave it alone rather than pay a refused TryLock
	// each (candidates): its holder is handling it, and cannot be taken
	// over before its lease has run (spanmutex.HeldError.LeaseLeft), nor
	// is it tried again sooner than the maximum poll interval. Touched
	// only by Run's goroutine.
	refusedUntil map[string]time.Time
	// behind is where the next pass between sweeps starts (skipLine);
	// touched only by Run's goroutine.
	behind skipLine
	// leaseSeen is the longest HeldError.LeaseLeft this Run was told, in
	// nanoseconds: it spaces sweeps (sweepEvery).
	leaseSeen atomic.Int64
	// shutdownErr collects failures to release at shutdown; touched only by
	// Run's goroutine.
	shutdownErr []error
}

// NewWorker returns a worker of q that hands jobs to h. Every error wraps
// ErrInvalidConfig.
func (q *Queue) NewWorker(h Handler, opts ...WorkerOption) (*Worker, error) {
	if h == nil {
		return nil, fmt.Errorf("%w: nil Handler", ErrInvalidConfig)
	}
	cfg := defaultWorkerConfig()
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: WorkerOption %d is nil", ErrInvalidConfig, i)
		}
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.logger = cfg.logger.With("worker", cfg.id, "table", q.cfg.table)
	return &Worker{q: q, h: h, cfg: cfg, scope: spanmutex.NewScope()}, nil
}

// ID returns the worker's identity, recorded as the owner of the resources'
// locks it holds.
func (w *Worker) ID() string { return w.cfg.id }

// Run claims and handles requests until ctx ends. It starts with a scan, so
// requests enqueued while no worker ran are handled at once.
//
// When ctx ends, Run claims nothing new; a handler in flight may run for the
// shutdown grace (WithShutdownGrace), and its outcome is recorded; past it,
// its context is cancelled, and if it then fails its requests are released
// back to new for another worker. Run unlocks and returns nil; it returns an
// error joined with ctx.Err() only if it could not record an outcome or
// unlock (the requests are then taken over once the lease lapses).
//
// Spanner errors do not stop Run: it logs them and tries again at its next
// poll. It returns early only for errors that retrying cannot mend, such as
// a missing table or index.
func (w *Worker) Run(ctx context.Context) error {
	if ctx == nil {
		return errNilContext
	}
	if !w.running.CompareAndSwap(false, true) {
		return fmt.Errorf("queue: worker %s is already running; make one Worker per Run", w.cfg.id)
	}
	defer w.running.Store(false)
	w.shutdownErr = nil
	w.refusedUntil = map[string]time.Time{}
	w.behind = skipLine{}
	w.leaseSeen.Store(0)
	w.cfg.logger.Info("worker started")
	p := newPoller(w.cfg.minPoll, w.cfg.maxPoll)
	worked := false
	var lastSweep time.Time
	for ctx.Err() == nil {
		woken := w.q.woken() // before the pass, so that no Notify is missed
		// A sweep also tries resources whose requests are all in-progress.
		sweep := time.Since(lastSweep) >= w.sweepEvery()
		if sweep {
			lastSweep = time.Now()
			w.stats.sweeps.Add(1)
		}
		var err error
		worked, err = w.pass(ctx, sweep)
		if err != nil {
			return fmt.Errorf("queue: worker %s: %w", w.cfg.id, err)
		}
		if worked {
			p.reset()
			continue // others may have skipped what we held: look again
		}
		if w.idle(ctx, woken, p) {
			w.behind = skipLine{} // a local Enqueue: read from the start
		}
	}
	w.cfg.logger.Info("worker stopped")
	if len(w.shutdownErr) > 0 {
		return errors.Join(append([]error{ctx.Err()}, w.shutdownErr...)...)
	}
	return nil
}

// pass scans the pending index once from the start, trying each resource
// it meets once, and reports whether it did any work. Its error is one that
// retrying cannot mend; other failures end the pass early, as a pass with no
// work.
//
// Unless sweep, a resource whose first request in the scan is in-progress is
// passed over without trying its lock: its claim is most likely held by a
// live worker, which claims its later requests itself before it unlocks,
// and a claim abandoned by a dead worker cannot be taken over before the
// lease anyway. Unless sweep, the pass also starts at the worker's skip
// line (skipLine): the entries before it were all of resources passed over,
// and it does not read them again; it moves the line over the entries it
// passes over in turn from there. A sweep, a pass after a
// Notify, and one after a pass that did work start at the start of the
// queue. Run sweeps once per sweep interval (sweepEvery: a quarter of the
// holders' lease, at least the maximum poll interval), so that a dead
// worker's claim is recovered within about the lease plus that interval, while a
// busy queue costs no lock read per resource that others are handling, nor
// a page read per 512 of their requests each poll.
func (w *Worker) pass(ctx context.Context, sweep bool) (bool, error) {
	w.stats.scans.Add(1)
	w.refused = false
	defer func() { w.crowded = w.refused }()
	w.expireRefusals()
	s := w.newPassState(sweep)
	worked := false
	scanned := s.line.count // the entries before the line count as scanned
	defer func() { w.q.tel.pending.Record(ctx, int64(scanned)) }()
	defer func() { w.endPass(s, worked) }()
	at := s.line.at
	for ctx.Err() == nil {
		page, err := w.scanPage(ctx, at, scanPageSize)
		if err != nil {
			if ctx.Err() != nil {
				return worked, nil
			}
			if spanerr.Permanent(err) {
				return worked, err
			}
			w.cfg.logger.Warn("scan failed; trying again at the next poll", "err", err)
			return worked, nil
		}
		scanned += len(page)
		reread, did := w.tryPage(ctx, w.candidates(page, s), s)
		worked = worked || did
		s.advance(page)
		if reread {
			// The rest of the page aged while we held the resource, and
			// other workers are about: they may have handled it. Read it
			// again from the line rather than lock resources with
			// nothing left.
			continue
		}
		if len(page) < scanPageSize {
			break
		}
		last := page[len(page)-1]
		at = line{since: last.since, id: last.id}
	}
	return worked, nil
}

// expireRefusals forgets the refusals whose time is up (refusedUntil).
func (w *Worker) expireRefusals() {
	for r, until := range w.refusedUntil {
		if !time.Now().Before(until) {
			delete(w.refusedUntil, r)
		}
	}
}

// candidates returns the resources of page a pass may try, in queue order,
// each once: not tried yet in the pass, not left alone after a refusal
// (refusedUntil), and, between recovery sweeps, not in progress (those are
// counted as skipped). A claim abandoned by a dead worker is tried again
// once its lease has run, by the next pass that meets it.
func (w *Worker) candidates(page []pendingEntry, s *passState) []string {
	var out []string
	seen := map[string]bool{}
	for _, e := range page {
		if s.tried[e.resource] || seen[e.resource] {
			continue
		}
		seen[e.resource] = true
		if _, held := w.refusedUntil[e.resource]; held || (e.status == StatusInProgress && !s.sweep) {
			s.pass(e.resource)
			w.stats.skipped.Add(1)
			continue
		}
		out = append(out, e.resource)
	}
	return out
}

// tryPage tries the resources of cands, marking each tried, and reports
// whether the pass should read the page again (reread) and whether it did
// any work. A worker alone goes in queue order through the whole page,
// taking each resource in turn: nobody else handles the rest meanwhile,
// so it reads the page once. One that found a resource held by another
// worker (crowded) goes on from a random place in what is left of cands,
// wrapping around, and starts its next pages so too, for the rest of its
// pass and the next (pass): workers that read the same page spread over
// its resources instead of queueing up behind one another, each paying a
// refused TryLock per resource. Once crowded, it asks for the page again
// after each resource it held.
func (w *Worker) tryPage(ctx context.Context, cands []string, s *passState) (reread, worked bool) {
	spread := false
	for len(cands) > 0 {
		if ctx.Err() != nil {
			return false, worked
		}
		if w.crowded && !spread {
			i := rand.IntN(len(cands))
			cands, spread = append(cands[i:len(cands):len(cands)], cands[:i]...), true
		}
		r := cands[0]
		cands = cands[1:]
		s.tried[r] = true
		held, did, leaseLeft := w.tenure(ctx, r)
		worked = worked || did
		switch {
		case held && w.crowded:
			return true, worked
		case !held:
			w.crowded, w.refused = true, true
			w.refusedUntil[r] = time.Now().Add(max(leaseLeft, w.cfg.maxPoll))
			w.noteLease(leaseLeft)
			s.pass(r)
		}
	}
	return false, worked
}

// lockName is the name of resource's lock: "queue/<table>/<resource>", or,
// should that be too long, with the table name replaced by its hash.
func lockName(table, resource string) string {
	name := "queue/" + table + "/" + resource
	if utf8.RuneCountInString(name) <= names.MaxLength {
		return name
	}
	sum := sha256.Sum256([]byte(table))
	return "queue/" + hex.EncodeToString(sum[:8]) + "/" + resource
}
