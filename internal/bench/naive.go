package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/google/uuid"

	"github.com/spanmutex/spanmutex"
	"github.com/spanmutex/spanmutex/internal/defaults"
	"github.com/spanmutex/spanmutex/internal/pace"
)

// The naive lock's backoff while the lock is held: randomised exponential
// with full jitter, the wait before retry k drawn uniformly from
// [0, min(naiveMaxBackOff, naiveInitialBackOff·2^k)).
const (
	naiveInitialBackOff = 10 * time.Millisecond
	naiveMaxBackOff     = time.Second
)

// naiveReleaseTimeout bounds a release, which runs even after the caller's
// ctx ended (the same bound as spanmutex's Unlock).
const naiveReleaseTimeout = defaults.FinishTimeout

// errBusy is returned by a naive acquisition that found the lock held.
var errBusy = errors.New("bench: the naive lock is held")

// newNaiveFleet makes n naive contenders on lock name, spread over clients
// round robin. They use the mutex table's row of that name with its own
// columns: State STARTED is held and NEEDED free, Owner and LeaseID say by
// whom, and Token counts acquisitions.
func newNaiveFleet(n int, clients []*spanner.Client, table, name string) *fleet {
	f := &fleet{
		contenders: make([]contender, n),
		warnings:   func() map[string]int { return nil },
	}
	for i := range n {
		f.contenders[i] = &naiveLock{client: clients[i%len(clients)], table: table, name: name,
			owner: fmt.Sprintf("bench-%d", i)}
	}
	return f
}

// naiveLock is one contender of the naive lock: what most lock libraries
// built on a database do. Acquiring is a read-write transaction (retried by
// the client when Spanner aborts it) that reads the lock's row and, if the
// lock is free, writes itself in as holder with the next token; if it is
// held, the contender backs off and tries again. Releasing is a read-write
// transaction that frees the row if this contender still holds it. There is
// no queue, so nothing decides who is next but timing.
type naiveLock struct {
	client      *spanner.Client
	table, name string
	owner       string

	held string // the lease id while this contender holds the lock
}

func (n *naiveLock) lock(ctx context.Context) (acquisition, error) {
	// A random id per Lock call tells our own write apart, so that a
	// failed transaction that did commit can be recognised and undone.
	id := uuid.NewString()
	for retry := 0; ; retry++ {
		token, err := n.tryLock(ctx, id)
		if err == nil {
			n.held = id
			return acquisition{token: token}, nil
		}
		if !errors.Is(err, errBusy) {
			n.undo(ctx, id)
			return acquisition{}, err
		}
		if err := pace.Sleep(ctx, fullJitter(retry, rand.Int64N)); err != nil {
			return acquisition{}, err
		}
	}
}

// tryLock takes the lock if it is free, with the next token, and returns
// the token; it returns errBusy if the lock is held.
func (n *naiveLock) tryLock(ctx context.Context, id string) (int64, error) {
	var token int64
	_, err := n.client.ReadWriteTransaction(ctx, func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
		token = 0
		r, err := tx.ReadRow(ctx, n.table, spanner.Key{n.name}, []string{"State", "Token"})
		exists := err == nil
		var (
			state string
			prev  int64
		)
		switch {
		case errors.Is(err, spanner.ErrRowNotFound):
		case err != nil:
			return err
		default:
			if err := r.Columns(&state, &prev); err != nil {
				return err
			}
		}
		if state == string(spanmutex.StateStarted) {
			return errBusy
		}
		cols := []string{"Name", "State", "Owner", "LeaseID", "Token", "Attempts", "StartedAt", "UpdatedAt"}
		vals := []any{n.name, string(spanmutex.StateStarted), n.owner, id, prev + 1, int64(0), spanner.CommitTimestamp, spanner.CommitTimestamp}
		m := spanner.Update(n.table, cols, vals)
		if !exists {
			m = spanner.Insert(n.table, append(cols, "CreatedAt"), append(vals, spanner.CommitTimestamp))
		}
		token = prev + 1
		return tx.BufferWrite([]*spanner.Mutation{m})
	})
	if err != nil {
		return 0, err
	}
	return token, nil
}

func (n *naiveLock) unlock(ctx context.Context) error {
	id := n.held
	n.held = ""
	if id == "" {
		return errors.New("bench: unlock of a naive lock this contender does not hold")
	}
	if err := n.release(ctx, id); err != nil {
		return fmt.Errorf("bench: release the naive lock: %w", err)
	}
	return nil
}

// release frees the lock if lease id holds it. It runs even if ctx has
// ended, for at most naiveReleaseTimeout.
func (n *naiveLock) release(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), naiveReleaseTimeout)
	defer cancel()
	_, err := n.client.ReadWriteTransaction(ctx, func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
		r, err := tx.ReadRow(ctx, n.table, spanner.Key{n.name}, []string{"State", "LeaseID"})
		if errors.Is(err, spanner.ErrRowNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		var state, leaseID spanner.NullString
		if err := r.Columns(&state, &leaseID); err != nil {
			return err
		}
		if state.StringVal != string(spanmutex.StateStarted) || leaseID.StringVal != id {
			return nil
		}
		return tx.BufferWrite([]*spanner.Mutation{spanner.Update(n.table,
			[]string{"Name", "State", "UpdatedAt"},
			[]any{n.name, string(spanmutex.StateNeeded), spanner.CommitTimestamp})})
	})
	return err
}

// undo settles an acquisition that failed, perhaps after its commit went
// through (the error came while Commit was under way): it reads the row
// and, if it names our id, releases the lock. Errors are ignored: the lock
// is then stuck, and the run shows it as acquisitions stopping.
func (n *naiveLock) undo(ctx context.Context, id string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), naiveReleaseTimeout)
	defer cancel()
	r, err := n.client.Single().ReadRow(ctx, n.table, spanner.Key{n.name}, []string{"LeaseID"})
	if err != nil {
		return
	}
	var leaseID spanner.NullString
	if r.Columns(&leaseID) != nil || leaseID.StringVal != id {
		return
	}
	_ = n.release(ctx, id)
}

// fullJitter returns the wait before retry number retry (0 for the first):
// uniform in [0, min(naiveMaxBackOff, naiveInitialBackOff·2^retry)), drawn
// with draw, which returns a number in [0, n) for n > 0.
func fullJitter(retry int, draw func(n int64) int64) time.Duration {
	ceiling := naiveMaxBackOff
	if retry < 30 {
		ceiling = min(ceiling, naiveInitialBackOff<<retry)
	}
	return time.Duration(draw(int64(ceiling)))
}
