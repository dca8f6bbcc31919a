package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spanmutex/spanmutex/internal/cmdline"
)

// console is the demo's output: whole lines, written by many goroutines.
type console struct {
	cmdline.Console
}

// newConsole returns a console that writes to w.
func newConsole(w io.Writer) *console { return &console{cmdline.Console{W: w}} }

// say writes one progress line of instance i.
func (c *console) say(i int, format string, args ...any) {
	c.Printf("  instance %d: %s\n", i, fmt.Sprintf(format, args...))
}

// logger returns the logger given to instance i's Mutex. It turns the
// mutex's "waiting for a holder" decision into one progress line per
// Mutex, and with verbose, shows every decision.
func (c *console) logger(i int, verbose bool) *slog.Logger {
	return slog.New(&progressHandler{out: c, instance: i, verbose: verbose, saidWaiting: new(atomic.Bool)})
}

// progressHandler is the slog.Handler behind console.logger.
type progressHandler struct {
	out         *console
	instance    int
	verbose     bool
	saidWaiting *atomic.Bool
}

// Enabled reports true: the waiting decision is logged at debug level.
func (h *progressHandler) Enabled(context.Context, slog.Level) bool { return true }

// Handle prints the first "waiting" decision (recognised by its
// takeover_in attribute) and, with verbose, every record.
func (h *progressHandler) Handle(_ context.Context, r slog.Record) error {
	attrs := map[string]slog.Value{}
	var text []string
	r.Attrs(func(a slog.Attr) bool {
		attrs[a.Key] = a.Value
		text = append(text, a.String())
		return true
	})
	if wait, ok := attrs["takeover_in"]; ok && !h.saidWaiting.Swap(true) {
		h.out.say(h.instance, "waiting: %s holds it (token %s); a takeover is allowed in %v if it goes silent",
			attrs["holder"], attrs["token"], wait.Duration().Round(10*time.Millisecond))
	}
	if h.verbose {
		h.out.say(h.instance, "[log] %s %s", r.Message, strings.Join(text, " "))
	}
	return nil
}

// WithAttrs returns h: the attributes the Mutex adds (its name and owner)
// are already known from the instance a progress line names.
func (h *progressHandler) WithAttrs([]slog.Attr) slog.Handler { return h }

// WithGroup returns h: the library logs no groups the demo needs.
func (h *progressHandler) WithGroup(string) slog.Handler { return h }
