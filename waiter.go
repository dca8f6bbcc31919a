package spanmutex

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/spanner"
	"google.golang.org/grpc/codes"
)

// waiter is one Lock or TryLock call of a contender: it takes the lock if it
// is free, or joins the queue and waits to be handed the lock.
type waiter struct {
	lock *Lock
	// local is what the contenders of this lock in this process share;
	// wake receives the hint that an Unlock of this process handed us the
	// lock.
	local *localLock
	wake  <-chan time.Time
	// handedAt is, once an Unlock of this process woke us, the local time
	// just before its transaction was sent.
	handedAt time.Time
	// id is the waiter's queue id and, once it holds the lock, its lease id:
	// a hand-off writes it into the lock's row, which is how the waiter (or
	// the read that settles an acquisition of unknown outcome) knows.
	id  string
	key queueKey // endOfQueue until joined
	// joined reports whether an entry may be in the queue; touched whether
	// the lock may have been given to us (joined, or an acquisition sent);
	// strays whether an entry of ours whose key we never learnt may exist.
	joined, touched, strays bool
	// ownAttempt reports whether an acquisition of ours may have committed
	// without our knowing: the lock found in our name may then be our own
	// doing rather than a hand-off.
	ownAttempt bool
	// entryRenewed is the local send time of the last renewal of our entry;
	// renewEvery, how often to renew it: half the waiters' TTL, drawn lower
	// at random for the first renewal so that waiters that joined together
	// do not renew together.
	entryRenewed time.Time
	renewEvery   time.Duration
	// quiet is the local send time of the latest read that did not show the
	// lock handed to us: a hand-off found later committed after it, so it is
	// a safe anchor for the lease's renewals.
	quiet time.Time
	// Between full reads, which count the live entries before ours, a
	// waiter reads only the lock's row, and estimates its place from the
	// token: every hand-off adds one. counted and countedToken are the place
	// and token at the last full read; polls counts cheap reads since.
	counted      int
	countedToken int64
	polls        int
	// placed reports whether counted is known; recheck, that a renewal
	// found our entry gone.
	placed, recheck bool
	// handOff estimates how long one hand-off takes, from how fast the token
	// moved between reads; lastToken and lastRead are the previous read's.
	handOff   time.Duration
	lastToken int64
	lastRead  time.Time
}

// fullReadEvery bounds how many cheap reads a waiter with others before it
// makes between two full ones, which correct its estimate of its place.
const fullReadEvery = 8

// look reads the lock: fully (row, place in the queue, our entry) when not
// queued, when our entry may have been dropped as dead, and every
// fullReadEvery polls while others are before us; otherwise only the lock's
// row, a point read whose cost does not grow with the queue, and fully
// after all if that shows the lock free or its holder silent, or held by
// another process while we do not know our place.
func (w *waiter) look(ctx context.Context, ttl time.Duration) (lockView, error) {
	l := w.lock
	est := w.counted - int(w.lastToken-w.countedToken)
	// An Unlock drops our entry only once it has gone unrenewed for ttl by
	// Spanner's clock, which is after ttl has passed on ours since we sent
	// the last renewal it acknowledged.
	mayBeDropped := w.recheck || l.cfg.clock.Now().Sub(w.entryRenewed) >= ttl/2
	if !w.joined || w.key == endOfQueue || mayBeDropped || (w.placed && est > 1 && w.polls >= fullReadEvery) {
		return w.fullRead(ctx, ttl)
	}
	r, err := l.store.read(ctx, l.name)
	if err != nil {
		return lockView{}, err
	}
	mine := r.State == StateStarted && r.LeaseID == w.id
	if !mine && (r.State != StateStarted || silentFor(r) >= l.cfg.watermark) {
		// Free, or its holder silent: whether we are first decides, and
		// the estimate may be stale (waiters who left do not move the
		// token). Count exactly.
		return w.fullRead(ctx, ttl)
	}
	if !w.placed {
		if local, _ := w.local.heldLocally(r.LeaseID); !local && !mine {
			// Behind a holder of another process we poll, paced by our
			// place: count it.
			return w.fullRead(ctx, ttl)
		}
		// Behind a holder of this process our place does not matter (we
		// do not poll): say we are far back.
		return lockView{row: r, ahead: maxAhead, queued: true}, nil
	}
	w.polls++
	return lockView{row: r, ahead: max(w.counted-int(r.Token-w.countedToken), 0), queued: true}, nil
}

// fullRead reads the lock's row, our place in the queue and whether our
// entry is there.
func (w *waiter) fullRead(ctx context.Context, ttl time.Duration) (lockView, error) {
	v, err := w.lock.store.readLock(ctx, w.lock.name, w.key, ttl)
	if err == nil {
		w.place(v.ahead, v.Token)
		w.recheck = false
	}
	return v, err
}

// place records that about ahead live entries were before ours when the
// lock's token was token.
func (w *waiter) place(ahead int, token int64) {
	w.counted, w.countedToken, w.polls, w.placed = ahead, token, 0, true
	if w.lastRead.IsZero() {
		w.lastToken = token
	}
}

// pollInterval returns how long to wait before reading the lock again, given
// the lock's token and about ahead live waiters before us at local time now:
// three quarters of the expected time to our turn, within
// [LockPollInterval, MaxLockPollInterval]. The local clock only paces reads.
func (w *waiter) pollInterval(now time.Time, token int64, ahead int) time.Duration {
	if w.handOff == 0 {
		w.handOff = 2 * LockPollInterval
	}
	if moved := token - w.lastToken; moved > 0 && !w.lastRead.IsZero() {
		sample := now.Sub(w.lastRead) / time.Duration(moved)
		w.handOff = (3*w.handOff + sample) / 4
	}
	w.lastToken, w.lastRead = token, now
	// A hand-off slower than a couple of polls (say, while a crowd joins)
	// is no guide to the next ones: trusting it would oversleep our turn.
	perHandOff := min(w.handOff, 2*LockPollInterval)
	ceiling := w.ceiling()
	if ahead >= maxAhead {
		return ceiling
	}
	return min(max(time.Duration(ahead)*perHandOff*3/4, LockPollInterval), ceiling)
}

// handedAnchor returns the anchor (see keepAlive) of a lease that a read
// sent at local time sent found handed to us in r: a local time before the
// commit that made us holder and set RenewedAt. Each of these is one:
//   - quiet, the send time of an earlier read that did not show it;
//   - sent less r's silence: the read's snapshot, later than sent, came
//     that long (by Spanner's clock) after the commit;
//   - when an Unlock of this process woke us, the time it sent its
//     transaction (a waiter is handed the lock once).
//
// The latest is the tightest. Only durations are compared across clocks.
func (w *waiter) handedAnchor(sent time.Time, r row) time.Time {
	anchor := w.quiet
	if a := sent.Add(-silentFor(r)); a.After(anchor) {
		anchor = a
	}
	if w.handedAt.After(anchor) && !w.ownAttempt {
		anchor = w.handedAt
	}
	return anchor
}

// ceiling is the longest a waiter behind a holder of another process sleeps
// between reads: a quarter watermark, so that it notices a hand-off to it
// well within the lease it is handed.
func (w *waiter) ceiling() time.Duration {
	return min(MaxLockPollInterval, max(w.lock.cfg.watermark/4, LockPollInterval))
}

func (w *waiter) run(ctx context.Context, pol policy, wait bool) (*Lease, error) {
	l := w.lock
	clk, ttl := l.cfg.clock, l.waiterTTL()
	bo := l.cfg.newBackOff()
	// Failed Spanner calls in a row, of each kind (reads; acquisitions and
	// joins); MaxAttempts bounds both.
	failedReads, failedWrites := 0, 0
	retry := func(failures *int, err error) error {
		if ctx.Err() != nil {
			return errors.Join(ErrNotObtained, ctx.Err())
		}
		if !isTransient(err) && !isUnknownOutcome(err) {
			return err
		}
		if *failures++; *failures >= l.cfg.maxAttempts {
			return &ExhaustedError{Name: l.name, Attempts: int64(*failures), MaxAttempts: l.cfg.maxAttempts, LastError: err.Error(), Err: err}
		}
		l.cfg.logger.Warn("lock: Spanner call failed; backing off", "err", err)
		if perr := pauseWith(ctx, clk, bo, 0); perr != nil {
			if errors.Is(perr, errBackOffStopped) {
				return &ExhaustedError{Name: l.name, Attempts: int64(*failures), MaxAttempts: l.cfg.maxAttempts, LastError: "the backoff policy stopped", Err: err}
			}
			return errors.Join(ErrNotObtained, ctx.Err())
		}
		return nil
	}
	w.quiet = clk.Now()
	if wait {
		lease, err := w.arrive(ctx, pol, ttl)
		if lease != nil {
			return lease, nil
		}
		if err != nil {
			if rerr := retry(&failedWrites, err); rerr != nil {
				return nil, rerr
			}
		} else if held, gone := w.local.anyHeld(); held && w.joined && w.key != endOfQueue {
			// Queued behind a holder of this process: wait for its Unlock's
			// wake-up, or for the lock to leave the process, before reading.
			if err := w.sleep(ctx, min(l.cfg.watermark, w.untilRenewal(clk.Now())), gone); err != nil {
				return nil, errors.Join(ErrNotObtained, ctx.Err())
			}
		}
	}
	for {
		if ctx.Err() != nil {
			return nil, errors.Join(ErrNotObtained, ctx.Err())
		}
		sent := clk.Now()
		v, err := w.look(ctx, ttl)
		if err != nil {
			if rerr := retry(&failedReads, err); rerr != nil {
				return nil, rerr
			}
			continue
		}
		failedReads = 0
		mine := v.Exists && v.State == StateStarted && v.LeaseID == w.id
		if w.joined && !v.queued && !mine && w.key != endOfQueue {
			// Our entry is gone: an Unlock skipped it as dead because we did
			// not renew it within the watermark. Join again, at the back.
			l.cfg.logger.Warn("lock: our queue entry was dropped as dead; joining again")
			w.joined, w.key = false, endOfQueue
			continue
		}
		d := decideLock(v, w.id, pol)
		switch d.action {
		case lockWrongKind:
			return nil, fmt.Errorf("spanmutex: lock %q: the row is %s: it belongs to a run-once Mutex of the same name (or was written by something else); use another name for the lock", l.name, v.State)
		case lockHeld:
			lease := newLease(l.name, v.Owner, w.id, v.Token, false, l.store.table)
			lease.acquiredAt, lease.handedOff = v.StartedAt, !w.ownAttempt
			lease.anchor = w.handedAnchor(sent, v.row)
			l.cfg.logger.Debug("lock: handed to us", "token", v.Token)
			return lease, nil
		case lockAcquire, lockTakeOver:
			if !w.local.tryAcquiring() {
				if wait && !w.joined {
					// Another contender of this process is acquiring or holds
					// the lock: our read is stale, and trying would cost an
					// attempt that is refused or aborted. Queue instead.
					d = lockDecision{action: lockWait}
					break
				}
				w.local.startAcquiring()
			}
			w.touched = true
			txSent := clk.Now()
			res, err := gated(ctx, w.local, func() (acquireResult, error) {
				return l.store.acquireLock(ctx, l.name, w.key, pol, claim{owner: l.cfg.owner, leaseID: w.id}, ttl, false)
			})
			lease := res.lease
			if lease != nil {
				w.local.hold(w.id) // before doneAcquiring: no moment when neither shows
			}
			w.local.doneAcquiring()
			if err != nil {
				// If it did commit, the next read finds our id in the row;
				// a hand-off found then committed after our read at sent.
				w.quiet = sent
				w.ownAttempt = w.ownAttempt || (res.sent && spanner.ErrCode(err) != codes.Aborted)
				if spanner.ErrCode(err) == codes.Aborted && ctx.Err() == nil {
					// Lost a race for the lock: wait in the queue instead of
					// retrying (a known outcome: nothing was written).
					if wait && !w.joined {
						if err := w.join(ctx); err != nil {
							if rerr := retry(&failedWrites, err); rerr != nil {
								return nil, rerr
							}
						}
					} else if !wait {
						return nil, &HeldError{Name: l.name, Holder: "(a concurrent contender)", Waiters: v.ahead}
					}
					continue
				}
				if rerr := retry(&failedWrites, err); rerr != nil {
					return nil, rerr
				}
				continue
			}
			failedWrites = 0
			if lease != nil {
				lease.anchor = txSent
				l.cfg.logger.Debug("lock: acquired", "token", lease.token, "takeover", lease.takeover)
				return lease, nil
			}
			w.quiet = sent
			continue // the row changed since our read
		}
		// lockWait.
		w.quiet = sent
		if !wait {
			return nil, &HeldError{Name: l.name, Holder: v.Owner, Token: v.Token, Waiters: v.ahead}
		}
		if !w.joined {
			if err := w.join(ctx); err != nil {
				if rerr := retry(&failedWrites, err); rerr != nil {
					return nil, rerr
				}
			} else {
				failedWrites = 0
			}
			continue
		}
		if w.entryDue(clk.Now()) {
			w.renewEntry(ctx)
		}
		interval := w.pollInterval(sent, v.Token, v.ahead)
		if d.wait > 0 && v.ahead == 0 {
			interval = min(interval, d.wait)
		}
		var gone <-chan struct{}
		if v.State == StateStarted && d.wait > 0 {
			if local, ch := w.local.heldLocally(v.LeaseID); local {
				// Its Unlock wakes us if it hands us the lock, and gone
				// closes if the lock leaves the process: no need to poll.
				// We still read by the time our entry is due for renewal,
				// and when a takeover of a silent holder would be allowed.
				interval, gone = max(interval, min(l.cfg.watermark, d.wait, w.untilRenewal(clk.Now()))), ch
			}
		}
		if err := w.sleep(ctx, interval, gone); err != nil {
			return nil, errors.Join(ErrNotObtained, ctx.Err())
		}
	}
}

// sleep waits for d, or until an Unlock of this process says it handed us
// the lock, or gone is closed, or until ctx ends; it returns ctx.Err() in
// the last case.
func (w *waiter) sleep(ctx context.Context, d time.Duration, gone <-chan struct{}) error {
	c, stop := w.lock.cfg.clock.NewTimer(d)
	defer stop()
	select {
	case <-c:
	case w.handedAt = <-w.wake:
	case <-gone:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// join inserts our entry at the back of the queue. An insert of unknown
// outcome is settled by looking our id up.
func (w *waiter) join(ctx context.Context) error {
	l := w.lock
	w.touched, w.joined = true, true
	sent := l.cfg.clock.Now()
	res := w.local.join(ctx, l.store, l.name, l.cfg.owner, w.id, l.waiterTTL(), l.cfg.finishTimeout)
	key, err := res.key, res.err
	if err != nil {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.finishTimeout)
		found, ok, ferr := l.store.findQueued(fctx, l.name, w.id)
		cancel()
		if ferr != nil || !ok {
			// Not in the queue, or unknown: join again on the next loop. An
			// entry that did land may be handed the lock (we notice: it
			// carries our id), and is purged once we hold the lock or leave.
			w.joined = false
			// An insert whose answer was lost may also land after our look.
			w.strays = w.strays || ferr != nil || isUnknownOutcome(err)
			return err
		}
		key = found
	}
	w.enqueued(key, sent)
	if res.placed {
		w.place(res.ahead, res.token)
	}
	return nil
}

// enqueued records that our entry, inserted by a commit sent at local time
// sent, is in the queue under key.
func (w *waiter) enqueued(key queueKey, sent time.Time) {
	w.joined, w.touched = true, true
	w.key, w.entryRenewed, w.quiet = key, sent, sent
	w.renewEvery = w.lock.waiterTTL()/2 - drawJitter(w.lock.waiterTTL(), 1.0/8)
}

// arrive is a Lock call's first move, made without reading the lock first:
// one read-write transaction that takes the lock if it is free and nobody
// waits, and otherwise queues us (acquireLock with join). If another
// contender of this process is acquiring or holds the lock, it queues us in
// a blind insert shared with the other waiters of the process that join
// meanwhile instead. It returns the lease if it took the lock, and
// otherwise leaves the rest to the waiting loop: queued, or not (w.joined
// says which) after a refusal or an error, which it returns.
func (w *waiter) arrive(ctx context.Context, pol policy, ttl time.Duration) (*Lease, error) {
	l := w.lock
	if !w.local.tryAcquiring() {
		return nil, w.join(ctx)
	}
	sent := l.cfg.clock.Now()
	res, err := gated(ctx, w.local, func() (acquireResult, error) {
		return l.store.acquireLock(ctx, l.name, endOfQueue, pol, claim{owner: l.cfg.owner, leaseID: w.id}, ttl, true)
	})
	if res.lease != nil {
		w.local.hold(w.id) // before doneAcquiring: no moment when neither shows
	}
	w.local.doneAcquiring()
	if err == nil {
		w.touched = true
	}
	if lease := res.lease; lease != nil {
		lease.anchor = sent
		l.cfg.logger.Debug("lock: acquired", "token", lease.token, "takeover", lease.takeover)
		return lease, nil
	}
	w.quiet = sent
	switch {
	case err == nil && res.decision.action == lockWait:
		w.enqueued(res.key, sent)
		w.place(res.ahead, res.token)
		return nil, nil
	case err == nil:
		return nil, nil // the waiting loop reads the row and says why
	case spanner.ErrCode(err) == codes.Aborted && ctx.Err() == nil:
		// Lost a race: nothing was written. Queue without reading.
		return nil, w.join(ctx)
	}
	if res.sent {
		// It may have committed: the lock taken (the loop's read finds our
		// id in the row) or our entry inserted under a key we never learnt.
		w.touched, w.ownAttempt = true, true
		w.strays = w.strays || isUnknownOutcome(err)
	}
	return nil, err
}

// entryDue reports whether our entry should be renewed at local time now.
// Half the TTL leaves the other half for a renewal that fails to be retried
// at the following polls (at most a quarter watermark apart) before the
// entry counts as dead; renewing more often would cost a blind write per
// waiter and renewal, which in a long queue would outnumber the hand-offs.
func (w *waiter) entryDue(now time.Time) bool {
	return now.Sub(w.entryRenewed) >= w.renewEvery
}

// untilRenewal returns how long after local time now our entry is due for
// renewal (at least LockPollInterval).
func (w *waiter) untilRenewal(now time.Time) time.Duration {
	return max(w.renewEvery-now.Sub(w.entryRenewed), LockPollInterval)
}

// renewEntry proves the waiter alive. A failure is logged and retried at the
// next poll; an entry found gone is noticed by the next poll.
func (w *waiter) renewEntry(ctx context.Context) {
	l := w.lock
	sent := l.cfg.clock.Now()
	_, err := gated(ctx, w.local, func() (struct{}, error) { return struct{}{}, l.store.renewWaiter(ctx, l.name, w.key) })
	switch {
	case err == nil:
		w.entryRenewed, w.renewEvery = sent, l.waiterTTL()/2
	case spanner.ErrCode(err) == codes.NotFound:
		w.recheck = true
	default:
		l.cfg.logger.Warn("lock: renewing our queue entry failed", "err", err)
	}
}

// abandon cleans up after a Lock call that ends without the lock: it leaves
// the queue and, if the lock was handed to us meanwhile (or an acquisition
// of unknown outcome committed), passes it on. It runs even if ctx is done.
func (w *waiter) abandon(ctx context.Context) {
	if !w.touched {
		return
	}
	l := w.lock
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.finishTimeout)
	defer cancel()
	if w.joined && w.key != endOfQueue {
		if err := w.local.leave(ctx, l.store, l.name, w.key, l.cfg.finishTimeout); err != nil {
			l.cfg.logger.Warn("lock: leaving the queue failed; the entry expires after four watermarks", "err", err)
		}
	}
	v, err := l.store.readLock(ctx, l.name, endOfQueue, l.waiterTTL())
	if err != nil || !(v.State == StateStarted && v.LeaseID == w.id) {
		return
	}
	lease := newLease(l.name, v.Owner, w.id, v.Token, false, l.store.table)
	sent := l.cfg.clock.Now()
	to, err := gated(ctx, w.local, func() (handOff, error) { return l.store.unlock(ctx, lease, l.waiterTTL()) })
	if err != nil {
		l.cfg.logger.Warn("lock: passing on a lock handed to us after we stopped waiting failed; it is taken over after the watermark", "err", err)
		return
	}
	local := ""
	if to.waiterID != "" && l.wakeups.wake(to.waiterID, sent) {
		local = to.waiterID
	}
	w.local.release(w.id, local)
}
