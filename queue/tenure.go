package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/spanmutex/spanmutex"
	"github.com/spanmutex/spanmutex/internal/spanerr"
)

// errShutdownGrace is the cause of a handler's context cancelled because it
// overran the shutdown grace.
var errShutdownGrace = errors.New("queue: the worker is shutting down and the handler overran its grace period")

// tenure tries to take resource's lock and, while holding it, claims and
// handles its requests until nothing is claimable; then unlocks. It reports
// whether it took the lock, and whether it did any work (claimed or ended a
// request); if it could not take the lock, how long its holder's lease has
// still to run (leaseLeft, 0 if unknown).
func (w *Worker) tenure(ctx context.Context, resource string) (held, worked bool, leaseLeft time.Duration) {
	log := w.cfg.logger.With("resource", resource)
	lock, lease, leaseLeft := w.takeLock(ctx, log, resource)
	if lease == nil {
		return false, false, leaseLeft
	}
	w.stats.tenures.Add(1)
	log = log.With("token", lease.Token())
	if lease.TookOver() {
		log.Info("took the resource over from a silent worker")
	}
	worked = w.work(ctx, log, lease, resource)
	if !worked {
		w.stats.idleTenures.Add(1)
	}
	w.unlock(ctx, log, resource, lock)
	return true, worked, 0
}

// takeLock tries the resource's lock: it returns the Lock and its lease, or
// no lease if the lock is held (with how long its holder's lease has still
// to run: spanmutex.HeldError) or could not be taken.
func (w *Worker) takeLock(ctx context.Context, log *slog.Logger, resource string) (*spanmutex.Lock, *spanmutex.Lease, time.Duration) {
	// The queue's dialect, read once for all its locks: a Lock not given
	// it would read it from the database at its first attempt, and each
	// tenure makes a new Lock.
	dialect, err := w.q.dialect.Get(ctx)
	if err != nil {
		if ctx.Err() == nil {
			log.Warn("could not take the resource's lock; trying again later", "err", err)
		}
		return nil, nil, 0
	}
	opts := append([]spanmutex.LockOption{spanmutex.WithOwner(w.cfg.id), spanmutex.WithScope(w.scope), spanmutex.WithDialect(dialect)}, w.q.cfg.lockOpts...)
	lock, err := spanmutex.NewLock(w.q.client, lockName(w.q.cfg.table, resource), opts...)
	if err != nil { // New validated the options; only a bad name gets here
		log.Error("cannot make the resource's lock", "err", err)
		return nil, nil, 0
	}
	lease, err := lock.TryLock(ctx)
	var held *spanmutex.HeldError
	switch {
	case errors.As(err, &held):
		w.stats.skipped.Add(1)
		return nil, nil, held.LeaseLeft
	case err != nil:
		if ctx.Err() == nil {
			log.Warn("could not take the resource's lock; trying again later", "err", err)
		}
		return nil, nil, 0
	}
	return lock, lease, 0
}

// work claims and handles the resource's requests under lease, step by
// step, and reports whether it claimed any.
func (w *Worker) work(ctx context.Context, log *slog.Logger, lease *spanmutex.Lease, resource string) (worked bool) {
	var prev *finishing     // the job whose outcome is still to be recorded
	var known *resourceRead // the resource's requests as the last step left them
	for {
		// Claim nothing new once Run's ctx ended, the lease is lost, or
		// the last job was released.
		claimNext := ctx.Err() == nil && lease.Err() == nil && (prev == nil || prev.out.status != StatusNew)
		if prev == nil && !claimNext {
			return worked
		}
		sctx, span := w.q.tel.startClaim(ctx, resource, lease.Token())
		res, err := w.stepRetrying(sctx, lease, resource, prev, claimNext, known)
		w.q.tel.claimed(ctx, span, res.next.plan.claim, err)
		if err != nil {
			w.stepFailed(ctx, log, resource, prev != nil, err)
			return worked
		}
		if prev != nil {
			w.count(log, prev, res.finished)
			prev = nil
		}
		next := res.next
		known = res.known
		if !claimNext || next.plan.empty() {
			return worked
		}
		worked = true
		w.noteClaim(log, next)
		if len(next.plan.claim) > 0 {
			prev = w.handle(ctx, lease, resource, next)
		}
	}
}

// noteClaim counts and logs what a claim step decided besides its claims:
// requests ended in error without a handler, and requests claimed again
// from a worker that lost its lease.
func (w *Worker) noteClaim(log *slog.Logger, next claimed) {
	w.stats.failed.Add(int64(len(next.plan.fail)))
	w.stats.recovered.Add(int64(next.plan.reclaimed))
	for _, f := range next.plan.fail {
		log.Info("request ended in error without a handler", "request", f.req.ID, "reason", f.reason)
	}
	if next.plan.reclaimed > 0 {
		log.Info("claimed again the requests of a worker that lost its lease", "requests", next.plan.reclaimed)
	}
}

// unlock releases the resource's lock at the end of a tenure, for the
// finish timeout even if ctx ended.
func (w *Worker) unlock(ctx context.Context, log *slog.Logger, resource string, lock *spanmutex.Lock) {
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	err := lock.Unlock(uctx)
	cancel()
	switch {
	case err == nil:
	case errors.Is(err, spanmutex.ErrLeaseLost):
		log.Warn("unlock: the lease had been lost", "err", err)
	default:
		log.Error("unlock failed; the resource stays locked until the lease", "err", err)
		if ctx.Err() != nil {
			w.shutdownErr = append(w.shutdownErr, fmt.Errorf("queue: unlock resource %q: %w", resource, err))
		}
	}
}

// stepFailed reports a tenure's step on resource that failed with err
// (recording an outcome, if recording): the tenure ends, and the next
// holder claims the requests again.
func (w *Worker) stepFailed(ctx context.Context, log *slog.Logger, resource string, recording bool, err error) {
	switch {
	case errors.Is(err, spanmutex.ErrLeaseLost):
		w.stats.leasesLost.Add(1)
		log.Warn("the lease was lost; the next holder claims the requests again", "err", err)
	case recording:
		log.Error("could not record the outcome; the next holder claims the requests again", "err", err)
		if ctx.Err() != nil {
			w.shutdownErr = append(w.shutdownErr, fmt.Errorf("queue: record the outcome of resource %q: %w", resource, err))
		}
	case ctx.Err() == nil:
		log.Warn("claim failed; leaving the resource for a later pass", "err", err)
	}
}

// handle runs the handler on a claim, and returns the outcome to record.
func (w *Worker) handle(ctx context.Context, lease *spanmutex.Lease, resource string, c claimed) *finishing {
	job := &Job{Resource: resource, Kind: c.plan.kind, Requests: c.plan.claim, Lease: lease}
	w.stats.jobs.Add(1)
	if job.Kind == KindUpdate {
		w.stats.grouped.Add(int64(len(job.Requests) - 1))
	}
	jctx, span := w.q.tel.startJob(ctx, job)
	began := time.Now()
	herr, overran := w.runHandler(jctx, job)
	out := outcome{status: StatusComplete}
	switch {
	case herr == nil:
	case lease.Err() != nil:
		// Perhaps only our renewals failed and nobody took over: then the
		// fenced write succeeds, and another worker handles them again.
		out = outcome{status: StatusNew, lastError: "lease lost: " + herr.Error()}
	case overran:
		out = outcome{status: StatusNew, lastError: releasedAtShutdown}
	default:
		out = outcome{status: StatusError, lastError: herr.Error()}
	}
	w.q.tel.jobEnded(ctx, span, job, time.Since(began), out.status, herr)
	ids := make([]string, len(job.Requests))
	for i, r := range job.Requests {
		ids[i] = r.ID
	}
	return &finishing{pid: c.processID, ids: ids, out: out}
}

// count adds a recorded outcome to the stats.
func (w *Worker) count(log *slog.Logger, f *finishing, n int) {
	switch f.out.status {
	case StatusComplete:
		w.stats.completed.Add(int64(n))
	case StatusError:
		w.stats.failed.Add(int64(n))
	case StatusNew:
		w.stats.released.Add(int64(n))
	}
	log.Debug("job done", "requests", n, "status", f.out.status)
}

// runHandler calls the handler with a context that carries ctx's values but
// not its cancellation: it is cancelled when the lease is lost, or when ctx
// has ended and the shutdown grace has passed (overran then reports true).
// A panic is returned as an error.
func (w *Worker) runHandler(ctx context.Context, job *Job) (err error, overran bool) {
	hctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancel(nil)
	var over atomic.Bool
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var grace <-chan time.Time
		stop := ctx.Done()
		for {
			select {
			case <-done:
				return
			case <-job.Lease.Done():
				cancel(job.Lease.Err())
				return
			case <-stop:
				stop = nil
				t := time.NewTimer(w.cfg.shutdownGrace)
				defer t.Stop()
				grace = t.C
			case <-grace:
				over.Store(true)
				cancel(errShutdownGrace)
				return
			}
		}
	}()
	err = w.call(hctx, job)
	close(done)
	wg.Wait()
	return err, over.Load()
}

// call runs the handler, turning a panic into an error.
func (w *Worker) call(ctx context.Context, job *Job) (err error) {
	defer func() {
		if r := recover(); r != nil {
			w.cfg.logger.Error("handler panicked", "resource", job.Resource, "panic", r, "stack", string(debug.Stack()))
			err = fmt.Errorf("queue: handler panicked: %v", r)
		}
	}()
	return w.h(ctx, job)
}

// stepRetrying runs step. A step that records an outcome is retried on
// failures that may pass, for up to finishTimeout whatever happened to ctx:
// an outcome not recorded makes the next holder handle the requests again.
// A step that only claims is not: the resource is left for a later pass.
func (w *Worker) stepRetrying(ctx context.Context, lease *spanmutex.Lease, resource string, prev *finishing, claimNext bool, known *resourceRead) (stepResult, error) {
	in := stepInput{prev: prev, claimNext: claimNext, pid: uuid.NewString(), known: known} // the same pid in every retry
	if prev == nil {
		return w.step(ctx, lease, resource, in)
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	wait := 50 * time.Millisecond
	for {
		res, err := w.step(fctx, lease, resource, in)
		if err == nil || errors.Is(err, spanmutex.ErrLeaseLost) || !spanerr.Retryable(err) {
			return res, err
		}
		w.cfg.logger.Warn("recording the outcome failed; retrying", "err", err)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-fctx.Done():
			t.Stop()
			return stepResult{}, err
		}
		wait = min(2*wait, time.Second)
	}
}
