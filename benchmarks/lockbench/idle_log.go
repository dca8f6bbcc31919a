package lockbench

import (
	"context"
	"log/slog"
	"maps"
	"sync"
)

// warnCounter is a slog.Handler that counts the library's warnings (and
// errors) by message, so that an idle run says why its figures moved (a
// session lost, renewals that failed) without logging every record. Its
// methods are safe for concurrent use.
type warnCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

// newWarnCounter returns a counter with nothing counted.
func newWarnCounter() *warnCounter { return &warnCounter{counts: map[string]int{}} }

// Enabled reports whether level is counted: warnings and above.
func (w *warnCounter) Enabled(_ context.Context, level slog.Level) bool {
	return level >= slog.LevelWarn
}

// Handle counts r under its message.
func (w *warnCounter) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.counts[r.Message]++
	return nil
}

// WithAttrs returns w: attributes are not counted.
func (w *warnCounter) WithAttrs([]slog.Attr) slog.Handler { return w }

// WithGroup returns w: groups are not counted.
func (w *warnCounter) WithGroup(string) slog.Handler { return w }

// snapshot returns the counts so far.
func (w *warnCounter) snapshot() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.counts)
}
