package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"

	"cloud.google.com/go/spanner"

	"github.com/spanmutex/spanmutex"
	"github.com/spanmutex/spanmutex/internal/cmdline"
)

// locker is what "spanmutex lock" holds NAME with, as its flags choose: a
// *spanmutex.Lock (none of them), --weight permits of a Semaphore
// (--permits), or the read side (--shared) or write side (--rw,
// *spanmutex.RWLock) of an RWLock. Each is taken and given back as a Lock
// is, so that "lock" runs COMMAND the same way whatever it holds.
type locker interface {
	Lock(ctx context.Context) (*spanmutex.Lease, error)
	Unlock(ctx context.Context) error
}

// readLocker holds an RWLock's read side.
type readLocker struct{ rw *spanmutex.RWLock }

func (r readLocker) Lock(ctx context.Context) (*spanmutex.Lease, error) { return r.rw.RLock(ctx) }
func (r readLocker) Unlock(ctx context.Context) error                   { return r.rw.RUnlock(ctx) }

// permitLocker holds n permits of a Semaphore.
type permitLocker struct {
	sem *spanmutex.Semaphore
	n   int64
}

func (p permitLocker) Lock(ctx context.Context) (*spanmutex.Lease, error) {
	return p.sem.Acquire(ctx, p.n)
}
func (p permitLocker) Unlock(ctx context.Context) error { return p.sem.Release(ctx) }

// rwLockSize is the size of the semaphore an RWLock is (the library's
// rwPermits: a reader takes 1 permit, a writer all of them); status and
// the messages about sizes tell an RWLock's row by it. TestLockShared
// checks it against the library.
const rwLockSize = 1 << 30

// kindFlags are the flags of "lock" that say what NAME is: a Lock (none of
// them), a Semaphore (--permits, --weight) or an RWLock (--shared, --rw).
type kindFlags struct {
	permits int64 // 0: not a semaphore
	weight  int64
	shared  bool
	rw      bool
}

// registerKind defines the flags on fs.
func (k *kindFlags) registerKind(fs *flag.FlagSet) {
	fs.Int64Var(&k.permits, "permits", 0,
		"NAME is a semaphore of this many permits (its size, stored with NAME by its first holder): COMMANDs run together while their --weight permits fit")
	fs.Int64Var(&k.weight, "weight", 1, "with --permits: how many of the semaphore's permits COMMAND holds (1 to --permits)")
	fs.BoolVar(&k.shared, "shared", false,
		"NAME is a reader-writer lock: hold its read side, which any number of COMMANDs share while no --rw holds it or waits for it")
	fs.BoolVar(&k.rw, "rw", false, "NAME is a reader-writer lock: hold it alone (its write side), unless --shared is given too")
}

// checkKind refuses the flags that contradict each other, as usage errors
// of sub, before anything connects.
func (k *kindFlags) checkKind(sub string, fs *flag.FlagSet) error {
	semaphore := cmdline.FlagWasSet(fs, "permits")
	switch {
	case semaphore && (k.shared || k.rw):
		return usagef(sub, "--permits goes with neither --shared nor --rw: NAME is a semaphore (--permits) or a reader-writer lock (--shared, --rw), not both")
	case semaphore && k.permits < 1:
		return usagef(sub, "--permits %d: must be at least 1: it is the semaphore's size", k.permits)
	case !semaphore && cmdline.FlagWasSet(fs, "weight"):
		return usagef(sub, "--weight %d goes with --permits N: it is how many of a semaphore's N permits COMMAND holds", k.weight)
	case semaphore && (k.weight < 1 || k.weight > k.permits):
		return usagef(sub, "--weight %d: must be 1 to --permits (%d)", k.weight, k.permits)
	}
	return nil
}

// newLocker returns what NAME is held with, made with opts.
func (k *kindFlags) newLocker(client *spanner.Client, name string, opts []spanmutex.LockOption) (locker, error) {
	switch {
	case k.permits > 0:
		sem, err := spanmutex.NewSemaphore(client, name, k.permits, opts...)
		if err != nil {
			return nil, err
		}
		return permitLocker{sem: sem, n: k.weight}, nil
	case k.shared || k.rw:
		rw, err := spanmutex.NewRWLock(client, name, opts...)
		if err != nil {
			return nil, err
		}
		if k.shared {
			return readLocker{rw: rw}, nil
		}
		return rw, nil
	}
	l, err := spanmutex.NewLock(client, name, opts...)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// what names what NAME is held as, in messages: "the lock \"x\"".
func (k *kindFlags) what(name string) string {
	switch {
	case k.permits > 0:
		return "the semaphore " + strconv.Quote(name)
	case k.shared:
		return "the read lock " + strconv.Quote(name)
	case k.rw:
		return "the write lock " + strconv.Quote(name)
	}
	return "the lock " + strconv.Quote(name)
}

// sizeError is a *spanmutex.SizeMismatchError said in the terms of the
// command line: which flag to give, or how to change the size.
type sizeError struct {
	hint string
	err  *spanmutex.SizeMismatchError
}

func (e *sizeError) Error() string { return e.hint }
func (e *sizeError) Unwrap() error { return e.err }

// explainSize returns err, or a *sizeError if it is a
// *spanmutex.SizeMismatchError: NAME is an RWLock, a semaphore held
// with --shared or --rw, or a semaphore of another size.
func explainSize(name string, err error) error {
	var sme *spanmutex.SizeMismatchError
	if !errors.As(err, &sme) {
		return err
	}
	var hint string
	switch {
	case sme.Stored == rwLockSize:
		hint = fmt.Sprintf("%q is a reader-writer lock: hold it with --shared or --rw, or use another NAME", name)
	case sme.Declared == rwLockSize:
		hint = fmt.Sprintf("%q is a semaphore of %d permits: hold it with --permits %d, or use another NAME", name, sme.Stored, sme.Stored)
	default:
		hint = fmt.Sprintf("semaphore %q has %d permits, not --permits %d: give --permits %d, or change its size with 'spanmutex resize --permits %d %s'",
			name, sme.Stored, sme.Declared, sme.Stored, sme.Declared, shellQuote(name))
	}
	return &sizeError{hint: hint, err: sme}
}
