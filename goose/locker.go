package spangoose

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/pressly/goose/v3/lock"

	"github.com/spanmutex/spanmutex"
)

// Locker is a goose lock.Locker (pass it with goose.WithLocker) that holds a
// spanmutex Lock, FIFO, leased and fenced, while goose runs, so that the
// replicas of a service that all call goose at start-up run it one at a
// time. Make it with NewLocker.
//
// A Locker is one contender, for one goose Provider: goose calls Lock and
// Unlock around each Provider call that uses a locker, one call at a time.
// Its methods are safe for concurrent use; Lock while it holds or is
// acquiring the lock returns an error.
type Locker struct {
	cfg  config
	lock *spanmutex.Lock

	mu    sync.Mutex
	busy  bool             // between Lock's start and Unlock's end
	held  *hold            // the hold Unlock ends; nil when not held
	lease *spanmutex.Lease // the lease of the current or last hold
}

var _ lock.Locker = (*Locker)(nil)

// hold is one Lock-to-Unlock tenure: its lease and the goroutine that
// stops goose if the lease is lost.
type hold struct {
	lease   *spanmutex.Lease
	unlock  chan struct{} // closed by Unlock: stop watching
	watched chan struct{} // closed when the watcher has returned
	stopped bool          // the watcher cancelled the run; read after watched
}

// NewLocker returns a Locker whose lock lives in client's database, in the
// spanmutex table (create it once with `spanmutex ddl`; it is not a goose
// migration, since the lock guards the migrations). client may be the
// service's own client; goose itself reaches the database through the
// *sql.DB given to goose.NewProvider, which Lock and Unlock ignore, so
// client and that *sql.DB must name the same database.
//
// NewLocker validates its inputs and does no I/O. Every error it returns
// wraps ErrInvalidConfig.
func NewLocker(client *spanner.Client, opts ...Option) (*Locker, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: nil *spanner.Client", ErrInvalidConfig)
	}
	cfg := defaultConfig()
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: option %d is nil", ErrInvalidConfig, i)
		}
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	l, err := spanmutex.NewLock(client, cfg.lockName, cfg.spanmutexOptions()...)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return &Locker{cfg: cfg, lock: l}, nil
}

// Lock waits for the lock, at most the lock timeout (WithLockTimeout) and
// as long as ctx allows, in the order replicas asked (FIFO among live
// waiters). ctx must come from l.Context: if the lease is lost while goose
// runs, that ctx is cancelled so that goose stops. The *sql.DB is not used.
//
// On error the lock is not held and nothing is left queued: an error
// matching spanmutex.ErrNotObtained (and ctx's error, or
// context.DeadlineExceeded for the lock timeout), spanmutex.ErrSchema when
// the spanmutex table is missing, ErrInvalidConfig for a ctx not made by
// Context or a Lock while this Locker holds or acquires the lock.
func (l *Locker) Lock(ctx context.Context, _ *sql.DB) error {
	r, err := l.runOf(ctx)
	if err != nil {
		return err
	}
	if err := l.begin(); err != nil {
		return err
	}
	lease, err := l.acquire(ctx)
	if err != nil {
		l.end()
		return err
	}
	h := &hold{lease: lease, unlock: make(chan struct{}), watched: make(chan struct{})}
	go l.watch(h, r)
	l.mu.Lock()
	l.held, l.lease = h, lease
	l.mu.Unlock()
	return nil
}

// begin marks l busy, or says why it cannot be.
func (l *Locker) begin() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.busy {
		return fmt.Errorf("%w: Lock called while this Locker holds or acquires the lock %q: "+
			"use one Locker per goose Provider", ErrInvalidConfig, l.cfg.lockName)
	}
	l.busy = true
	return nil
}

// end marks l idle again.
func (l *Locker) end() {
	l.mu.Lock()
	l.busy, l.held = false, nil
	l.mu.Unlock()
}

// acquire waits for the spanmutex Lock, bounded by the lock timeout.
func (l *Locker) acquire(ctx context.Context) (*spanmutex.Lease, error) {
	if l.cfg.lockTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, l.cfg.lockTimeout)
		defer cancel()
	}
	began := time.Now()
	l.cfg.logger.Info("waiting for the goose lock", "lock", l.cfg.lockName)
	lease, err := l.lock.Lock(ctx)
	if err != nil {
		return nil, fmt.Errorf("spangoose: waiting for the lock %q (waited %v): %w",
			l.cfg.lockName, time.Since(began).Round(time.Millisecond), err)
	}
	l.cfg.logger.Info("holding the goose lock", "lock", l.cfg.lockName, "token", lease.Token(),
		"waited", time.Since(began).Round(time.Millisecond), "took_over", lease.TookOver())
	return lease, nil
}

// watch cancels r's ctx if h's lease is lost before Unlock.
func (l *Locker) watch(h *hold, r *run) {
	defer close(h.watched)
	select {
	case <-h.lease.Done():
	case <-h.unlock:
		return
	}
	lost := h.lease.Err()
	if !errors.Is(lost, spanmutex.ErrLeaseLost) {
		return
	}
	h.stopped = true
	l.cfg.logger.Warn("lease of the goose lock lost: stopping goose", "lock", l.cfg.lockName,
		"token", h.lease.Token(), "err", lost)
	r.cancel(fmt.Errorf("%w (lock %q, token %d): %w", ErrStopped, l.cfg.lockName, h.lease.Token(), lost))
}

// Unlock releases the lock, handing it to the oldest live waiter. goose
// calls it after the Provider call, with a ctx that is never cancelled, and
// appends its error to the call's. It keeps trying for the spanmutex Lock's
// finish timeout (spanmutex.WithFinishTimeout through WithLockOptions;
// default 30s). The *sql.DB is not used.
//
// If the lease was lost while held, Unlock returns an error matching
// spanmutex.ErrLeaseLost that says so, and also ErrStopped if goose was
// stopped for it (its ctx cancelled); the lock is then another replica's
// and is left alone. Otherwise an error means the release could not be
// recorded: the lock is free once its lease passes unrenewed.
func (l *Locker) Unlock(ctx context.Context, _ *sql.DB) error {
	l.mu.Lock()
	h := l.held
	l.mu.Unlock()
	if h == nil {
		return fmt.Errorf("%w: Unlock without a Lock that succeeded", ErrInvalidConfig)
	}
	defer l.end()
	close(h.unlock)
	<-h.watched
	err := l.lock.Unlock(ctx)
	lost := h.lease.Err()
	switch {
	case h.stopped:
		return fmt.Errorf("spangoose: the lease of lock %q (token %d) was lost while goose ran; goose was stopped: %w",
			l.cfg.lockName, h.lease.Token(), errors.Join(ErrStopped, lost))
	case errors.Is(lost, spanmutex.ErrLeaseLost), errors.Is(err, spanmutex.ErrLeaseLost):
		if !errors.Is(lost, spanmutex.ErrLeaseLost) {
			lost = err
		}
		return fmt.Errorf("spangoose: the lease of lock %q (token %d) was lost before goose finished; "+
			"another replica may have run migrations at the same time: %w", l.cfg.lockName, h.lease.Token(), lost)
	case err != nil:
		return fmt.Errorf("spangoose: releasing the lock %q (token %d): %w", l.cfg.lockName, h.lease.Token(), err)
	}
	l.cfg.logger.Info("released the goose lock", "lock", l.cfg.lockName, "token", h.lease.Token())
	return nil
}

// Lease returns the lease of the current hold, or of the last one once
// Unlock returned; nil before the first Lock succeeded. A Go migration
// (goose.NewGoMigration) can fence its writes with it: Lease.Guard inside
// its own Spanner transaction, or Lease.Token passed to a spanmutex Fence.
func (l *Locker) Lease() *spanmutex.Lease {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lease
}

// Name returns the name of the spanmutex Lock.
func (l *Locker) Name() string { return l.cfg.lockName }
