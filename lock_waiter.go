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
// is free, or joins the queue and waits to be handed the lock. Its steps are
// arrive (one transaction that takes the lock or queues us), look (read the
// lock), try (take a lock found free), await (queue, renew our entry,
// sleep), and on failure abandon (leave, passing on a lock handed to us).
type waiter struct {
	lock  *Lock
	st    lockStore
	pol   policy
	local *localLock
	// wake receives the hint that an Unlock of our Scope handed us the lock;
	// handedAt is, once it did, the local time just before that Unlock's
	// transaction was sent.
	wake     <-chan wakeUp
	handedAt time.Time
	// inScope is, once an Unlock of our Scope woke us, what its
	// acknowledged commit gave us.
	inScope wakeUp
	// remoteWoken reports a wake-up from another process not yet followed
	// by a read.
	remoteWoken bool
	// id is the waiter's queue id and, once it holds the lock, its lease id:
	// a hand-off writes it into the lock's row, which is how the waiter (or
	// the read that settles an acquisition of unknown outcome) knows.
	id  string
	key queueKey // endOfQueue until joined
	// born is the local time the waiter was made, before any write of its
	// was sent: every commit that names id holder came after it.
	born time.Time
	// joined reports whether an entry may be in the queue; touched whether
	// the lock may have been given to us (joined, or an acquisition sent);
	// strays whether an entry of ours whose key we never learnt may exist;
	// glanced whether a TryLock has had its first look (lookFirst).
	joined, touched, strays, glanced bool
	// ownAttempt reports whether an acquisition of ours may have committed
	// without our knowing: the lock found in our name may then be our own
	// doing rather than a hand-off.
	ownAttempt bool
	// entryRenewed is the local send time of the last renewal of our entry;
	// renewEvery, how often to renew it: half the entry's TTL, drawn lower
	// at random for the first renewal so that waiters that joined together
	// do not renew together.
	entryRenewed time.Time
	renewEvery   time.Duration
	// reads and writes count failed Spanner calls in a row; renewals,
	// the failed renewals of leases found ours before their grant, which
	// no successful acquisition resets (else a renewal that always fails
	// would acquire and give back forever).
	reads, writes, renewals *attempts
	poll                    pollPlan
	// foundOurs reports that the call ends holding a lease it found ours
	// and did not grant.
	foundOurs bool
	// aborts counts a TryLock's attempts that Spanner aborted (try).
	aborts int
	// sess is the Scope's session, nil without one; sst, the store of its
	// table's sessions; session, the id of it that the waiter's
	// acquisitions write (useSession).
	sess    *session
	sst     sessionStore
	session string
	// startSession is the session's row if the next acquisition starts
	// the session (session.next): it inserts the row if it writes the id.
	startSession *sessionRow
	// entrySession is the session our entry names ("": none), whose
	// renewals count as the entry's (sessionRenews).
	entrySession string
	// resent reports that an entry of ours was inserted by a join whose
	// commit the client may have sent more than once (joinWrite): an
	// earlier send's entry may remain under a key we never learnt, so
	// leaving deletes our entries by id, not our known key.
	resent bool
	// seen is a read, made by another step (join's placing read), that
	// showed the lock ours: the next step acts on it without reading again.
	seen *seenRead
}

// seenRead is a read of the lock and the local time just before it was
// sent (or earlier).
type seenRead struct {
	v    lockView
	sent time.Time
}

// run takes the lock or waits for it; with wait false it never queues.
// Every lease it finds ours passes grant before it is returned.
func (w *waiter) run(ctx context.Context, wait bool) (*Lease, error) {
	var lease *Lease
	if wait {
		var err error
		if lease, err = w.arrive(ctx); err != nil {
			if err := w.writes.failed(ctx, err, 0); err != nil {
				return nil, err
			}
		}
	}
	for {
		if lease != nil {
			granted, err := w.grant(ctx, lease)
			// Ending without granting a lease found ours: leaving hands it
			// on in one transaction (leave), with no read that can fail.
			w.foundOurs = err != nil
			if granted != nil || err != nil {
				return granted, err
			}
		}
		var err error
		if lease, err = w.step(ctx, wait); err != nil {
			return nil, err
		}
	}
}

// step is one turn of run's loop: it returns a lease found ours, an error
// to end with, or neither, to go on.
func (w *waiter) step(ctx context.Context, wait bool) (*Lease, error) {
	if w.inScope.token > 0 {
		return w.handedInScope(), nil
	}
	if lease := w.confirmRemote(ctx); lease != nil {
		return lease, nil
	}
	if s := w.seen; s != nil {
		w.seen = nil
		return w.act(ctx, s.v, s.sent, wait)
	}
	if ctx.Err() != nil {
		return nil, errNotObtained(ctx)
	}
	sent := w.now()
	v, err := w.lookFirst(ctx, wait)
	if err != nil {
		return nil, w.reads.failed(ctx, err, 0)
	}
	w.reads.ok()
	if w.dropped(v) {
		return nil, nil
	}
	return w.act(ctx, v, sent, wait)
}

// lookFirst is look, but a TryLock's first look glances at the row
// (glance), and reads in full only if that does not decide; its later
// looks read in full.
func (w *waiter) lookFirst(ctx context.Context, wait bool) (lockView, error) {
	if !wait && !w.glanced {
		w.glanced = true
		if v, ok, err := w.glance(ctx); ok || err != nil {
			return v, err
		}
	}
	return w.look(ctx)
}

// grant is the grant rule (CORRECTNESS_DISCLAIMER.md, claim 11): a lease
// found ours, by our own acknowledged commit or a read that shows the
// present, goes to the caller only after freshen, the last Spanner call
// before the grant (a waiter paused across its hand-off finds its lease old
// by its own clock and renews it first, fenced; a renewal that finds the
// lease lost, taken over meanwhile, sends us back to wait), and only if the
// caller's ctx has not ended, checked last (else ErrNotObtained, and
// abandon hands the lock on). It returns nil and no error to go on waiting.
func (w *waiter) grant(ctx context.Context, lease *Lease) (*Lease, error) {
	if ctx.Err() != nil {
		return nil, errNotObtained(ctx)
	}
	if w.strays {
		// An insert of ours had an unknown outcome: an entry of ours may
		// remain, and would be handed the lock after we are gone.
		w.strays = !w.lock.purge(ctx, w.local, w.id)
		if ctx.Err() != nil {
			return nil, errNotObtained(ctx)
		}
	}
	_, err := gated(ctx, w.local, func() (struct{}, error) {
		var err error
		if lease.session != "" {
			err = w.admit(ctx, lease)
		} else {
			err = freshen(ctx, w.st, &w.lock.cfg, lease)
		}
		if err == nil {
			// Held, and no longer queued, in the Scope's eyes before the
			// gate opens: a waiter of the Scope that runs next sees its
			// holder here, and whether it is now the first queued (a call
			// that ends without the lease releases the hold).
			w.local.hold(w.id)
			w.local.unqueue(w.id)
		}
		return struct{}{}, err
	})
	switch {
	case err == nil && ctx.Err() != nil:
		if lease.leaveSession != nil {
			lease.leaveSession() // not granted: its session need not keep it
		}
		return nil, errNotObtained(ctx)
	case err == nil:
		if w.key != endOfQueue {
			lease.queuedAt = w.key.at
		}
		w.joinLater(lease)
		return lease, nil
	case errors.Is(err, ErrLeaseLost):
		// Taken over while we were away: the hand-off that gave it to us
		// is spent, so forget it, or every turn would find it again.
		w.lock.cfg.logger.Debug("lock: a lease found ours was lost before it could be granted; waiting again", "token", lease.token, "err", err)
		w.forgetHandOffs()
		return nil, nil
	}
	w.giveBack(ctx, lease, err)
	return nil, w.renewals.failed(ctx, err, 0)
}

// giveBack hands on at once a lease found ours that grant could not grant
// (its renewal failed, or came back too late), so that the lock never
// stalls behind a lease that nobody holds while we back off: a lease the
// library acquired for a call reaches the caller or is given back at once.
// Once it is given back we wait again from the back of the queue; if
// Spanner fails the give-back for the finish timeout too (logged), the
// next read finds the lease still ours and grant tries again.
func (w *waiter) giveBack(ctx context.Context, lease *Lease, why error) {
	w.lock.cfg.logger.Warn("lock: a lease handed to us could not be renewed before the grant; handing it on and waiting again", "token", lease.token, "err", why)
	if w.retryLeave(ctx, w.handOn) {
		w.joined, w.key, w.touched = false, endOfQueue, false
		w.forgetHandOffs()
	}
}

// forgetHandOffs forgets every hand-off to us we were told of, once we
// have given the lock back: a wake-up from the Unlock that handed it to us
// may still wait in our channel, and must not grant it again.
func (w *waiter) forgetHandOffs() {
	select {
	case <-w.wake:
	default:
	}
	w.inScope, w.handedAt, w.remoteWoken = wakeUp{}, time.Time{}, false
}

// act does what the lock read as v at local time sent calls for: it returns
// the lease found ours, or the error the call ends with, or neither, to go
// on.
func (w *waiter) act(ctx context.Context, v lockView, sent time.Time, wait bool) (*Lease, error) {
	d := decideLock(v, w.id, w.pol)
	switch d.action {
	case lockWrongKind:
		if v.State == StateShared {
			return nil, fmt.Errorf("spanmutex: lock %q: the name is a Semaphore's or an RWLock's (its row is SHARED): hold it with NewSemaphore or NewRWLock, or give the Lock another name", w.lock.name)
		}
		return nil, fmt.Errorf("spanmutex: lock %q: the name is a run-once Mutex's (its row is %s), or was written by something else: give the Lock another name", w.lock.name, v.State)
	case lockHeld:
		return w.handed(v, sent), nil
	case lockAcquire, lockTakeOver, lockPassOn:
		if d.action == lockPassOn && w.key == endOfQueue {
			break // join first (TryLock: report the lock held)
		}
		lease, queue, err := w.try(ctx, v, wait)
		if lease != nil || err != nil || !queue {
			return lease, err // with neither: read again
		}
	}
	if !wait {
		return nil, &HeldError{Name: w.lock.name, Holder: v.Owner, Token: v.Token, Waiters: v.ahead, LeaseLeft: leaseLeft(v.row, w.pol.lease)}
	}
	return nil, w.await(ctx, v, d, sent)
}

func (w *waiter) now() time.Time { return w.lock.cfg.clock.Now() }

// dropped reports whether v shows our entry gone although we joined: an
// Unlock skipped it as dead because we did not renew it in time. We then
// join again, at the back.
func (w *waiter) dropped(v lockView) bool {
	if !w.joined || v.queued || v.heldBy(w.id) || w.key == endOfQueue {
		return false
	}
	w.lock.cfg.logger.Warn("lock: our queue entry was dropped as dead; joining again")
	w.joined, w.key = false, endOfQueue
	return true
}

// handed returns the lease of a lock found handed to us (or taken by an
// acquisition of ours whose answer was lost) by a read sent at local time
// sent.
func (w *waiter) handed(v lockView, sent time.Time) *Lease {
	w.lock.cfg.logger.Debug("lock: handed to us", "token", v.Token)
	return w.leaseOf(v.row, w.handedAnchor(sent, v.row))
}

// leaseOf returns our lease of the lock a read found ours in r, anchored at
// anchor (see keepAlive).
func (w *waiter) leaseOf(r row, anchor time.Time) *Lease {
	lease := newLease(w.lock.name, r.Owner, w.id, r.Token, false, w.lock.cfg.table)
	lease.acquiredAt, lease.handedOff, lease.anchor, lease.session = r.StartedAt, !w.ownAttempt, anchor, r.Session
	return lease
}

// handedInScope returns the lease an Unlock of our Scope handed us: its
// acknowledged commit made us holder, so no read is needed. The lease is
// anchored at the time that Unlock sent its transaction, before its commit.
func (w *waiter) handedInScope() *Lease {
	h := w.inScope
	lease := newLease(w.lock.name, h.owner, w.id, h.token, false, w.lock.cfg.table)
	lease.acquiredAt, lease.handedOff, lease.anchor = h.at, true, h.sent
	w.lock.cfg.logger.Debug("lock: handed to us in our Scope", "token", h.token)
	return lease
}

// confirmRemote reads the lock's row after a wake-up from another
// process, by key in a strong single-use read (glance: one RPC that shows
// the present, takes no locks and is never aborted), and returns our lease if
// the read shows the lock handed to us; nil otherwise (the datagram was
// late, wrong or forged, or the read failed: the loop reads the lock as
// after any wake-up). The datagram only says when to read: a datagram that
// arrives late (our process was paused, say) finds the lock moved on or
// gets a lease that grant renews before it is granted. The lease is
// anchored at born, before every write of ours that
// could have made us holder, never at a time from the datagram; grant
// renews it first if that is a renewal interval ago.
func (w *waiter) confirmRemote(ctx context.Context) *Lease {
	woken := w.remoteWoken
	w.remoteWoken = false
	if !woken || w.key == endOfQueue || ctx.Err() != nil {
		return nil
	}
	octx, cancel := detached(ctx, w.lock.cfg.finishTimeout)
	defer cancel()
	r, err := w.st.glance(octx, w.lock.name)
	if err != nil || !r.heldBy(w.id) {
		return nil
	}
	w.lock.cfg.logger.Debug("lock: handed to us, by a wake-up confirmed by a read", "token", r.Token)
	return w.leaseOf(r, w.born)
}

// try takes a lock that a read found free (or its holder
// silent past its declared lease). It returns the lease if it took it;
// queue if the caller should wait in the queue instead; an error to end
// with; or nothing, to read again.
func (w *waiter) try(ctx context.Context, v lockView, wait bool) (lease *Lease, queue bool, err error) {
	if !w.local.tryAcquiring() {
		if wait && !w.joined {
			// Another contender of our Scope is acquiring or holds the lock:
			// our read is stale, and trying would cost an attempt that is
			// refused or aborted. Queue instead.
			return nil, true, nil
		}
		w.local.startAcquiring()
	}
	touched := w.touched
	w.touched = true
	res, err := w.attempt(ctx, w.now(), false)
	if res.lease == nil && (err == nil || spanner.ErrCode(err) == codes.Aborted) {
		// Nothing of ours was written (the transaction found the lock
		// taken and rolled back, or was aborted): leaving has nothing to
		// undo for this attempt.
		w.touched = touched
	}
	if err == nil {
		w.writes.ok()
		return res.lease, false, nil
	}
	// If it did commit, the next read finds our id in the row.
	if spanner.ErrCode(err) == codes.Aborted && ctx.Err() == nil {
		// Another transaction overlapped ours, a known outcome: nothing
		// was written. A Lock call waits in the queue instead of retrying.
		// A TryLock attempts again, after the delay Spanner asks for: an
		// abort says nothing of who holds the lock (the emulator aborts
		// every transaction that overlaps another, on any row), and the
		// next attempt reads the present. Past tryLockAborts, it reports
		// the lock held by a concurrent contender.
		if wait {
			return nil, !w.joined, nil
		}
		if w.aborts >= tryLockAborts {
			return nil, false, &HeldError{Name: w.lock.name, Holder: "(a concurrent contender)", Waiters: v.ahead}
		}
		w.aborts++
		if err := w.backOff(ctx, abortDelay(err)); err != nil {
			return nil, false, errNotObtained(ctx)
		}
		return w.try(ctx, v, wait)
	}
	w.ownAttempt = w.ownAttempt || res.sent
	return nil, false, w.writes.failed(ctx, err, 0)
}

// tryLockAborts is how many times a TryLock attempts again after Spanner
// aborted its attempt.
const tryLockAborts = 3

// abortDelay is how long to wait before attempting again after Spanner
// aborted an attempt with err: the delay it asked for, else 20ms (the Go
// client's first retry delay).
func abortDelay(err error) time.Duration {
	if d, ok := spanner.ExtractRetryDelay(err); ok {
		return d
	}
	return 20 * time.Millisecond
}

// attempt makes one acquisition attempt (see acquireLock), sent at local
// time sent, after the caller counted it in the Scope (tryAcquiring or
// startAcquiring); with join, it queues us if we must wait. A lease it takes
// is anchored at sent and counts as held in the Scope.
func (w *waiter) attempt(ctx context.Context, sent time.Time, join bool) (acquireResult, error) {
	octx, cancel := detached(ctx, w.lock.cfg.finishTimeout)
	defer cancel()
	w.sessionNow()
	settled := false
	res, err := gated(ctx, w.local, func() (acquireResult, error) {
		res, err := w.st.acquireLock(octx, w.lock.name, w.key, w.pol, w.claim(join), join)
		w.sessionWritten(res, sent, err) // before the gate opens, as hold is
		if err == nil && res.decision.action == lockPassOn {
			// We handed a silent holder's lock on: wake whom we handed it to.
			settled = w.lock.settleAtGate(w.local, "", res.handed, sent)
		}
		if res.lease != nil {
			w.local.hold(w.id) // at the gate (heldInScope), before doneAcquiring: no moment when neither shows
		}
		return res, err
	})
	if err == nil && res.decision.action == lockPassOn && !settled {
		w.lock.handedOn(w.local, "", res.handed, sent)
	}
	if res.lease != nil {
		res.lease.anchor = sent
		w.lock.cfg.logger.Debug("lock: acquired", "token", res.lease.token, "takeover", res.lease.takeover)
	}
	w.local.doneAcquiring()
	return res, err
}

// claim is who we are in an acquisition: our owner identity and our id,
// and, if it may queue us (join), the address our Scope is woken at (which
// starts its listener if need be; an attempt that cannot queue us needs
// none).
func (w *waiter) claim(join bool) claim {
	c := claim{owner: w.lock.cfg.owner, leaseID: w.id, session: w.session, startSession: w.startSession}
	if join {
		c.wakeAddr = w.lock.scope.wakeAddr(w.lock.cfg.logger)
	}
	return c
}

// await waits in the queue after a read at local time sent showed v and
// decideLock said d: it joins if we are not queued, renews our entry when
// due, and sleeps until the next read is due, a wake-up, or ctx's end.
func (w *waiter) await(ctx context.Context, v lockView, d lockDecision, sent time.Time) error {
	if !w.joined {
		if err := w.join(ctx); err != nil {
			return w.writes.failed(ctx, err, 0)
		}
		w.writes.ok()
		return nil
	}
	if w.entryDue(w.now()) {
		w.renewEntry(ctx)
	}
	interval := w.poll.interval(sent, v.Token, v.ahead, w.ceiling())
	if w.lock.scope.Addr() != "" && v.State == StateStarted {
		// The Unlock that hands us the lock wakes us: polling is only the
		// fallback for a lost datagram, rarer behind other waiters.
		floor := listeningPoll
		if v.ahead > 0 {
			floor = behindListeningPoll
		}
		interval = min(max(interval, floor), w.ceiling())
	} else if v.State == StateStarted && v.ahead == 0 {
		// Nothing wakes us: we learn of the Unlock by reading, closely
		// while the hold is young, sparingly once it has lasted.
		most := w.lock.scope.headPollOr(maxHeadPoll)
		interval = min(max(interval, w.poll.headPace(sent, v.Token, most)), w.ceiling())
	}
	if d.wait > 0 && v.ahead == 0 {
		interval = min(interval, d.wait)
	}
	var gone *departure
	if v.State == StateStarted && d.wait > 0 {
		if local, ch := w.heldInScope(ctx, v.LeaseID); local {
			// Its Unlock wakes us if it hands us the lock, and gone closes
			// if the lock leaves the Scope: no need to poll. We still read
			// by the time our entry is due for renewal, and when a takeover
			// of a silent holder would be allowed.
			interval, gone = max(interval, min(w.lock.cfg.lease, d.wait, w.untilRenewal(w.now()))), ch
		}
	}
	w.lock.cfg.logger.Debug("lock: waiting", "for", interval)
	return w.sleepBehind(ctx, interval, gone)
}

// heldInScope is heldLocally, read holding the Scope's gate for the lock:
// a contender of the Scope that was granted the lock marks it held under
// the gate, and may be waiting for it as we let it go after a call of
// ours; reading at the gate, we see its mark (or its absence) the same way
// on every run of a simulated schedule, not as the runtime orders two
// goroutines. Without the gate (ctx ended), it reports not held.
func (w *waiter) heldInScope(ctx context.Context, id string) (bool, *departure) {
	type held struct {
		local bool
		gone  *departure
	}
	h, _ := gated(ctx, w.local, func() (held, error) {
		local, gone := w.local.heldLocally(id)
		return held{local, gone}, nil
	})
	return h.local, h.gone
}

// sleepBehind sleeps as sleep does, behind a holder of our Scope that gone
// follows (nil: none). If that holder handed the lock to a waiter of
// another Scope and our Scope listens, our turn comes by a wake-up: it
// sleeps on, as a listening waiter polls, rather than have every waiter of
// the Scope read the lock at once. Any other way the lock left the Scope
// (freed, or the lease lost) is read at once. It returns
// errNotObtained(ctx) if ctx ends.
func (w *waiter) sleepBehind(ctx context.Context, d time.Duration, gone *departure) error {
	if err := w.sleep(ctx, d, gone); err != nil {
		return errNotObtained(ctx)
	}
	if !gone.wentAway() || w.lock.scope.Addr() == "" || !w.joined || w.inScope.token > 0 || w.remoteWoken {
		return nil
	}
	// The first of our Scope's waiters may be next; the others are behind
	// it.
	poll := behindListeningPoll
	if w.local.firstQueued(w.id) {
		poll = listeningPoll
	}
	w.lock.cfg.logger.Debug("lock: handed to another process; waiting to be woken", "for", poll)
	if err := w.sleep(ctx, min(poll, w.ceiling(), w.untilRenewal(w.now())), nil); err != nil {
		return errNotObtained(ctx)
	}
	return nil
}

// backOff waits d between failed calls, as sleep does: a hand-off to us
// ends it early, so that we never back off while the lock is ours.
func (w *waiter) backOff(ctx context.Context, d time.Duration) error {
	return w.sleep(ctx, d, nil)
}

// sleep waits for d, or until an Unlock of our Scope says it handed us the
// lock, or gone is closed, or until ctx ends; it returns ctx.Err() in the
// last case.
func (w *waiter) sleep(ctx context.Context, d time.Duration, gone *departure) error {
	c, stop := w.lock.cfg.clock.NewTimer(d)
	defer stop()
	select {
	case <-c:
	case h := <-w.wake:
		if !h.sent.IsZero() { // a wake-up from another process anchors nothing
			w.handedAt = h.sent
		}
		if h.token > 0 {
			w.inScope = h
		}
		w.remoteWoken = w.remoteWoken || !h.remoteAt.IsZero()
	case <-gone.ch():
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}
