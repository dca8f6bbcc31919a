package spangoose

import (
	"context"
	"fmt"
)

// runKey is the context key under which Context stores its run.
type runKey struct{}

// run ties the ctx of one goose Provider call to the Locker whose Lock it
// reaches: cancel stops the call when the lease is lost.
type run struct {
	locker *Locker
	cancel context.CancelCauseFunc
}

// Context returns a copy of parent to pass to the goose Provider call (Up,
// UpByOne, UpTo, Down, DownTo, ApplyVersion, Status) whose provider was
// given this Locker with goose.WithLocker, and a function that releases it
// (call it when the call returns). Lock refuses any other ctx.
//
// If the lease that Lock takes under this ctx is lost, the ctx is cancelled
// with a cause matching ErrStopped and spanmutex.ErrLeaseLost
// (context.Cause tells it), so goose stops: the statement or transaction
// under way fails with context.Canceled and goose returns. What a cancelled
// statement leaves is the database's to say: a transaction is rolled back; a
// DDL operation Spanner has accepted runs to its end (see the package doc).
func (l *Locker) Context(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	ctx = context.WithValue(ctx, runKey{}, &run{locker: l, cancel: cancel})
	return ctx, func() { cancel(nil) }
}

// runOf returns the run l.Context stored in ctx, or an error saying that
// ctx did not come from it.
func (l *Locker) runOf(ctx context.Context) (*run, error) {
	r, _ := ctx.Value(runKey{}).(*run)
	if r == nil || r.locker != l {
		return nil, fmt.Errorf("%w: Lock was called with a ctx that this Locker's Context did not make, "+
			"so a lost lease could not stop goose; call the provider with it: "+
			"ctx, cancel := locker.Context(ctx); defer cancel(); provider.Up(ctx)", ErrInvalidConfig)
	}
	return r, nil
}
