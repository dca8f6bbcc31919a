package bench

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"sync"

	"cloud.google.com/go/spanner"

	"github.com/spanmutex/spanmutex"
)

// contender is one goroutine's handle on the lock under test. A contender
// is used by one goroutine at a time: lock, then unlock, again and again.
type contender interface {
	// lock blocks until the contender holds the lock, or ctx ends.
	lock(ctx context.Context) (acquisition, error)
	// unlock releases the lock, even if ctx has ended.
	unlock(ctx context.Context) error
}

// acquisition is what a successful lock call reports.
type acquisition struct {
	token int64
	// notHandedOver is set when the lock reports that it was not handed
	// over by the previous holder's release (spanmutex: taken free), so
	// that the acquisition gives no hand-off sample.
	notHandedOver bool
}

// fleet is the contenders of one run.
type fleet struct {
	contenders []contender
	// warnings returns what the locks logged at warning level, by message.
	warnings func() map[string]int
}

// newFleet makes n contenders of kind on lock name, spread over clients
// round robin.
func newFleet(kind Kind, n int, clients []*spanner.Client, table, name string) (*fleet, error) {
	switch kind {
	case Spanmutex:
		return newLockFleet(n, clients, table, name)
	case Naive:
		return newNaiveFleet(n, clients, table, name), nil
	}
	return nil, fmt.Errorf("bench: unknown lock kind %q", kind)
}

// newLockFleet makes n spanmutex.Lock contenders, one Lock each, all of
// one Scope: the contenders of one process.
func newLockFleet(n int, clients []*spanner.Client, table, name string) (*fleet, error) {
	warns := &warnings{byMessage: map[string]int{}}
	scope := spanmutex.NewScope()
	f := &fleet{contenders: make([]contender, n), warnings: warns.snapshot}
	for i := range n {
		h := &lockLog{warnings: warns}
		l, err := spanmutex.NewLock(clients[i%len(clients)], name,
			spanmutex.WithTable(table),
			spanmutex.WithOwner(fmt.Sprintf("bench-%d", i)),
			spanmutex.WithScope(scope),
			spanmutex.WithLogger(slog.New(h)))
		if err != nil {
			return nil, err
		}
		f.contenders[i] = &lockContender{target: l}
	}
	return f, nil
}

// lockContender is a contender on a spanmutex.Lock.
type lockContender struct {
	target *spanmutex.Lock
}

func (c *lockContender) lock(ctx context.Context) (acquisition, error) {
	lease, err := c.target.Lock(ctx)
	if err != nil {
		return acquisition{}, err
	}
	// Only a lock the previous holder's Unlock wrote us in as holder of
	// is a hand-off.
	return acquisition{token: lease.Token(), notHandedOver: !lease.HandedOff()}, nil
}

func (c *lockContender) unlock(ctx context.Context) error {
	return c.target.Unlock(ctx)
}

// lockLog is the slog.Handler of the run's Locks: it counts warnings.
// Loggers derived from it share its state.
type lockLog struct {
	warnings *warnings
}

// Enabled reports whether records at level are counted: warnings and above.
func (h *lockLog) Enabled(_ context.Context, level slog.Level) bool { return level >= slog.LevelWarn }

// Handle counts records at warning level and above.
func (h *lockLog) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		h.warnings.add(r.Message)
	}
	return nil
}

// WithAttrs returns h: the attributes are not needed.
func (h *lockLog) WithAttrs([]slog.Attr) slog.Handler { return h }

// WithGroup returns h: the groups are not needed.
func (h *lockLog) WithGroup(string) slog.Handler { return h }

// warnings counts log messages of a run's locks. Safe for concurrent use.
type warnings struct {
	mu        sync.Mutex
	byMessage map[string]int
}

func (w *warnings) add(msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.byMessage[msg]++
}

func (w *warnings) snapshot() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.byMessage)
}
