package spanmutex

import (
	"context"
	"fmt"

	"cloud.google.com/go/spanner"
)

// RWLock is a distributed reader-writer lock: any number of readers
// (RLock) share it, or one writer (Lock) holds it alone. Make it with
// NewRWLock.
//
// It follows sync.RWMutex's rule against writer starvation: a waiting
// writer blocks new readers, and readers queued behind it wait for it. The
// readers at the head of the queue are granted together, in the commit that
// lets them in. Every acquisition gets a Lease whose token strictly
// increases per name; a writer's lease fences as a Lock's does, and a
// reader's token tells its epoch.
//
// An RWLock is a Semaphore whose readers take one permit and whose writer
// takes them all, on the same rows, queue, declared leases and grant rule;
// its name cannot also be a Semaphore's of another size, a Lock's or a
// Mutex's. An RWLock value is one contender: it holds at most one lease at
// a time, shared or exclusive.
type RWLock struct {
	sem *Semaphore
}

// rwPermits is an RWLock's size: a reader takes 1, a writer all of them.
const rwPermits = 1 << 30

// NewRWLock returns a reader-writer lock named name, stored in client's
// database. Every error wraps ErrInvalidConfig.
func NewRWLock(client *spanner.Client, name string, opts ...LockOption) (*RWLock, error) {
	sem, err := NewSemaphore(client, name, rwPermits, opts...)
	if err != nil {
		return nil, err
	}
	return &RWLock{sem: sem}, nil
}

// RLock blocks until this contender shares the lock, and returns its lease,
// with Semaphore.Acquire's errors.
func (l *RWLock) RLock(ctx context.Context) (*Lease, error) { return l.acquire(ctx, 1, true) }

// TryRLock shares the lock if no writer holds it or waits for it, and
// returns an error matching ErrHeld at once otherwise.
func (l *RWLock) TryRLock(ctx context.Context) (*Lease, error) { return l.acquire(ctx, 1, false) }

// Lock blocks until this contender holds the lock alone, and returns its
// lease, with Semaphore.Acquire's errors.
func (l *RWLock) Lock(ctx context.Context) (*Lease, error) { return l.acquire(ctx, rwPermits, true) }

// TryLock holds the lock alone if nobody holds it or waits for it, and
// returns an error matching ErrHeld at once otherwise.
func (l *RWLock) TryLock(ctx context.Context) (*Lease, error) {
	return l.acquire(ctx, rwPermits, false)
}

func (l *RWLock) acquire(ctx context.Context, n int64, wait bool) (*Lease, error) {
	if l == nil || l.sem == nil {
		return nil, errNotMade("RWLock", "NewRWLock")
	}
	return l.sem.acquire(ctx, n, wait)
}

// RUnlock ends a shared hold (RLock), as Semaphore.Release does.
func (l *RWLock) RUnlock(ctx context.Context) error { return l.release(ctx, 1) }

// Unlock ends an exclusive hold (Lock), as Semaphore.Release does, granting
// the readers (or the writer) at the head of the queue.
func (l *RWLock) Unlock(ctx context.Context) error { return l.release(ctx, rwPermits) }

func (l *RWLock) release(ctx context.Context, n int64) error {
	if l == nil || l.sem == nil {
		return errNotMade("RWLock", "NewRWLock")
	}
	switch held := l.sem.heldPermits(); {
	case held == 1 && n != 1:
		return fmt.Errorf("spanmutex: Unlock of RWLock %q, which this RWLock holds shared: use RUnlock", l.sem.name)
	case held == rwPermits && n != rwPermits:
		return fmt.Errorf("spanmutex: RUnlock of RWLock %q, which this RWLock holds exclusively: use Unlock", l.sem.name)
	}
	return l.sem.Release(ctx)
}
