package spanmutex

import (
	"context"
	"errors"
	"time"

	"github.com/spanmutex/spanmutex/internal/leaserule"
)

// semWaiter is one Acquire or TryAcquire call of a Semaphore: it settles
// (reads and writes in one read-write transaction) until its entry is
// granted, and between settles polls with lock-free reads, woken early by
// a datagram when its Scope listens. Every decision is planSem's, on a
// read that shows the present; the local clock only paces reads.
type semWaiter struct {
	s             *Semaphore
	q             semRequest
	wait          bool
	reads, writes *attempts
	wake          <-chan wakeUp
	// entered: an entry of ours may be queued (a settle inserted one, or
	// failed with an outcome that may be unknown), so a call that ends
	// without the lease leaves.
	entered bool
	// sess is the Scope's session, nil without one; sst, the store of its
	// table's sessions (useSession). entrySession is the session our
	// waiting entry names ("": none), whose renewals count as the
	// entry's (sessionRenewed).
	sess         *session
	sst          sessionStore
	entrySession string
}

func (s *Semaphore) newWaiter(n int64, wait bool) *semWaiter {
	q := semRequest{me: s.cfg.scope.newWaiterID(), owner: s.cfg.owner, n: n, size: s.size, lease: s.cfg.lease, op: semTry}
	if wait {
		q.op, q.wake = semAcquire, s.cfg.scope.wakeAddr(s.cfg.logger)
	}
	at := s.cfg.newAttempts(s.name, 2)
	return &semWaiter{s: s, q: q, wait: wait, reads: at[0], writes: at[1]}
}

func (w *semWaiter) now() time.Time { return w.s.cfg.clock.Now() }

// run returns the lease, or the error the call ends with, having left the
// queue (and passed on permits granted to it) in that case.
func (w *semWaiter) run(ctx context.Context) (*Lease, error) {
	defer w.useSession(ctx)() // semaphore_session.go
	if w.wait {
		ch, unregister := w.s.cfg.scope.wakes.register(w.q.me)
		defer unregister()
		w.wake = ch
	}
	lease, err := w.loop(ctx)
	if err != nil && w.entered {
		w.leave(ctx)
	}
	return lease, err
}

// loop settles until our entry is granted and the grant rule lets the
// lease through (grant). Each settle is bounded by the finish timeout, and
// a failed one counts toward WithMaxFailures.
func (w *semWaiter) loop(ctx context.Context) (*Lease, error) {
	for {
		if ctx.Err() != nil {
			return nil, errNotObtained(ctx)
		}
		sent := w.now()
		octx, cancel := detached(ctx, w.s.cfg.finishTimeout)
		w.sessionNow()
		res, err := w.s.store.settle(octx, w.s.name, w.q)
		w.sessionWritten(res, sent, err)
		cancel()
		if err != nil {
			w.entered = true // its outcome may be unknown: an entry of ours may be queued
			if err := w.writes.failed(ctx, err, 0); err != nil {
				return nil, err
			}
			continue
		}
		w.entered = w.entered || res.plan.insert != nil
		w.writes.ok()
		w.s.wake(ctx, res)
		mine := res.plan.mine
		switch {
		case mine == nil:
			return nil, semHeld(w.s.name, res.view, w.q.lease)
		case mine.token == 0:
			w.entrySession = mine.session
			lease, err := w.await(ctx, *mine, readAnchor(sent, res.view.now, mine.renewed))
			if lease != nil || err != nil {
				return lease, err
			}
			continue
		}
		anchor := readAnchor(sent, res.view.now, mine.renewed)
		if res.plan.insert == mine || res.plan.grantedMine() {
			anchor = sent // our commit granted it, after sent
		}
		lease, err := w.grant(ctx, *mine, anchor, res.plan.tookOver, res.plan.insert != mine)
		if lease != nil || err != nil {
			return lease, err
		}
	}
}

// readAnchor is the local time to anchor a lease (or an entry's renewal)
// that a read sent at local time sent found renewed at Spanner time
// renewed, the read's clock being now: no later than the renewal.
func readAnchor(sent, now, renewed time.Time) time.Time {
	return sent.Add(-leaserule.Silent(now, renewed))
}

// grant returns the lease of our entry e, granted with token, anchored at
// anchor: renewed first if our clock counts it old (freshen), or, held
// through our Scope's session, admitted to it (admit), and only if ctx
// has not ended, checked last. A lease lost meanwhile sends us back to
// settle (nil, nil); a renewal that fails otherwise (or a session lost
// since the entry was written) gives the permits back and counts a
// failure. A lease renewed on its own joins the session at its first
// renewal, if the call used one (joinLater).
func (w *semWaiter) grant(ctx context.Context, e semEntry, anchor time.Time, takeover, handed bool) (*Lease, error) {
	if ctx.Err() != nil {
		return nil, errNotObtained(ctx)
	}
	lease := newLease(w.s.name, w.q.owner, w.q.me, e.token, takeover, w.s.cfg.table)
	// The key as key() gives it (UTC, no monotonic reading), so that the
	// renewals' key compares equal to the entry's in the simulation too.
	lease.queuedAt, lease.acquiredAt, lease.anchor, lease.handedOff, lease.shared = e.key().at, e.renewed, anchor, handed, true
	var err error
	if e.throughSession {
		lease.session = e.session
		err = w.admit(ctx, lease)
	} else {
		err = freshen(ctx, semRenewer{w.s.store}, &w.s.cfg, lease)
	}
	switch {
	case err == nil && ctx.Err() != nil:
		if lease.leaveSession != nil {
			lease.leaveSession() // not granted: its session need not keep it
		}
		return nil, errNotObtained(ctx)
	case err == nil:
		w.joinLater(lease)
		return lease, nil
	case errors.Is(err, ErrLeaseLost):
		w.s.cfg.logger.Debug("semaphore: permits granted to us were lost before the grant; waiting again", "token", e.token)
		return nil, nil
	}
	w.leave(ctx)
	return nil, w.writes.failed(ctx, err, 0)
}

// await polls until our waiting entry e (renewed at local time renewed, or
// before) is granted, returning the lease, or until the read shows a grant
// or a deletion to make (nil, nil: settle again), or our entry is gone. It
// renews the entry every two leases, each failed renewal counting toward
// WithMaxFailures and backed off (renewWaiting). It ends with a
// *SizeMismatchError once the stored size is below the permits we ask for
// (Resize): no grant can come then. A waiter that still fits after a
// Resize waits on, and is granted as Resize's doc says.
func (w *semWaiter) await(ctx context.Context, e semEntry, renewed time.Time) (*Lease, error) {
	interval := lockPollInterval
	var token int64
	for {
		if err := w.pause(ctx, interval, w.sessionRenewed(renewed)); err != nil {
			return nil, err
		}
		if renewed = w.sessionRenewed(renewed); w.now().Sub(renewed) >= 2*w.q.lease {
			at, gone, err := w.renewWaiting(ctx, e.key())
			switch {
			case err != nil:
				return nil, err
			case gone:
				return nil, nil // judged dead and deleted: join again
			case !at.IsZero():
				renewed = at
			}
		}
		sent := w.now()
		octx, cancel := detached(ctx, w.s.cfg.finishTimeout)
		v, err := w.s.store.look(octx, w.s.name)
		cancel()
		if err != nil {
			if err := w.reads.failed(ctx, err, 0); err != nil {
				return nil, err
			}
			continue
		}
		w.reads.ok()
		mine, ok := v.find(e.key())
		switch {
		case !ok:
			return nil, nil
		case mine.token != 0:
			return w.grant(ctx, mine, readAnchor(sent, v.now, mine.renewed), false, true)
		case v.exists && w.q.n > v.size:
			// Resized below what we ask for: no grant can ever come.
			return nil, &SizeMismatchError{Name: w.s.name, Stored: v.size, Declared: w.q.size}
		}
		p, err := planSem(w.s.name, v, semRequest{op: semSettle, size: w.q.size, lease: w.q.lease})
		if err != nil || p.writes {
			return nil, err
		}
		if v.token != token {
			token, interval = v.token, lockPollInterval
		}
		interval = min(2*interval, w.maxPoll(), max(v.nextChange(w.q.lease), lockPollInterval))
	}
}

// renewWaiting renews our waiting entry key, within the finish timeout
// (as every call of the waiter: the client itself retries some failures
// until the call's ctx ends). It returns
// the local time the renewal was sent if it was acknowledged; gone if the
// entry is gone; or, the renewal having failed otherwise, a zero time
// after the backoff (the failure counts toward WithMaxFailures with the
// call's other writes), or the error the call ends with: the failure
// itself if no retry mends it, an error matching ErrOutage after
// MaxFailures in a row, or ErrNotObtained once ctx ends.
func (w *semWaiter) renewWaiting(ctx context.Context, key queueKey) (at time.Time, gone bool, err error) {
	sent := w.now()
	octx, cancel := detached(ctx, w.s.cfg.finishTimeout)
	_, err = w.s.store.renewEntry(octx, w.s.name, key)
	cancel()
	switch {
	case err == nil:
		w.writes.ok()
		return sent, false, nil
	case errors.Is(err, ErrLeaseLost):
		return time.Time{}, true, nil
	}
	w.s.cfg.logger.Warn("semaphore: renewal of our waiting entry failed", "err", err)
	return time.Time{}, false, w.writes.failed(ctx, err, 0)
}

// pause waits d, or less if our entry's renewal falls due sooner, or until
// a wake-up arrives; it fails once ctx ends.
func (w *semWaiter) pause(ctx context.Context, d time.Duration, renewed time.Time) error {
	d = min(d, max(2*w.q.lease-w.now().Sub(renewed), 0))
	c, stop := w.s.cfg.clock.NewTimer(d)
	defer stop()
	select {
	case <-c:
		return nil
	case <-w.wake:
		return nil
	case <-ctx.Done():
		return errNotObtained(ctx)
	}
}

// maxPoll bounds the interval between a waiter's reads: a second, or a
// quarter of its lease if shorter. A Scope that listens is woken by the
// Release that grants it; the reads insure against lost datagrams.
func (w *semWaiter) maxPoll() time.Duration {
	most := time.Second
	if w.s.cfg.scope.Addr() == "" { // not woken: WithHeadPoll applies
		most = w.s.cfg.scope.headPollOr(most)
	}
	return min(most, w.q.lease/4)
}

// leave deletes our entries and passes on permits granted to them, with
// the finish timeout even when ctx has ended.
func (w *semWaiter) leave(ctx context.Context) {
	err := w.s.finish(ctx, semRequest{me: w.q.me, op: semLeave, size: w.q.size, lease: w.q.lease}, nil)
	if err != nil {
		w.s.cfg.logger.Warn("semaphore: could not leave the queue; our entry expires after four leases", "err", err)
		return
	}
	w.entered = false
}

// find returns the entry of key in v.
func (v semView) find(key queueKey) (semEntry, bool) {
	for _, e := range v.entries {
		if e.key() == key {
			return e, true
		}
	}
	return semEntry{}, false
}

// nextChange is how long, by v's clock, until the first live entry of v
// lapses (a holder) or dies (a waiter): a read then may find a grant to
// make. own judges entries that declared no lease.
func (v semView) nextChange(own time.Duration) time.Duration {
	next := time.Duration(1<<63 - 1)
	for _, e := range v.entries {
		if left := e.left(v.now, own); left > 0 {
			next = min(next, left+time.Millisecond)
		}
	}
	return next
}

// semHeld is TryAcquire's error for a semaphore read as v: the first live
// holder, the last token and the live waiters.
func semHeld(name string, v semView, own time.Duration) *HeldError {
	he := &HeldError{Name: name, Token: v.token}
	for _, e := range v.entries {
		switch {
		case e.permits == 0 || !semEntryLive(e, v.now, own):
		case e.token == 0:
			he.Waiters++
		case he.Holder == "":
			he.Holder, he.LeaseLeft = e.owner, e.left(v.now, own)
		}
	}
	return he
}
