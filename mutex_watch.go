package spanmutex

import (
	"context"
	"time"

	"cloud.google.com/go/spanner"
)

// Wake-ups of run-once waiters. A Run waiting for another holder, whose
// Mutex's Scope listens (NewScope's do, on demand), registers
// as a watcher: one entry in the queue table under the section's name (a
// run-once name has no Lock waiters), with its Scope's address. The
// holder's transaction that records DONE or FAILED reads and deletes those
// entries, and after its commit was acknowledged sends each one datagram.
// The datagram only makes the waiter read the row at once instead of at its
// next backoff; a watcher that leaves first deletes its own entry, and one
// that died is removed by the next finish.

// watcher is a Run call's registration for wake-ups.
type watcher struct {
	id   string
	key  queueKey
	wake <-chan wakeUp
	// woken reports a wake-up received: the transaction that sent it
	// deleted our entry, so the next wait registers again.
	woken bool
	// unregister removes id from the Scope's wake-up board.
	unregister func()
}

// maxWatchers bounds how many watchers one finish reads and wakes; the
// rest poll.
const maxWatchers = 256

// watch registers o's Run as a watcher of the section if its Scope
// listens: once, and again after each wake-up (whose sender deleted our
// entry), so that every wait of the call can be woken. A failure is
// logged: the waiter then polls.
func (o *obtainer) watch(ctx context.Context) {
	m := o.m
	if o.watcher != nil && !o.watcher.woken {
		return
	}
	st, ok := m.store.(*spannerStore)
	if !ok || !st.hasQueue.Load() {
		return
	}
	w := o.watcher
	if w == nil {
		w = &watcher{id: m.cfg.scope.newWaiterID()}
		w.wake, w.unregister = m.cfg.scope.wakes.register(w.id)
	}
	addr := m.cfg.scope.wakeAddr(m.cfg.logger) // registered first: a listener with a waiter registered stays open
	if addr == "" {
		w.unregister()
		o.watcher = nil
		return
	}
	o.watcher, w.woken, w.key = w, false, queueKey{}
	wctx, cancel := detached(ctx, m.cfg.finishTimeout)
	defer cancel()
	at, err := st.insertEntries(wctx, m.name, []queueInsert{{id: w.id, owner: m.cfg.owner, lease: m.cfg.lease, wakeAddr: addr}}, false)
	if err != nil {
		m.cfg.logger.Warn("could not register for a wake-up when the section ends; polling", "err", err)
		return
	}
	w.key = queueKey{at: at, id: w.id}
}

// unwatch ends o's registration: it deletes the entry (if the finisher did
// not) and leaves the Scope's wake-up board. It runs even if ctx is done.
func (o *obtainer) unwatch(ctx context.Context) {
	w := o.watcher
	if w == nil {
		return
	}
	o.watcher = nil
	w.unregister()
	if w.key.at.IsZero() {
		return
	}
	if st, ok := o.m.store.(*spannerStore); ok {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.m.cfg.finishTimeout)
		defer cancel()
		if err := st.dequeue(dctx, o.m.name, w.key); err != nil {
			o.m.cfg.logger.Warn("could not delete our wake-up entry; the next finish deletes it", "err", err)
		}
	}
}

// pauseOrWake waits like attempts.pause, or until a wake-up says the
// section ended.
func (o *obtainer) pauseOrWake(ctx context.Context, limit time.Duration) error {
	if o.watcher == nil {
		return o.acquires.pause(ctx, limit)
	}
	wake := o.watcher.wake // the goroutine may outlive this call, and unwatch clears o.watcher
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-wake:
			cancel()
		case <-wctx.Done():
		}
	}()
	err := o.acquires.pause(wctx, limit)
	if err != nil && ctx.Err() == nil && wctx.Err() != nil {
		o.watcher.woken = true
		return nil // woken: read the row now
	}
	return err
}

// wakeWatchers sends each watcher a transaction took (takeWatchers) one
// datagram, after its commit was acknowledged.
func (s *spannerStore) wakeWatchers(ctx context.Context, watchers []handOff) {
	if s.sender == nil {
		return
	}
	for _, w := range watchers {
		s.sender.sendWake(ctx, w.wakeAddr, w.waiterID, time.Time{})
	}
}

// takeWatchersIn is takeWatchers where the table has the queue (a table
// without it has no watchers), its mutations appended to ms.
func (s *spannerStore) takeWatchersIn(ctx context.Context, tx *spanner.ReadWriteTransaction, name string, ms []*spanner.Mutation) ([]handOff, []*spanner.Mutation, error) {
	if !s.hasQueue.Load() {
		return nil, ms, nil
	}
	watchers, dels, err := s.takeWatchers(ctx, tx, name)
	return watchers, append(ms, dels...), err
}

// takeWatchers reads, in tx, the watchers of section name that can be
// woken, and returns them with the mutations that delete them.
func (s *spannerStore) takeWatchers(ctx context.Context, tx *spanner.ReadWriteTransaction, name string) ([]handOff, []*spanner.Mutation, error) {
	var (
		out []handOff
		ms  []*spanner.Mutation
	)
	it := tx.ReadWithOptions(ctx, s.queueTable(), spanner.Key{name}.AsPrefix(), []string{"EnqueuedAt", "WaiterID", "WakeAddr"}, &spanner.ReadOptions{Limit: maxWatchers})
	err := it.Do(func(r *spanner.Row) error {
		var (
			at   time.Time
			id   string
			addr spanner.NullString
		)
		if err := r.Columns(&at, &id, &addr); err != nil {
			return err
		}
		ms = append(ms, spanner.Delete(s.queueTable(), spanner.Key{name, at, id}))
		if addr.Valid {
			out = append(out, handOff{waiterID: id, wakeAddr: addr.StringVal})
		}
		return nil
	})
	return out, ms, err
}
