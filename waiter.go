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
	// renewEvery, how often to renew it: a watermark, drawn lower at random
	// for the first renewal so that waiters that joined together do not
	// renew together.
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
	// handOff estimates how long one hand-off takes, from how fast the token
	// moved between reads; lastToken and lastRead are the previous read's.
	handOff   time.Duration
	lastToken int64
	lastRead  time.Time
}

// fullReadEvery bounds how many cheap reads a waiter makes between two full
// ones, which also notice an entry of ours dropped as dead.
const fullReadEvery = 8

// look reads the lock: fully (row, place in the queue, our entry) when not
// queued, near the head, or every fullReadEvery polls; otherwise only the
// lock's row, a point read whose cost does not grow with the queue.
func (w *waiter) look(ctx context.Context, ttl time.Duration) (lockView, error) {
	l := w.lock
	est := w.counted - int(w.lastToken-w.countedToken)
	if !w.joined || w.key == endOfQueue || est <= 1 || w.polls >= fullReadEvery {
		v, err := l.store.readLock(ctx, l.name, w.key, ttl)
		if err == nil {
			w.counted, w.countedToken, w.polls = v.ahead, v.Token, 0
		}
		return v, err
	}
	r, err := l.store.read(ctx, l.name)
	if err != nil {
		return lockView{}, err
	}
	if r.State != StateStarted || silentFor(r) >= l.cfg.watermark {
		// Free, or its holder silent: whether we are first decides, and
		// the estimate may be stale (waiters who left do not move the
		// token). Count exactly.
		w.polls = fullReadEvery
		return w.look(ctx, ttl)
	}
	w.polls++
	return lockView{row: r, ahead: max(w.counted-int(r.Token-w.countedToken), 0), queued: true}, nil
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
	// Never sleep past a quarter watermark: a lease handed to us is anchored
	// at our previous read, and our entry is renewed only between polls.
	ceiling := min(MaxLockPollInterval, max(w.lock.cfg.watermark/4, LockPollInterval))
	if ahead >= maxAhead {
		return ceiling
	}
	return min(max(time.Duration(ahead)*perHandOff*3/4, LockPollInterval), ceiling)
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
			lease.acquiredAt, lease.anchor, lease.handedOff = v.StartedAt, w.quiet, !w.ownAttempt
			l.cfg.logger.Debug("lock: handed to us", "token", v.Token)
			return lease, nil
		case lockAcquire, lockTakeOver:
			w.touched = true
			txSent := clk.Now()
			_, lease, err := l.store.acquireLock(ctx, l.name, w.key, pol, claim{owner: l.cfg.owner, leaseID: w.id}, ttl)
			if err != nil {
				// If it did commit, the next read finds our id in the row;
				// a hand-off found then committed after our read at sent.
				w.quiet = sent
				w.ownAttempt = w.ownAttempt || spanner.ErrCode(err) != codes.Aborted
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
		if w.entryDue(clk.Now(), v.ahead) {
			w.renewEntry(ctx)
		}
		interval := w.pollInterval(sent, v.Token, v.ahead)
		if d.wait > 0 && v.ahead == 0 {
			interval = min(interval, d.wait)
		}
		if err := sleep(ctx, clk, interval); err != nil {
			return nil, errors.Join(ErrNotObtained, ctx.Err())
		}
	}
}

// join inserts our entry at the back of the queue. An insert of unknown
// outcome is settled by looking our id up.
func (w *waiter) join(ctx context.Context) error {
	l := w.lock
	w.touched, w.joined = true, true
	sent := l.cfg.clock.Now()
	key, err := l.store.enqueue(ctx, l.name, l.cfg.owner, w.id)
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
	w.key, w.entryRenewed, w.quiet = key, sent, sent
	w.renewEvery = l.cfg.watermark/2 + drawJitter(l.cfg.watermark, 0.5)
	return nil
}

// nearHead is how close to the head of the queue a waiter renews its entry
// every watermark; further back it renews every half TTL, enough to stay
// live, since hand-offs look at the head only. This keeps the blind writes
// of a long queue low.
const nearHead = 64

// entryDue reports whether our entry should be renewed now, at local time
// now, with about ahead live waiters before us.
func (w *waiter) entryDue(now time.Time, ahead int) bool {
	since := now.Sub(w.entryRenewed)
	if ahead <= nearHead {
		return since >= w.renewEvery
	}
	return since >= w.lock.waiterTTL()/2
}

// renewEntry proves the waiter alive. A failure is logged and retried at the
// next poll; an entry found gone is noticed by the next poll.
func (w *waiter) renewEntry(ctx context.Context) {
	l := w.lock
	sent := l.cfg.clock.Now()
	err := l.store.renewWaiter(ctx, l.name, w.key)
	switch {
	case err == nil:
		w.entryRenewed, w.renewEvery = sent, l.cfg.watermark
	case spanner.ErrCode(err) == codes.NotFound:
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
		if err := l.store.leave(ctx, l.name, w.key); err != nil {
			l.cfg.logger.Warn("lock: leaving the queue failed; the entry expires after the watermark", "err", err)
		}
	}
	v, err := l.store.readLock(ctx, l.name, endOfQueue, l.waiterTTL())
	if err != nil || !(v.State == StateStarted && v.LeaseID == w.id) {
		return
	}
	lease := newLease(l.name, v.Owner, w.id, v.Token, false, l.store.table)
	if _, err := l.store.unlock(ctx, lease, l.waiterTTL()); err != nil {
		l.cfg.logger.Warn("lock: passing on a lock handed to us after we stopped waiting failed; it is taken over after the watermark", "err", err)
	}
}
