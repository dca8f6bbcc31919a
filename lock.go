package spanmutex

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/spanmutex/spanmutex/internal/spanerr"
)

// Lock is a reusable distributed lock, held by one holder at a time and
// granted first come, first served among live waiters. Make it with NewLock.
//
// A Lock value is one contender: it holds at most one lease at a time. Its
// methods may be called from any goroutine, but Lock or TryLock while this
// value holds or is acquiring the lock returns an error: use one Lock per
// contender, and give the Locks of one process the same Scope. While held,
// the lease is renewed in the background until Unlock; Lease.Done closes if
// it is lost, and the holder should then stop. Unlock hands the lock to the
// oldest live waiter; a Lock call that returns without the lock has left the
// queue and passed on a lock handed to it, so it delays nobody.
//
// A Lock not made by NewLock (its zero value, or nil) does nothing: Lock,
// TryLock and Unlock return an error wrapping ErrInvalidConfig, Name and
// Owner "".
//
// A Lock uses the run-once Mutex's table and row (NEEDED or no row is free,
// STARTED is held), and refuses a name that a Mutex has completed. How it
// queues, hands off and wakes waiters is in doc/design.md, section 4.
type Lock struct {
	name  string
	cfg   config
	store lockStore
	sp    *spannerStore // the store on Spanner; nil in unit tests
	key   localKey
	scope *Scope

	mu      sync.Mutex
	busy    bool                  // a Lock or TryLock call is under way, or the lock is held
	held    *Lease                // the lease while held
	stopRen func(unreleased bool) // stops its renewals (keepHeld)
	local   *localLock            // while held: what the Scope's contenders share
}

// NewLock returns a reusable lock named name, stored in client's database.
// WithLease sets the lease this Lock declares when it holds the
// lock: it renews within it, and others take over only after it has passed
// unrenewed, by Spanner's clock, whatever their own lease. Queued, it
// proves it is alive about every two leases, and Unlock skips its entry
// once it has not for four. Every error wraps ErrInvalidConfig.
func NewLock(client *spanner.Client, name string, opts ...LockOption) (*Lock, error) {
	if client == nil {
		return nil, errNilClient("NewLock")
	}
	cfg, err := configure(name, opts) // configure.go
	if err != nil {
		return nil, err
	}
	sp := cfg.newStore(client)
	sp.shared = cfg.scope
	sp.needsQueue = true
	key := localKey{database: client.DatabaseName(), table: cfg.table, name: name}
	return &Lock{name: name, cfg: cfg, store: sp, sp: sp, key: key, scope: cfg.scope}, nil
}

// Lock blocks until this contender holds the lock, and returns its lease.
// Otherwise it returns an error matching ErrNotObtained and ctx.Err() if ctx
// ends first; an error matching ErrOutage if Spanner kept failing (MaxFailures calls
// in a row); an error matching ErrSchema; or an error naming the run-once Mutex that owns
// the name. Whenever it returns without the lease it has left the queue and
// handed on a lock handed to it meanwhile, in one transaction, so that it
// delays nobody (if Spanner fails that too for the finish timeout, its entry
// expires after four leases).
func (l *Lock) Lock(ctx context.Context) (*Lease, error) {
	return l.lock(ctx, true)
}

// TryLock takes the lock if it is free and nobody is queued for it, and
// returns at once otherwise, with a *HeldError that says who holds it and
// how long its lease has still to run. It never joins the queue. An
// attempt that Spanner aborts (another transaction overlapped it) is made
// again, up to 3 times after the delay Spanner asks for, before TryLock
// reports the lock held by "(a concurrent contender)"; if ctx ends
// meanwhile, it returns an error matching ErrNotObtained and ctx.Err().
func (l *Lock) TryLock(ctx context.Context) (*Lease, error) {
	return l.lock(ctx, false)
}

func (l *Lock) lock(ctx context.Context, wait bool) (*Lease, error) {
	if ctx == nil {
		return nil, errNilContext
	}
	if l == nil || l.store == nil {
		return nil, errNotMade("Lock", "NewLock")
	}
	began := time.Now()
	l.mu.Lock()
	if l.busy {
		l.mu.Unlock()
		return nil, fmt.Errorf("spanmutex: lock %q: this Lock already holds or is acquiring the lock; Unlock first, or use one Lock per contender", l.name)
	}
	l.busy = true
	l.mu.Unlock()

	actx, acq := l.cfg.tel.start(ctx, "spanmutex.acquire", lockKind(wait)) // telemetry.go
	ll := l.scope.get(l.key)
	lease, err := l.acquire(actx, ll, wait)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.scope.put(ll)
		l.busy = false
		if l.sp != nil {
			err = l.sp.unreached(ctx, err, began)
		}
		acq.granted(nil, err)
		return nil, err
	}
	acq.granted(lease, nil)
	_, hold := l.cfg.tel.start(ctx, "spanmutex.hold", lockKind(wait), attrToken.Int64(lease.token))
	lease.setHold(hold)
	l.held, l.local = lease, ll
	l.stopRen = l.keepHeld(lease, ll)
	return lease, nil
}

// Unlock releases the lock, handing it to the oldest live waiter. It is
// fenced: if the lease was lost (taken over once it lapsed), it returns
// an error matching ErrLeaseLost and leaves the new holder's lock alone. It
// keeps trying for the finish window (WithFinishTimeout, or ctx's deadline
// if later); if Spanner keeps failing that long, it returns an error
// matching ErrOutage: whether the Unlock landed is unknown, and if it did
// not, the lease, no longer renewed, lapses after its length (held through
// a Scope's session, which other leases may keep renewing, it is unlocked
// again in the background every renewal interval until that lands or the
// session is lost). When it
// returns, the lease has ended: its Done is closed, and its Err matches
// ErrReleased (or ErrLeaseLost, if it was lost).
func (l *Lock) Unlock(ctx context.Context) (err error) {
	if ctx == nil {
		return errNilContext
	}
	if l == nil || l.store == nil {
		return errNotMade("Lock", "NewLock")
	}
	ctx, un := l.cfg.tel.start(ctx, "spanmutex.Unlock", "unlock") // telemetry.go
	defer func() { un.unlocked(err) }()
	l.mu.Lock()
	lease, stop, ll := l.held, l.stopRen, l.local
	if lease == nil {
		l.mu.Unlock()
		return fmt.Errorf("spanmutex: Unlock of lock %q, which this Lock does not hold", l.name)
	}
	l.held, l.stopRen, l.local = nil, nil, nil
	l.mu.Unlock()
	defer func() {
		ll.release(lease.id, "") // if the unlock did not say whom it handed the lock to
		l.scope.put(ll)
		l.mu.Lock()
		l.busy = false
		l.mu.Unlock()
	}()
	// Renewals go on until the unlock is settled, so that a slow unlock
	// (an overloaded Spanner) does not let the lease lapse into a takeover.
	lease.unlocking.Store(true)
	unreleased := false
	defer func() { stop(unreleased) }()
	defer func() { lease.holdOp().held(lease, unlockOutcome(err), err) }() // telemetry.go
	err = l.release(ctx, ll, lease)
	unreleased = err != nil && !errors.Is(err, ErrLeaseLost)
	lease.end(err) // Done closes: released, or lost
	return err
}

// release unlocks lease, settling a commit of unknown outcome by reading the
// row: if the lock has moved on from our lease, there is nothing left to do.
// It keeps trying for as long as the caller's ctx allows, and for at least
// the finish timeout even if ctx is already done: a lock left held blocks
// every waiter until its lease runs out.
func (l *Lock) release(ctx context.Context, ll *localLock, lease *Lease) error {
	ctx, cancel, tries := l.cfg.finishing(ctx, l.name)
	defer cancel()
	// uncertain: an earlier try may have committed. A later try that finds
	// the row no longer ours then most likely meets our own unlock, not a
	// takeover: the lease was held and renewed when Unlock began.
	uncertain := false
	for {
		sent := l.cfg.clock.Now()
		settled := false
		to, err := gated(ctx, ll, func() (handOff, error) {
			to, err := l.store.unlock(ctx, lease)
			if err == nil {
				settled = l.settleAtGate(ll, lease.id, to, sent)
			}
			return to, err
		})
		if err == nil {
			l.cfg.logger.Debug("unlocked", "token", lease.token, "handed_to", to.owner)
			if !settled {
				l.handedOn(ll, lease.id, to, sent)
			}
			return nil
		}
		if errors.Is(err, ErrLeaseLost) {
			var lost *leaseLostError
			if uncertain && errors.As(err, &lost) && l.ownUnlock(ctx, lease, lost) {
				return nil // an earlier try committed; its answer was lost
			}
			return err
		}
		uncertain = true
		v, rerr := l.store.read(ctx, l.name)
		if rerr == nil && !v.heldBy(lease.id) {
			lost := lease.lostTo(v)
			if l.ownUnlock(ctx, lease, lost) {
				return nil // our unlock committed; its answer was lost
			}
			return lost
		}
		l.cfg.logger.Warn("unlock failed; retrying", "err", err)
		if !spanerr.Retryable(err) {
			return fmt.Errorf("spanmutex: unlock %q (token %d): %w", l.name, lease.token, err)
		}
		if err := tries.failed(ctx, err); err != nil {
			return err
		}
	}
}

// ownUnlock reports whether a row found no longer ours (lost describes it)
// after an unlock try of unknown outcome shows our own unlock, not a
// takeover: free under our own id and token; or moved on past our token
// before any takeover was allowed, by Spanner's clock. A takeover commits
// only after our lease has gone unrenewed for the lease we declared, so it
// is after our last acknowledged renewal's commit timestamp plus the
// lease (cutoff): a strong read whose clock is before cutoff, or a read
// as of just before cutoff that shows the row moved on, proves that the
// move was our unlock (and hand-offs after it). Anything else, a failed
// read included, is reported as lost.
func (l *Lock) ownUnlock(ctx context.Context, lease *Lease, lost *leaseLostError) bool {
	if lost.CurrentState == StateNeeded && lost.currentLeaseID == lease.id && lost.CurrentToken == lease.token {
		return true
	}
	if lost.CurrentToken <= lease.token || lease.lastRenewedAt().IsZero() {
		return false
	}
	now, err := l.store.read(ctx, l.name)
	if err != nil {
		return false
	}
	if lease.leftFirst(now, l.cfg.lease) {
		return true
	}
	cutoff := lease.lastRenewedAt().Add(l.cfg.lease)
	then, err := l.store.readAt(ctx, l.name, cutoff.Add(-time.Microsecond))
	return err == nil && !then.heldBy(lease.id)
}

// settleAtGate is handedOn for a caller that holds the Scope's gate for
// the lock, just after the commit that handed the lock on: unless the
// waiter handed the lock is an orphan of our Scope (handedOn hands it on
// for it, with Spanner calls, after the gate), it records and wakes as
// handedOn does, and reports that it did. Under the gate, a contender of
// the Scope that reads whether the lock is held here (heldInScope) sees
// the hand-off settled or not yet made, the same on every run of a
// simulated schedule.
func (l *Lock) settleAtGate(ll *localLock, id string, to handOff, sent time.Time) bool {
	if l.orphanOf(to) {
		return false
	}
	l.settle(ll, id, to, sent)
	return true
}

// orphanOf reports whether to is a hand-off to a waiter of our Scope whose
// call returned, leaving an entry behind.
func (l *Lock) orphanOf(to handOff) bool {
	return to.waiterID != "" && scopeOf(to.waiterID) == l.scope.id && l.scope.wakes.orphaned(to.waiterID, to.token, l.cfg.clock.Now())
}

// handedOn records in ll that lease id left the lock, handed (by an
// unlock or a leave whose transaction was sent at local time sent) to the
// waiter to says, and wakes that waiter if it waits in this Lock's Scope.
func (l *Lock) handedOn(ll *localLock, id string, to handOff, sent time.Time) {
	for range maxOrphans {
		if !l.orphanOf(to) {
			break
		}
		// A waiter of our Scope whose call returned and left an entry
		// behind (its leave, or its purge, failed): nobody will take the
		// lock handed to it. Hand it on for it at once. (The hand-off
		// whose lease its call returned is not such.) The lease of the
		// waiter it reaches is anchored before the hand-off was sent: a
		// pause between its commit and our reading the answer must not
		// make that lease look fresh (claims 8 and 11).
		before := l.cfg.clock.Now()
		next, ok := l.handOnFor(ll, to.waiterID)
		if !ok {
			break
		}
		l.scope.wakes.adopted(to.waiterID)
		id, to, sent = to.waiterID, next, before
	}
	l.settle(ll, id, to, sent)
}

// settle records in ll that lease id left the lock, handed to the waiter
// to says (nobody: freed) by a transaction sent at local time sent, and
// wakes that waiter if it waits in this Lock's Scope.
func (l *Lock) settle(ll *localLock, id string, to handOff, sent time.Time) {
	switch {
	case to.waiterID != "" && l.scope.wakes.wake(to.waiterID, wakeUp{sent: sent, token: to.token, at: to.at, owner: to.owner}):
		ll.release(id, to.waiterID)
	case to.waiterID != "":
		// A waiter of our Scope that the board does not know has returned
		// (registered for its whole call): with this lease, found by its
		// own read, or without it, leaving no entry (else it is an orphan,
		// above). A datagram to ourselves would tell nobody.
		if to.wakeAddr != "" && scopeOf(to.waiterID) != l.scope.id {
			l.scope.sendWake(context.Background(), to.wakeAddr, to.waiterID, to.at)
		}
		ll.handAway(id)
	default:
		ll.release(id, "")
	}
}

// maxOrphans bounds the hand-offs handedOn makes for waiters of its Scope
// whose calls have returned.
const maxOrphans = 4

// handOnFor deletes the entries of waiter id, a waiter of our Scope whose
// call has returned, and hands on the lock handed to it, trying for the
// finish timeout. It reports whom it handed the lock to, and whether it
// did; it logs if it could not.
func (l *Lock) handOnFor(ll *localLock, id string) (handOff, bool) {
	var to handOff
	err := l.retryFinish(context.Background(), func(ctx context.Context) (err error) {
		to, err = gated(ctx, ll, func() (handOff, error) { return l.store.leave(ctx, l.name, id) })
		return err
	})
	if err != nil {
		l.cfg.logger.Warn("lock: could not hand on a lock handed to a waiter of this process whose call had returned; it passes on after that waiter's lease", "waiter", id, "err", err)
		return handOff{}, false
	}
	l.cfg.logger.Warn("lock: handed on a lock handed to a waiter of this process whose call had returned", "waiter", id, "handed_to", to.owner)
	return to, true
}

// retryFinish makes tries (one is try) until one succeeds or fails for
// good, for the finish timeout even if ctx is done (what it finishes must
// not be left half done: a lock left held blocks every waiter), backing off
// between them. It returns the last try's error, nil if one succeeded.
func (l *Lock) retryFinish(ctx context.Context, try func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.finishTimeout)
	defer cancel()
	bo := l.cfg.newBackOff()
	for {
		err := try(ctx)
		if err == nil || !spanerr.Retryable(err) || pauseWith(ctx, l.cfg.clock, bo, 0, nil) != nil {
			return err
		}
	}
}

// acquire runs the contender's loop: take the lock if free, or join the
// queue and wait to be handed the lock.
//
// On success the lease counts as held in ll until Unlock.
func (l *Lock) acquire(ctx context.Context, ll *localLock, wait bool) (*Lease, error) {
	if l.sp != nil {
		// Only a wrong declaration ends the call here: a check that failed
		// (Spanner briefly unavailable) is made again by the call's first
		// statement, and its failures are retried as any call's are.
		if err := checkDialect(ctx, l.sp.dialect); errors.Is(err, ErrInvalidConfig) { // dialect.go
			return nil, err
		}
	}
	att := l.cfg.newAttempts(l.name, 3)
	w := &waiter{lock: l, st: l.store, local: ll, id: l.scope.newWaiterID(), key: endOfQueue, born: l.cfg.clock.Now(),
		reads: att[0], writes: att[1], renewals: att[2],
		pol: policy{lease: l.cfg.lease, jitter: l.cfg.drawFraction(l.cfg.jitter)}}
	wake, unregister := l.scope.wakes.register(w.id)
	defer unregister()
	defer ll.unqueue(w.id)
	w.wake = wake
	w.reads.sleep, w.writes.sleep, w.renewals.sleep = w.backOff, w.backOff, w.backOff
	defer w.useSession(ctx)()
	lease, err := w.run(ctx, wait)
	if err != nil {
		if !w.abandon(ctx) {
			w.orphaned(0)
		}
		ll.release(w.id, "") // if an Unlock of this Scope handed it to us
		return nil, err
	}
	ll.hold(w.id) // handed over: the Unlock that woke us may have said so already
	if w.strays || w.resent {
		// Its purge failed, or a join of ours may have left an entry
		// whose key we never learnt, which even our Unlock may not reach
		// (it stops at the first live entry): a hand-off of our Scope to
		// one after this lease is handed on, until they expire.
		w.orphaned(lease.token)
	}
	return lease, nil
}

// purge deletes any queue entry left with id, now that id holds the lock,
// and reports whether it did.
func (l *Lock) purge(ctx context.Context, ll *localLock, id string) bool {
	pctx, cancel := detached(ctx, l.cfg.finishTimeout)
	defer cancel()
	if _, err := gated(pctx, ll, func() (struct{}, error) { return struct{}{}, l.store.purgeWaiter(pctx, l.name, id) }); err != nil {
		l.cfg.logger.Warn("lock: deleting a stray queue entry failed; it expires after four leases", "err", err)
		return false
	}
	return true
}
