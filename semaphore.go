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

// Semaphore is a distributed, weighted, fenced counting semaphore: at no
// instant of Spanner's clock do unlapsed leases hold more than its size in
// permits. Make it with NewSemaphore.
//
// It follows golang.org/x/sync/semaphore.Weighted where that applies:
// Acquire(ctx, n) waits for n permits, first come first served among live
// waiters, without barging (a large request at the head of the queue is
// not overtaken by smaller ones behind it). Each acquisition gets a Lease
// whose token strictly increases per name over every acquisition, and
// which is renewed in the background within the lease this Semaphore
// declares (WithLease) until Release; a holder silent past its own lease
// loses its permits to the next waiter that needs them, as a Lock's holder
// loses the lock.
//
// A Semaphore value is one contender: it holds at most one lease at a
// time; use one Semaphore per concurrent holder. The size is stored with
// the name by its first contender: one that declares another size gets a
// *SizeMismatchError, and nothing is written; Resize changes it.
//
// It shares the Lock's table: its row (State SHARED) keeps the size and
// the last token, its holders and waiters are entries of the Lock's queue
// table (columns Permits and Token; spanmutex ddl --upgrade adds them to
// an older table). How it grants is in doc/design.md, section 4.12.
type Semaphore struct {
	name  string
	size  int64
	cfg   config
	store semStore
	sp    *spannerStore // nil in the simulation
	db    string        // the database's name: with the table and lease, its Scope's session's key

	mu    sync.Mutex
	busy  bool   // an Acquire is under way, or a lease is held
	held  *Lease // the lease while held
	heldN int64  // its permits
	// stopRen stops what keeps the held lease alive; unreleased: its
	// Release did not land (keepHeld).
	stopRen func(unreleased bool)
}

// heldPermits returns the permits this Semaphore holds, 0 if none.
func (s *Semaphore) heldPermits() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held == nil {
		return 0
	}
	return s.heldN
}

// NewSemaphore returns a semaphore of size permits named name, stored in
// client's database. Every error wraps ErrInvalidConfig.
func NewSemaphore(client *spanner.Client, name string, size int64, opts ...LockOption) (*Semaphore, error) {
	if client == nil {
		return nil, errNilClient("NewSemaphore")
	}
	if size < 1 {
		return nil, fmt.Errorf("%w: semaphore %q: size %d: a semaphore has at least 1 permit", ErrInvalidConfig, name, size)
	}
	cfg, err := configure(name, opts) // configure.go
	if err != nil {
		return nil, err
	}
	sp := cfg.newStore(client)
	sp.needsQueue, sp.semaphore, sp.shared = true, true, cfg.scope
	return &Semaphore{name: name, size: size, cfg: cfg, store: sp, sp: sp, db: client.DatabaseName()}, nil
}

// Acquire blocks until this contender holds n permits, and returns its
// lease. Otherwise it returns an error matching ErrNotObtained and
// ctx.Err() if ctx ends first (a lease granted meanwhile is given back);
// an error matching ErrOutage if Spanner kept failing; a *SizeMismatchError; an
// error matching ErrSchema; or an error naming the Lock or Mutex that owns the name.
// Whenever it returns without the lease it has left the queue and passed
// on permits granted to it, so that it delays nobody (if Spanner fails
// that too for the finish timeout, its entry expires after four leases).
func (s *Semaphore) Acquire(ctx context.Context, n int64) (*Lease, error) {
	return s.acquire(ctx, n, true)
}

// TryAcquire takes n permits if they are free and nobody is queued for
// the semaphore, and returns at once otherwise with an error matching
// ErrHeld (a *HeldError). It never joins the queue, and writes nothing
// when it does not take the permits.
func (s *Semaphore) TryAcquire(ctx context.Context, n int64) (*Lease, error) {
	return s.acquire(ctx, n, false)
}

func (s *Semaphore) acquire(ctx context.Context, n int64, wait bool) (*Lease, error) {
	if ctx == nil {
		return nil, errNilContext
	}
	if s == nil || s.store == nil {
		return nil, errNotMade("Semaphore", "NewSemaphore")
	}
	if n < 1 || n > s.size {
		return nil, fmt.Errorf("%w: semaphore %q: %d permits asked: ask for 1 to its size, %d", ErrInvalidConfig, s.name, n, s.size)
	}
	s.mu.Lock()
	if s.busy {
		s.mu.Unlock()
		return nil, fmt.Errorf("spanmutex: semaphore %q: this Semaphore already holds or is acquiring permits; Release first, or use one Semaphore per holder", s.name)
	}
	s.busy = true
	s.mu.Unlock()
	began := time.Now()
	actx, acq := s.cfg.tel.start(ctx, "spanmutex.acquire", semKind(wait)) // telemetry.go
	w := s.newWaiter(n, wait)
	lease, err := w.run(actx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.busy = false
		if s.sp != nil {
			err = s.sp.unreached(ctx, err, began)
		}
		acq.granted(nil, err)
		return nil, err
	}
	acq.granted(lease, nil)
	_, hold := s.cfg.tel.start(ctx, "spanmutex.hold", semKind(wait), attrToken.Int64(lease.token))
	lease.setHold(hold)
	s.held, s.heldN = lease, n
	s.stopRen = s.keepHeld(lease) // semaphore_session.go
	return lease, nil
}

// semKind names a Semaphore's acquisitions in telemetry.
func semKind(wait bool) string {
	if wait {
		return "acquire"
	}
	return "tryacquire"
}

// Release gives back the permits this Semaphore holds and grants them to
// the waiters at the head of the queue that they fit, in the same
// transaction. It is fenced: if the lease was lost (its holder silent past
// its lease, and its permits counted free by another contender), it
// returns an error matching ErrLeaseLost and changes nothing. It keeps
// trying for the finish window, as Lock.Unlock does, and returns an error
// matching ErrOutage if Spanner kept failing that long (whether it landed
// is then unknown; if not, the permits return once the lease lapses, or,
// held through the Scope's session, once a release retried in the
// background lands or the session is lost).
// When it returns, the lease has ended: its Done is closed.
func (s *Semaphore) Release(ctx context.Context) (err error) {
	if ctx == nil {
		return errNilContext
	}
	if s == nil || s.store == nil {
		return errNotMade("Semaphore", "NewSemaphore")
	}
	ctx, un := s.cfg.tel.start(ctx, "spanmutex.Unlock", "release") // telemetry.go
	defer func() { un.unlocked(err) }()
	s.mu.Lock()
	lease, stop := s.held, s.stopRen
	if lease == nil {
		s.mu.Unlock()
		return fmt.Errorf("spanmutex: Release of semaphore %q, which this Semaphore does not hold", s.name)
	}
	s.held, s.stopRen = nil, nil
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.busy = false
		s.mu.Unlock()
	}()
	lease.unlocking.Store(true)
	defer func() { stop(err != nil && !errors.Is(err, ErrLeaseLost)) }()
	defer func() { lease.holdOp().held(lease, unlockOutcome(err), err) }() // telemetry.go
	err = s.finish(ctx, semRequest{me: lease.id, op: semRelease, token: lease.token, size: s.size, lease: s.cfg.lease}, lease)
	lease.end(err)
	return err
}

// Resize stores this Semaphore's size as the name's, and grants the
// waiters that now fit. Contenders that declare the old size get a
// *SizeMismatchError from then on; leases already held keep their permits
// (a smaller size grants nobody until the holders fit in it).
func (s *Semaphore) Resize(ctx context.Context) error {
	if ctx == nil {
		return errNilContext
	}
	if s == nil || s.store == nil {
		return errNotMade("Semaphore", "NewSemaphore")
	}
	return s.finish(ctx, semRequest{me: "", op: semSettle, size: s.size, lease: s.cfg.lease, resized: true}, nil)
}

// finish runs q (a release of lease, a leave or a resize: lease nil) until
// it commits, for as long as ctx allows and at least the finish timeout,
// as Unlock does (finishWindow), even once ctx has ended: permits left
// held block the waiters until their lease runs out. A release retried
// after a try that failed, which finds our entry gone, settles whether
// that try released it by Spanner's clock (ownRelease): otherwise the
// lease was lost, and the section may have overlapped another holder's.
func (s *Semaphore) finish(ctx context.Context, q semRequest, lease *Lease) error {
	ctx, cancel, tries := s.cfg.finishing(ctx, s.name)
	defer cancel()
	uncertain := false // an earlier try may have committed
	for {
		res, err := s.store.settle(ctx, s.name, q)
		switch {
		case err == nil:
			s.wake(ctx, res)
			return nil
		case errors.Is(err, ErrLeaseLost) && uncertain && (lease == nil || s.ownRelease(ctx, lease)):
			return nil
		case errors.Is(err, ErrLeaseLost):
			return &leaseLostError{Name: s.name, Token: q.token, Reason: "its permits were counted free after its lease ran out unrenewed; another holder may have them"}
		}
		var sme *SizeMismatchError
		if errors.As(err, &sme) || !spanerr.Retryable(err) {
			return fmt.Errorf("spanmutex: semaphore %q: %w", s.name, err)
		}
		uncertain = true
		s.cfg.logger.Warn("semaphore: release failed; retrying", "err", err)
		if err := tries.failed(ctx, err); err != nil {
			return err
		}
	}
}

// ownRelease reports whether lease's entry, found gone by a release
// retried after a try that failed, was deleted by that try, not by a
// contender that counted it lapsed. Nobody deletes a holder's entry as
// lapsed before its last renewal's commit timestamp plus the lease it
// declared (cutoff, by Spanner's clock, from the last renewal we know of:
// one whose answer was lost only moves the real one later). So a strong
// read before cutoff that finds the entry gone, or a read as of just
// before cutoff that finds it gone already, proves our release took it.
// Anything else, a failed read included, counts as lost, as Lock.Unlock's
// ownUnlock does.
func (s *Semaphore) ownRelease(ctx context.Context, lease *Lease) bool {
	last := lease.lastRenewedAt()
	if last.IsZero() {
		return false
	}
	key := queueKey{at: lease.queuedAt, id: lease.id}
	present, now, err := s.store.entryAt(ctx, s.name, key, time.Time{})
	if err != nil || present {
		return false
	}
	cutoff := last.Add(s.cfg.lease)
	if now.Before(cutoff) {
		return true
	}
	present, _, err = s.store.entryAt(ctx, s.name, key, cutoff.Add(-time.Microsecond))
	return err == nil && !present
}

// wake sends a wake-up to every waiter res granted that listens for them:
// after the commit was acknowledged, and only to make it read at once.
func (s *Semaphore) wake(ctx context.Context, res semResult) {
	for _, g := range res.plan.grants {
		if g.entry.wake != "" {
			s.cfg.scope.sendWake(ctx, g.entry.wake, g.entry.id, res.at)
		}
	}
}

// semRenewer renews a Semaphore's lease by its entry's key.
type semRenewer struct{ st semStore }

// renew renews l's entry, and records the renewal's commit timestamp
// (Release's ownRelease judges by it).
func (r semRenewer) renew(ctx context.Context, l *Lease) error {
	ts, err := r.st.renewEntry(ctx, l.name, queueKey{at: l.queuedAt, id: l.id})
	return entryRenewed(l, ts, err)
}

// entryRenewed is the outcome of a renewal of l's entry that committed at
// ts or failed with err: the commit timestamp recorded, or an entry found
// gone reported as l's loss.
func entryRenewed(l *Lease, ts time.Time, err error) error {
	switch {
	case err == nil:
		l.setRenewedAt(ts)
	case errors.Is(err, ErrLeaseLost):
		return &leaseLostError{Name: l.name, Token: l.token, Reason: "its entry is gone: its permits were counted free after its lease ran out unrenewed"}
	}
	return err
}
