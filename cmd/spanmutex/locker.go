package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"time"

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
		hint = rwLockHint(name)
	case sme.Declared == rwLockSize:
		hint = semaphoreHint(name, sme.Stored)
	default:
		hint = fmt.Sprintf("semaphore %q has %d permits, not --permits %d: give --permits %d, or change its size with 'spanmutex resize --permits %d %s'",
			name, sme.Stored, sme.Declared, sme.Stored, sme.Declared, shellQuote(name))
	}
	return &sizeError{hint: hint, err: sme}
}

// rwLockHint says that name is a reader-writer lock, and how to hold it.
func rwLockHint(name string) string {
	return fmt.Sprintf("%q is a reader-writer lock: hold it with --shared or --rw, or use another NAME", name)
}

// semaphoreHint says that name is a semaphore of size permits, and how to
// hold it.
func semaphoreHint(name string, size int64) string {
	return fmt.Sprintf("%q is a semaphore of %d permits: hold it with --permits %d, or use another NAME", name, size, size)
}

// kindError is an error of the library that NAME's row is another kind of
// lock than the flags say, said in the terms of the command line: the
// kind found and the flags to give. The library's own words (a Lock's
// "use another name", a Semaphore's or RWLock's wrapped twice under
// "spanmutex:") name neither the kind nor the flags, and carry no type to
// tell them by: the kind is read from the row (explainKind).
type kindError struct {
	hint string
	err  error
}

func (e *kindError) Error() string { return e.hint }
func (e *kindError) Unwrap() error { return e.err }

// explainKind returns err, or a *sizeError or *kindError if the lock
// failed because NAME (of table) is another kind or size of lock than k
// says: the size from the error itself, the kind from NAME's row, read
// once within timeout after a failure that is none of an outage, an
// unreachable database and an ended ctx. If the row cannot be read, or is
// of the kind k says, err is returned as it is.
func (k *kindFlags) explainKind(ctx context.Context, client *spanner.Client, table, name string, timeout time.Duration, err error) error {
	if err == nil || ctx.Err() != nil {
		return err
	}
	var sme *spanmutex.SizeMismatchError
	if errors.As(err, &sme) {
		return explainSize(name, err)
	}
	for _, skip := range []error{spanmutex.ErrOutage, spanmutex.ErrUnreachable, spanmutex.ErrNotFound, spanmutex.ErrHeld,
		spanmutex.ErrInvalidConfig, context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, skip) {
			return err
		}
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	rows, rerr := spanmutex.Inspect(rctx, client, name, spanmutex.WithTable(table))
	if rerr != nil || len(rows) != 1 {
		return err
	}
	if hint := k.mismatch(name, rows[0]); hint != "" {
		return &kindError{hint: hint, err: err}
	}
	return err
}

// mismatch says what rec, NAME's row, is and which flags hold it, if k's
// flags cannot; "" if they can (or the row is of no kind spanmutex
// writes).
func (k *kindFlags) mismatch(name string, rec spanmutex.Record) string {
	asked := "a lock"
	switch {
	case k.permits > 0:
		asked = "a semaphore"
	case k.shared || k.rw:
		asked = "a reader-writer lock"
	}
	switch rec.State {
	case spanmutex.StateShared:
		if rec.Permits == rwLockSize {
			if asked == "a reader-writer lock" {
				return ""
			}
			return rwLockHint(name)
		}
		if asked == "a semaphore" {
			return "" // another size: a *SizeMismatchError
		}
		return semaphoreHint(name, rec.Permits)
	case spanmutex.StateNeeded, spanmutex.StateStarted:
		flags := "--permits or --weight"
		switch asked {
		case "a lock":
			return ""
		case "a reader-writer lock":
			flags = "--shared or --rw"
		}
		return fmt.Sprintf("%q is a lock, not %s: hold it without %s, or use another NAME", name, asked, flags)
	case spanmutex.StateDone, spanmutex.StateFailed:
		return fmt.Sprintf("%q is a run-once section ('spanmutex run'; its row is %s), which 'spanmutex lock' cannot hold with any flags: use another NAME",
			name, rec.State)
	}
	return ""
}
