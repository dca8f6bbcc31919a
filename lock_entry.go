package spanmutex

import (
	"context"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/spanmutex/spanmutex/internal/spanerr"
	"google.golang.org/grpc/codes"
)

// A waiter's entry in the lock's queue: how it arrives, joins, proves it is
// alive, and leaves.

// arrive is a Lock call's first move, made without reading the lock first:
// one read-write transaction that takes the lock if it is free and nobody
// waits, and otherwise queues us. If another contender of our Scope is
// acquiring or holds the lock, it queues us in a blind insert shared with
// the Scope's other waiters that join meanwhile instead, and waits behind
// that contender (joinBehindScope). It returns the lease if it took the
// lock; if it queued us, it first waits as the loop would after a read that
// showed the lock held (the transaction read it); otherwise it leaves the
// rest to the loop: queued, or not (w.joined says which) after a refusal or
// an error, which it returns (ctx's end included).
func (w *waiter) arrive(ctx context.Context) (*Lease, error) {
	if !w.local.tryAcquiring() {
		return nil, w.joinBehindScope(ctx)
	}
	sent := w.now()
	res, err := w.attempt(ctx, sent, true) // w.key is endOfQueue: not queued yet
	if err == nil {
		w.touched = true
	}
	if res.lease != nil {
		return res.lease, nil
	}
	switch {
	case err == nil && res.decision.action == lockWait:
		w.enqueued(res.key, sent, w.session)
		if !res.view.uncounted {
			w.poll.place(res.view.ahead, res.view.Token)
		}
		// The transaction that queued us read the lock: wait before the
		// first read, as after any read that showed it held.
		return nil, w.await(ctx, res.view, res.decision, sent)
	case err == nil:
		return nil, nil // the waiting loop reads the row and says why
	case spanner.ErrCode(err) == codes.Aborted && ctx.Err() == nil:
		// Lost a race: nothing was written. Queue without reading.
		return nil, w.joinBehindScope(ctx)
	}
	if res.sent {
		// It may have committed: the lock taken (the loop's read finds our
		// id in the row) or our entry inserted under a key we never learnt
		// (abandon deletes it by our id).
		w.touched, w.ownAttempt = true, true
		w.strays = w.strays || spanerr.UnknownOutcome(err)
	}
	return nil, err
}

// join inserts our entry at the back of the queue. An insert of unknown
// outcome is settled by looking our id up; as its sends may each have
// been applied (joinWrite), entries of ours we did not find may remain
// (strays), deleted by our id once we hold the lock or leave.
func (w *waiter) join(ctx context.Context) error {
	l := w.lock
	w.touched, w.joined, w.resent = true, true, true
	sent := w.now()
	entry := queueInsert{id: w.id, owner: l.cfg.owner, lease: l.cfg.lease, wakeAddr: l.scope.wakeAddr(l.cfg.logger)}
	var written func(time.Time, error)
	if w.sess != nil {
		// The entry names the Scope's session, and starts it if need be.
		entry.session, entry.start = w.sess.next()
		written = func(at time.Time, err error) { sessionWritten(w.sess, entry.session, entry.start, sent, at, err) }
	}
	res := w.local.join(ctx, w.st, l.name, entry, l.cfg.finishTimeout, written)
	if res.err != nil {
		w.strays = w.strays || spanerr.UnknownOutcome(res.err)
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.finishTimeout)
		found, ok, ferr := w.st.findQueued(fctx, l.name, w.id)
		cancel()
		if ferr != nil || !ok {
			// Not in the queue, or unknown: join again on the next loop. An
			// entry that did land may be handed the lock (we notice: it
			// carries our id), and is deleted by our id once we hold the
			// lock or leave.
			w.joined = false
			w.strays = w.strays || ferr != nil
			return res.err
		}
		res.key = found
	}
	w.enqueued(res.key, sent, entry.session)
	if res.placed {
		w.poll.place(res.ahead, res.token)
		if res.row.heldBy(w.id) {
			// An entry of ours of unknown outcome was handed the lock: act
			// on the read that shows it, at once (step).
			w.seen = &seenRead{v: lockView{row: res.row, queued: true}, sent: sent}
		}
	}
	return nil
}

// joinBehindScope queues us without reading (join) and then, if a
// contender of our Scope holds the lock, waits for its Unlock's wake-up or
// for the lock to leave the Scope before the first read.
func (w *waiter) joinBehindScope(ctx context.Context) error {
	if err := w.join(ctx); err != nil {
		return err
	}
	held, gone := w.local.anyHeld()
	if !held || !w.joined || w.key == endOfQueue || w.seen != nil {
		return nil
	}
	return w.sleepBehind(ctx, min(w.lock.cfg.lease, w.untilRenewal(w.now())), gone)
}

// enqueued records that our entry, inserted by a commit sent at local time
// sent and naming session ("": none), is in the queue under key.
func (w *waiter) enqueued(key queueKey, sent time.Time, session string) {
	w.joined, w.touched = true, true
	w.key, w.entryRenewed, w.entrySession = key, sent, session
	w.local.setQueued(w.id, key)
	w.renewEvery = w.entryTTL()/2 - w.lock.cfg.drawJitter(w.entryTTL(), 1.0/8)
}

// entryTTL is how long our entry stays live without a renewal, by Spanner's
// clock: waiterTTLFactor of the lease we declare.
func (w *waiter) entryTTL() time.Duration { return waiterTTLFactor * w.lock.cfg.lease }

// entryDue reports whether our entry should be renewed at local time now.
// Half the TTL leaves the other half for a renewal that fails to be retried
// at the following polls (at most a quarter lease apart) before the entry
// counts as dead; renewing more often would cost a blind write per waiter
// and renewal, which in a long queue would outnumber the hand-offs.
func (w *waiter) entryDue(now time.Time) bool {
	return now.Sub(w.entryRenewed) >= w.renewEvery
}

// untilRenewal returns how long after local time now our entry is due for
// renewal (at least lockPollInterval).
func (w *waiter) untilRenewal(now time.Time) time.Duration {
	return max(w.renewEvery-now.Sub(w.entryRenewed), lockPollInterval)
}

// renewEntry proves the waiter alive: nothing to write while our entry
// names the Scope's live session (sessionRenews); otherwise one blind
// write, which names the live session if there is one. A failure is logged
// and retried at the next poll; an entry found gone is noticed by the next
// poll.
func (w *waiter) renewEntry(ctx context.Context) {
	if w.sessionRenews() {
		return
	}
	sent, session := w.now(), w.liveSession()
	octx, cancel := detached(ctx, w.lock.cfg.finishTimeout)
	defer cancel()
	_, err := gated(ctx, w.local, func() (struct{}, error) {
		return struct{}{}, w.st.renewWaiter(octx, w.lock.name, w.key, session)
	})
	switch {
	case err == nil:
		w.entryRenewed, w.renewEvery, w.entrySession = sent, w.entryTTL()/2, session
	case spanner.ErrCode(err) == codes.NotFound:
		w.poll.recheck = true
	default:
		w.lock.cfg.logger.Warn("lock: renewing our queue entry failed", "err", err)
	}
}

// abandon cleans up after a Lock call that ends without the lock: it
// deletes every entry of ours and, if the lock was handed to us meanwhile
// (or an acquisition of unknown outcome committed), hands it on, so that
// nobody waits for a caller that has gone. It runs even if ctx is done, and
// keeps trying for the finish timeout; if that fails too, our entries
// expire after their TTL and a lock handed to us after our lease. It
// reports whether it left.
func (w *waiter) abandon(ctx context.Context) bool {
	if !w.touched {
		return true
	}
	return w.retryLeave(ctx, w.leave)
}

// orphaned records in our Scope that this call returned, with token (0:
// without the lock), leaving entries of ours that its leave or purge could
// not delete: an Unlock of the Scope that hands the lock to one of them
// hands it on for us (Lock.handedOn).
func (w *waiter) orphaned(token int64) {
	now := w.now()
	w.lock.scope.wakes.orphan(w.id, orphan{token: token, until: now.Add(w.entryTTL())}, now)
}

// retryLeave makes tries at leaving (one is try) until one succeeds, for
// the finish timeout even if ctx is done, and reports whether one did.
func (w *waiter) retryLeave(ctx context.Context, try func(context.Context) error) bool {
	if err := w.lock.retryFinish(ctx, try); err != nil {
		w.lock.cfg.logger.Warn("lock: leaving the queue failed; our entry expires after four leases, and a lock handed to us after one", "err", err)
		return false
	}
	return true
}

// leave makes one try at what abandon does. When our only entry is one we
// know (not one a join may have sent twice: resent) and no lease was
// found ours, a blind delete and a strong read do: a
// hand-off to us that committed before the delete shows in the read, and
// none can commit after it (an Unlock that read our entry conflicts with
// the delete). Otherwise, and when the read shows the lock handed to us,
// one read-write transaction deletes our entries by id and hands the lock
// on.
func (w *waiter) leave(ctx context.Context) error {
	l := w.lock
	if w.joined && w.key != endOfQueue && !w.strays && !w.resent && !w.ownAttempt && !w.foundOurs && !w.toldHandedInScope() {
		if _, err := gated(ctx, w.local, func() (struct{}, error) { return struct{}{}, w.st.dequeue(ctx, l.name, w.key) }); err != nil {
			return err
		}
		w.joined = false
		// Unless our Scope says the lock was handed to us meanwhile, a
		// strong read says whether it was.
		if !w.toldHandedInScope() {
			r, err := w.st.read(ctx, l.name)
			if err != nil && !w.toldHandedInScope() {
				return err
			}
			if err == nil && !r.heldBy(w.id) {
				return nil
			}
		}
	}
	return w.handOn(ctx)
}

// toldHandedInScope reports whether an Unlock of our Scope said it handed us
// the lock, in a wake-up we may not have read yet.
func (w *waiter) toldHandedInScope() bool {
	select {
	case h := <-w.wake:
		if h.token > 0 {
			w.inScope = h
		}
	default:
	}
	return w.inScope.token > 0
}

// handOn deletes our entries and, if the lock is ours, hands it on, in one
// transaction.
func (w *waiter) handOn(ctx context.Context) error {
	l := w.lock
	sent := w.now()
	settled := false
	to, err := gated(ctx, w.local, func() (handOff, error) {
		to, err := w.st.leave(ctx, l.name, w.id)
		if err == nil {
			settled = l.settleAtGate(w.local, w.id, to, sent)
		}
		return to, err
	})
	if err == nil && !settled {
		l.handedOn(w.local, w.id, to, sent)
	}
	return err
}
