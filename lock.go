package spanmutex

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/google/uuid"
)

// Polling of queued waiters behind a holder of another process. A waiter
// with k live waiters before it expects its turn in about k hand-offs; it
// measures how long a hand-off takes from how fast the token moves, and
// reads the lock again when three quarters of the time to its turn have
// passed, at least LockPollInterval and at most MaxLockPollInterval (and a
// quarter watermark) apart. The head of the queue so learns of a hand-off
// within about LockPollInterval, and a waiter far back costs a few reads.
// Behind a holder of its own process a waiter does not poll: that holder's
// Unlock wakes it.
const (
	LockPollInterval    = 20 * time.Millisecond
	MaxLockPollInterval = 10 * time.Second
)

// waiterTTLFactor: a queued waiter proves it is alive every half TTL, and is
// skipped by hand-offs once it has not for waiterTTLFactor watermarks. A
// dead waiter that is handed the lock before that costs one watermark, as a
// crashed holder does; renewing more often would cost blind writes from
// every waiter all the time.
const waiterTTLFactor = 4

// ErrHeld is matched by the *HeldError TryLock returns when the lock is held
// or others are queued for it.
var ErrHeld = errors.New("spanmutex: lock is held")

// HeldError says who holds the lock TryLock could not take. It matches ErrHeld.
type HeldError struct {
	Name    string
	Holder  string // the holder's owner identity, "" if the lock is free but waiters are queued
	Token   int64  // the holder's token
	Waiters int    // live waiters queued (counted up to 256)
}

func (e *HeldError) Error() string {
	if e.Holder == "" {
		return fmt.Sprintf("spanmutex: lock %q is free but %d waiter(s) are queued before you; use Lock to wait your turn", e.Name, e.Waiters)
	}
	return fmt.Sprintf("spanmutex: lock %q is held by %q (token %d), %d waiter(s) queued", e.Name, e.Holder, e.Token, e.Waiters)
}

// Is reports whether target is ErrHeld.
func (e *HeldError) Is(target error) bool { return target == ErrHeld }

// Lock is a reusable distributed lock, held by one holder at a time, on the
// same table and row as the run-once Mutex: NEEDED (or no row) is free and
// STARTED is held; it never writes DONE or FAILED, and refuses a name that a
// Mutex has completed.
//
// Contenders wait in a FIFO queue instead of retrying the lock's row: a Lock
// call arrives with one read-write transaction that takes the lock if it is
// free and otherwise queues it (or, while another Lock of the same process
// holds the lock, with a blind insert shared with the process's other
// arrivals), waiting costs lock-free reads, and Unlock hands the lock to the
// oldest live waiter in the same read-write transaction that releases it,
// with the next token. An Unlock also wakes the waiter it handed the lock to
// if that waiter is in the same process; waiters behind a holder of another
// process poll. While held, the lease is renewed in the background;
// Lease.Done closes if it is lost.
//
// A Lock value stands for one contender: it holds at most one lease at a
// time, and its methods may be called from any goroutine, but a Lock call
// while this Lock holds or is waiting returns an error. Use one Lock per
// contender.
type Lock struct {
	name  string
	cfg   config
	store *spannerStore

	mu      sync.Mutex
	busy    bool       // a Lock or TryLock call is under way, or the lock is held
	held    *Lease     // the lease while held
	stopRen func()     // stops its renewals
	local   *localLock // while held: what the process's contenders share

	// locals and wakeups are the boards this Lock shares with the other
	// Locks of its process (local.go, wakeup.go): the package's own, but for
	// tests, whose Locks stand for several processes.
	locals  *localBoard
	wakeups *wakeBoard
}

// NewLock returns a reusable lock named name, stored in client's database. It
// takes the same options as New (WithStaleness and WithNeeded do not apply
// to a lock; WithMaxAttempts bounds failed Spanner calls in a row); queued
// waiters prove they are alive about every two watermarks (half the entries'
// time to live), and Unlock skips waiters that have not for four watermarks. Every error wraps ErrInvalidConfig.
func NewLock(client *spanner.Client, name string, opts ...Option) (*Lock, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: nil *spanner.Client: open one with spanner.NewClient", ErrInvalidConfig)
	}
	m, err := newMutex(name, opts)
	if err != nil {
		return nil, err
	}
	return &Lock{name: name, cfg: m.cfg, store: newSpannerStore(client, m.cfg.table), locals: locals, wakeups: wakeups}, nil
}

// Name returns the lock's name.
func (l *Lock) Name() string { return l.name }

// Owner returns the owner identity this Lock records as holder.
func (l *Lock) Owner() string { return l.cfg.owner }

// waiterTTL is how long a queue entry stays live without a renewal, by
// Spanner's clock.
func (l *Lock) waiterTTL() time.Duration { return waiterTTLFactor * l.cfg.watermark }

// localKey names this lock across the process.
func (l *Lock) localKey() localKey {
	return localKey{database: l.store.client.DatabaseName(), table: l.store.table, name: l.name}
}

// Stats returns the Spanner operations this Lock has made so far.
func (l *Lock) Stats() Stats { return l.store.stats.snapshot() }

// Lock blocks until this contender holds the lock, and returns its lease. It
// returns errors.Join(ErrNotObtained, ctx.Err()) if ctx ends first, having
// left the queue (and passed the lock on if it was handed over meanwhile).
func (l *Lock) Lock(ctx context.Context) (*Lease, error) {
	return l.lock(ctx, true)
}

// TryLock takes the lock if it is free and nobody is queued for it, and
// returns at once otherwise, with a *HeldError that says who holds it. It
// never joins the queue.
func (l *Lock) TryLock(ctx context.Context) (*Lease, error) {
	return l.lock(ctx, false)
}

func (l *Lock) lock(ctx context.Context, wait bool) (*Lease, error) {
	if ctx == nil {
		return nil, errNilContext
	}
	l.mu.Lock()
	if l.busy {
		l.mu.Unlock()
		return nil, fmt.Errorf("spanmutex: lock %q: this Lock already holds or is acquiring the lock; Unlock first, or use one Lock per contender", l.name)
	}
	l.busy = true
	l.mu.Unlock()

	ll := l.locals.get(l.localKey())
	lease, err := l.acquire(ctx, ll, wait)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.locals.put(ll)
		l.busy = false
		return nil, l.store.unreached(err)
	}
	l.held, l.local = lease, ll
	l.stopRen = keepAlive(l.store, &l.cfg, lease, lease.anchor, func(err error) {
		// A renewal that fails because our own Unlock just released the
		// row is no loss: Unlock reports how it ended.
		if !lease.unlocking.Load() {
			lease.lose(err)
			// The process's waiters must not wait for this holder's Unlock
			// to wake them: the lock may be someone else's now.
			ll.release(lease.id, "")
		}
	})
	return lease, nil
}

// Unlock releases the lock, handing it to the oldest live waiter. It is
// fenced: if the lease was lost (taken over after the watermark), it returns
// a *LeaseLostError and leaves the new holder's lock alone.
func (l *Lock) Unlock(ctx context.Context) error {
	if ctx == nil {
		return errNilContext
	}
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
		l.locals.put(ll)
		l.mu.Lock()
		l.busy = false
		l.mu.Unlock()
	}()
	// Renewals go on until the unlock is settled, so that a slow unlock
	// (an overloaded Spanner) does not let the lease lapse into a takeover.
	lease.unlocking.Store(true)
	defer stop()
	return l.release(ctx, ll, lease)
}

// release unlocks lease, settling a commit of unknown outcome by reading the
// row: if the lock has moved on from our lease, there is nothing left to do.
// It keeps trying for as long as the caller's ctx allows, and for at least
// the finish timeout even if ctx is already done: a lock left held blocks
// every waiter until the watermark.
func (l *Lock) release(ctx context.Context, ll *localLock, lease *Lease) error {
	timeout := l.cfg.finishTimeout
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) > timeout {
		timeout = time.Until(dl)
	} else if !ok && ctx.Err() == nil {
		timeout = max(timeout, l.cfg.watermark)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	bo := l.cfg.newBackOff()
	// uncertain: an earlier try may have committed. A later try that finds
	// the row no longer ours then most likely meets our own unlock, not a
	// takeover: the lease was held and renewed when Unlock began.
	uncertain := false
	for {
		sent := l.cfg.clock.Now()
		to, err := gated(ctx, ll, func() (handOff, error) { return l.store.unlock(ctx, lease, l.waiterTTL()) })
		if err == nil {
			l.cfg.logger.Debug("unlocked", "token", lease.token, "handed_to", to.owner)
			local := ""
			if to.waiterID != "" && l.wakeups.wake(to.waiterID, sent) {
				local = to.waiterID
			}
			ll.release(lease.id, local)
			return nil
		}
		if errors.Is(err, ErrLeaseLost) {
			var lost *LeaseLostError
			if uncertain && errors.As(err, &lost) && l.ownUnlock(lease, lost) {
				return nil // an earlier try committed; its answer was lost
			}
			return err
		}
		uncertain = true
		v, rerr := l.store.readLock(ctx, l.name, endOfQueue, l.waiterTTL())
		if rerr == nil && !(v.State == StateStarted && v.LeaseID == lease.id) {
			if l.ownUnlock(lease, &LeaseLostError{Name: l.name, Token: lease.token, CurrentState: v.State,
				CurrentOwner: v.Owner, CurrentToken: v.Token, currentLeaseID: v.LeaseID}) {
				return nil // our unlock committed; its answer was lost
			}
			return &LeaseLostError{Name: l.name, Token: lease.token, CurrentState: v.State, CurrentOwner: v.Owner, CurrentToken: v.Token}
		}
		l.cfg.logger.Warn("unlock failed; retrying", "err", err)
		if perr := pauseWith(ctx, l.cfg.clock, bo, 0); perr != nil {
			return fmt.Errorf("spanmutex: unlock %q (token %d): %w", l.name, lease.token, err)
		}
	}
}

// ownUnlock reports whether a row found no longer ours (lost describes it)
// after an unlock try of unknown outcome shows our own unlock, not a
// takeover: free under our own id and token; or moved on past our token
// while too little time has passed since our last acknowledged renewal for
// any takeover to have been allowed (by Spanner's clock, the holder's
// silence is at most the local time since the anchor), so that only our
// unlock, and hand-offs after it, can have moved it.
func (l *Lock) ownUnlock(lease *Lease, lost *LeaseLostError) bool {
	if lost.CurrentState == StateNeeded && lost.currentLeaseID == lease.id && lost.CurrentToken == lease.token {
		return true
	}
	return lost.CurrentToken > lease.token && l.cfg.clock.Now().Sub(lease.lastAnchor()) < l.cfg.watermark
}

// acquire runs the contender's loop: take the lock if free, or join the
// queue and wait to be handed the lock.
//
// On success the lease counts as held in ll until Unlock.
func (l *Lock) acquire(ctx context.Context, ll *localLock, wait bool) (*Lease, error) {
	w := &waiter{lock: l, local: ll, id: newWaiterID(), key: endOfQueue}
	wake, unregister := l.wakeups.register(w.id)
	defer unregister()
	w.wake = wake
	pol := policy{watermark: l.cfg.watermark, jitter: drawJitter(l.cfg.watermark, l.cfg.jitter)}
	lease, err := w.run(ctx, pol, wait)
	if err != nil {
		w.abandon(ctx)
		ll.release(w.id, "") // if an Unlock of this process handed it to us
	} else {
		ll.hold(w.id) // handed over: the Unlock that woke us may have said so already
	}
	if w.strays {
		// A join of unknown outcome may have left a second entry of ours;
		// left there, it would be handed the lock after we are gone.
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.finishTimeout)
		if _, perr := gated(pctx, ll, func() (struct{}, error) { return struct{}{}, l.store.purgeWaiter(pctx, l.name, w.id) }); perr != nil {
			l.cfg.logger.Warn("lock: purging a stray queue entry failed; it expires after four watermarks", "err", perr)
		}
		cancel()
	}
	return lease, err
}

// newWaiterID returns a random id for a waiter (and its lease), a version 7
// UUID: the waiters of one process that join in one commit share its
// timestamp and are queued in the order of their ids, which is the order in
// which their Lock calls began.
func newWaiterID() string {
	if id, err := uuid.NewV7(); err == nil {
		return id.String()
	}
	return uuid.NewString()
}
