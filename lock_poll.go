package spanmutex

import (
	"context"
	"time"
)

// Polling of queued waiters behind a holder of another Scope. A waiter with
// k live waiters before it expects its turn in about k hand-offs; it
// measures how long a hand-off takes from how fast the token moves, and
// reads the lock again when three quarters of the time to its turn have
// passed, at least lockPollInterval and at most maxLockPollInterval (and a
// quarter of its lease) apart. The head of the queue so learns of a
// hand-off within about lockPollInterval (within a quarter of the hold, at
// most maxHeadPoll, if its Scope does not listen for wake-ups), and a
// waiter far back costs a few reads. Behind a holder of its own Scope a
// waiter does not poll: that holder's Unlock wakes it.
//
// lockPollInterval (20ms, queue_pacing.go) and maxLockPollInterval (10s)
// are fixed, not options: they pace reads only, and every decision on
// ownership is taken in a read-write transaction whatever they are.
const maxLockPollInterval = 10 * time.Second

// listeningPoll is how often, at most, a waiter whose Scope listens for
// wake-ups reads a held lock when nobody live is queued before it: the
// Unlock that hands it the lock wakes it, and a lost datagram costs up to
// this much. Behind other waiters it reads every behindListeningPoll at
// most: their polls would cost more than the datagrams they insure (at
// 4 processes of 25 waiters, one lockSQL read per acquisition).
const (
	listeningPoll       = time.Second
	behindListeningPoll = 3 * time.Second
)

// maxHeadPoll is the longest a waiter at the head of the queue whose Scope
// does not listen for wake-ups (WithoutWakeUps) sleeps between reads of a
// lock held by another Scope: it reads again after a quarter of the time it
// has seen the holder hold it (headPace), from lockPollInterval up to this.
// A short hold is so followed closely, and a long one costs about 4 reads a
// second; the hand-off is learnt at most a quarter of the hold, and at most
// maxHeadPoll, after it. A Scope that listens is woken by the Unlock that
// hands it the lock instead.
const maxHeadPoll = 300 * time.Millisecond

// waitEffort bounds the Spanner calls one waiting Lock call makes in a
// second, whatever Spanner answers: a read every lockPollInterval at most
// (50), and its entry's renewals and its retries, each after a backoff of
// at least half of defaultInitialBackOff. The simulation holds every
// process to it (inv12, doc/simulation.md); a loop that skips all these
// pauses breaks it.
const waitEffort = 60

// fullReadEvery bounds how many cheap reads a waiter with others before it
// makes between two full ones, which correct its estimate of its place.
const fullReadEvery = 8

// pollPlan is what a waiter knows of its place in the queue, to pace its
// reads. Between full reads, which count the live entries before ours, a
// waiter reads only the lock's row and estimates its place from the token:
// every hand-off adds one.
type pollPlan struct {
	// counted and countedToken are the place and token at the last full
	// read; polls counts cheap reads since; placed reports whether counted
	// is known; recheck, that a renewal found our entry gone.
	counted      int
	countedToken int64
	polls        int
	placed       bool
	recheck      bool
	// handOff estimates how long one hand-off takes, from how fast the token
	// moved between reads; lastToken and lastRead are the previous read's.
	handOff   time.Duration
	lastToken int64
	lastRead  time.Time
	// headToken is the holder's token when this waiter, at the head of
	// the queue, first read it held, at local time headSince (headPace).
	headToken int64
	headSince time.Time
}

// place records that about ahead live entries were before ours when the
// lock's token was token.
func (p *pollPlan) place(ahead int, token int64) {
	p.counted, p.countedToken, p.polls, p.placed, p.recheck = ahead, token, 0, true, false
	if p.lastRead.IsZero() {
		p.lastToken = token
	}
}

// ahead estimates how many live entries are before ours when the lock's
// token is token.
func (p *pollPlan) ahead(token int64) int { return max(p.counted-int(token-p.countedToken), 0) }

// interval returns how long to wait before reading the lock again, given the
// lock's token and about ahead live waiters before us at local time now:
// three quarters of the expected time to our turn, within
// [lockPollInterval, ceiling]. The local clock only paces reads.
func (p *pollPlan) interval(now time.Time, token int64, ahead int, ceiling time.Duration) time.Duration {
	if p.handOff == 0 {
		p.handOff = 2 * lockPollInterval
	}
	if moved := token - p.lastToken; moved > 0 && !p.lastRead.IsZero() {
		sample := now.Sub(p.lastRead) / time.Duration(moved)
		p.handOff = (3*p.handOff + sample) / 4
	}
	p.lastToken, p.lastRead = token, now
	// A hand-off slower than a couple of polls (say, while a crowd joins)
	// is no guide to the next ones: trusting it would oversleep our turn.
	perHandOff := min(p.handOff, 2*lockPollInterval)
	if ahead >= maxAhead {
		return ceiling
	}
	return min(max(time.Duration(ahead)*perHandOff*3/4, lockPollInterval), ceiling)
}

// headPace returns how long a waiter at the head of the queue, not woken by
// wake-ups, sleeps before reading again a lock a read at local time now
// showed held with token: a quarter of how long it has seen that token
// hold it, within [lockPollInterval, maxHeadPoll]. The local clock only
// paces reads.
func (p *pollPlan) headPace(now time.Time, token int64, most time.Duration) time.Duration {
	if token != p.headToken || p.headSince.IsZero() {
		p.headToken, p.headSince = token, now
	}
	return min(max(now.Sub(p.headSince)/4, lockPollInterval), most)
}

// glance is TryLock's first look: the lock's row alone, by key (the
// store's glance), which spares a TryLock refused by a live holder
// lockSQL's statement. It decides (ok) when the row's Queued column says
// the queue is empty: nobody is then before us, as fullRead would count.
// It also sends a TryLock that finds no row at all to acquire: the
// acquisition reads the queue itself, inside its read-write transaction,
// and if it finds the lock taken, the next look reads in full. Otherwise
// (ok false) the caller reads in full. Whatever it shows, acquiring
// decides again inside a read-write transaction.
func (w *waiter) glance(ctx context.Context) (v lockView, ok bool, err error) {
	octx, cancel := detached(ctx, w.lock.cfg.finishTimeout)
	defer cancel()
	r, err := w.st.glance(octx, w.lock.name)
	if err != nil || (r.Exists && r.Queued != markEmpty) {
		return lockView{}, false, err
	}
	return lockView{row: r}, true, nil
}

// look reads the lock: fully (row, place in the queue, our entry) when not
// queued, when our entry may have been dropped as dead, and every
// fullReadEvery polls while others are before us; otherwise only the lock's
// row, a point read whose cost does not grow with the queue, and fully
// after all if that shows the lock free or its holder silent, or held by
// another Scope while we do not know our place.
func (w *waiter) look(ctx context.Context) (lockView, error) {
	est := w.poll.ahead(w.poll.lastToken)
	// An Unlock drops our entry only once it has gone unrenewed for its TTL
	// by Spanner's clock, which is after the TTL has passed on ours since
	// we sent the last renewal it acknowledged.
	mayBeDropped := w.poll.recheck || w.now().Sub(w.entryRenewed) >= w.entryTTL()/2
	if !w.joined || w.key == endOfQueue || mayBeDropped || (w.poll.placed && est > 1 && w.poll.polls >= fullReadEvery) {
		return w.fullRead(ctx)
	}
	octx, cancel := detached(ctx, w.lock.cfg.finishTimeout)
	defer cancel()
	r, err := w.st.read(octx, w.lock.name)
	if err != nil {
		return lockView{}, err
	}
	mine := r.heldBy(w.id)
	if !mine && !holderLive(r, w.pol.lease) {
		// Free, or its holder silent: whether we are first decides, and
		// the estimate may be stale (waiters who left do not move the
		// token). Count exactly.
		return w.fullRead(ctx)
	}
	if !w.poll.placed {
		if local, _ := w.local.heldLocally(r.LeaseID); !local && !mine {
			// Behind a holder of another Scope we poll, paced by our place:
			// count it.
			return w.fullRead(ctx)
		}
		// Behind a holder of our Scope our place does not matter (we do
		// not poll): say we are far back.
		return lockView{row: r, ahead: maxAhead, queued: true}, nil
	}
	w.poll.polls++
	return lockView{row: r, ahead: w.poll.ahead(r.Token), queued: true}, nil
}

// fullRead reads the lock's row, our place in the queue and whether our
// entry is there.
func (w *waiter) fullRead(ctx context.Context) (lockView, error) {
	octx, cancel := detached(ctx, w.lock.cfg.finishTimeout)
	defer cancel()
	v, err := w.st.readLock(octx, w.lock.name, queueKey{at: w.key.at, id: w.id})
	if err == nil {
		w.poll.place(v.ahead, v.Token)
	}
	return v, err
}

// ceiling is the longest a waiter behind a holder of another Scope sleeps
// between reads: a quarter of its own lease, so that it notices a hand-off
// to it well within the lease it is handed.
func (w *waiter) ceiling() time.Duration {
	return min(maxLockPollInterval, max(w.lock.cfg.lease/4, lockPollInterval))
}

// handedAnchor returns the anchor (see keepAlive) of a lease that a read
// sent at local time sent found handed to us in r: a local time before the
// commit that made us holder and set RenewedAt. Each of these is one:
//   - sent less r's silence: the read's snapshot, later than sent, came
//     that long (by Spanner's clock) after the commit;
//   - when an Unlock of our Scope woke us, the time it sent its
//     transaction (a waiter is handed the lock once).
//
// The latest is the tighter. Only durations are compared across clocks.
// (The send time of an earlier read that did not show the lock ours is no
// anchor: an entry of ours of unknown outcome may have been handed the lock
// before it, while we were paused; the simulation, seed 578383.)
func (w *waiter) handedAnchor(sent time.Time, r row) time.Time {
	anchor := sent.Add(-silentFor(r))
	if w.handedAt.After(anchor) && !w.ownAttempt {
		anchor = w.handedAt
	}
	return anchor
}
