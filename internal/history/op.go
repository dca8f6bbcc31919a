package history

import (
	"fmt"
	"github.com/spanmutex/spanmutex/internal/textcut"
	"strings"
	"time"
)

// Kind is what an operation did.
type Kind string

// The kinds of operation a history holds.
const (
	// Acquire is Mutex.Run obtaining its section (recorded when fn is
	// called) or Lock.Lock/TryLock returning a lease. With Outcome OK it
	// carries the lease's Token, Takeover and Commit (Lease.AcquiredAt, the
	// acquisition's commit timestamp). A call that ended without a lease is
	// recorded with NoEffect: it may still have committed an acquisition that
	// it then gave back, which no check relies on.
	Acquire Kind = "acquire"
	// Renew is a renewal of a held lease, seen on the wire by
	// Recorder.RenewalObserver, with its commit timestamp. Its Token is
	// filled in by Check, from the row's history: the lease of its client
	// that held the row when it committed (attribute.go).
	Renew Kind = "renew"
	// Release is Lock.Unlock: OK, LeaseLost, or Unknown (it gave up).
	Release Kind = "release"
	// Complete is Mutex.Run recording DONE after the section returned nil:
	// OK (Run returned Executed, nil), LeaseLost, or Unknown.
	Complete Kind = "complete"
	// Fail is Mutex.Run recording FAILED after the section returned an
	// error: OK (a *SectionError alone), LeaseLost, or Unknown.
	Fail Kind = "fail"
	// SeeDone is Mutex.Run returning AlreadyDone: it read the row DONE.
	SeeDone Kind = "already-done"
	// Write is a guarded write of Token to Resource: OK (committed),
	// LeaseLost (Guard refused it: nothing written), or Unknown (settled by
	// Check from the table read back after the run).
	Write Kind = "guarded-write"
	// SectionStart and SectionEnd bracket what a holder believes: from the
	// moment it holds a lease until it stops acting on it. They are local
	// events, not checked for exclusion: a holder that lost its lease may
	// still believe it holds it, which is what fencing is for.
	SectionStart Kind = "section-start"
	SectionEnd   Kind = "section-end"
	// Pause is a stretch [Call, Return] of the local clock during which
	// the client's process was frozen (the torture's pause fault); it has
	// no Name. It is not checked: it excuses a lease in limbo that lapsed
	// meanwhile (CheckLimbo).
	Pause Kind = "pause"
)

// Outcome is how an operation ended.
type Outcome string

// The outcomes.
const (
	// OK: the operation took effect (committed, or observed).
	OK Outcome = "ok"
	// LeaseLost: refused because the lease was no longer held; no effect.
	LeaseLost Outcome = "lease-lost"
	// NoEffect: ended without taking effect for another reason.
	NoEffect Outcome = "no-effect"
	// Unknown: may or may not have taken effect (a commit whose answer was
	// lost, or a call that never returned).
	Unknown Outcome = "unknown"
)

// Never is the Return of an operation that had not returned when the
// history was taken.
const Never time.Duration = -1

// Op is one operation of one client. Call and Return are local monotonic
// times since the Recorder started: they order operations within this
// process, and are never compared with Commit, which is Spanner's clock.
type Op struct {
	ID       int           `json:"id"`
	Client   string        `json:"client"`
	Kind     Kind          `json:"kind"`
	Name     string        `json:"name"`               // the lock or section name
	RunOnce  bool          `json:"run_once,omitempty"` // Name is a run-once section (Mutex.Run), not a Lock
	Resource string        `json:"resource,omitempty"` // guarded writes: what was written
	WriteID  string        `json:"write_id,omitempty"` // guarded writes: the unique key of the row written
	Token    int64         `json:"token,omitempty"`
	Takeover bool          `json:"takeover,omitempty"` // acquisitions: Lease.TookOver
	Call     time.Duration `json:"call"`
	Return   time.Duration `json:"return"` // Never if it never returned
	Outcome  Outcome       `json:"outcome"`
	Commit   time.Time     `json:"commit,omitzero"` // Spanner commit timestamp, when known
	Err      string        `json:"err,omitempty"`
	Note     string        `json:"note,omitempty"`
	// Settled: the outcome was unknown to the client and was settled by
	// reading the table back after the run; the operation may have taken
	// effect after it returned.
	Settled bool `json:"settled,omitempty"`
	// Lease is, for an acquisition, the lease its holder declared in the
	// row (its lease): no takeover may come before the holder has gone
	// that long without a renewal, whatever the taker's own lease.
	// 0 in histories recorded without it: Config.Lease stands in.
	Lease time.Duration `json:"lease,omitempty"`
	// HandedOff is, for a Lock acquisition, Lease.HandedOff: the previous
	// holder's Unlock made this caller the holder, so the lock was never
	// free in between.
	HandedOff bool `json:"handed_off,omitempty"`
	// Try marks a TryLock call, which never waits.
	Try bool `json:"try,omitempty"`
	// Refusal is, for a Lock or TryLock call that returned no lease, what
	// its error matched.
	Refusal Refusal `json:"refusal,omitempty"`
}

// Refusal is what the error of a Lock or TryLock call that returned no
// lease matched.
type Refusal string

// The refusals. Every one but RefusedUnexpected is in Lock's contract.
const (
	// RefusedNotObtained: spanmutex.ErrNotObtained (its context ended).
	RefusedNotObtained Refusal = "not-obtained"
	// RefusedExhausted: an error matching spanmutex.ErrOutage (Spanner kept failing).
	RefusedExhausted Refusal = "exhausted"
	// RefusedHeld: a *spanmutex.HeldError, from TryLock only.
	RefusedHeld Refusal = "held"
	// RefusedUnexpected: anything else; CheckLockErrors reports it.
	RefusedUnexpected Refusal = "unexpected"
)

// String describes the operation on one line.
func (o Op) String() string {
	var b strings.Builder
	ret := "never"
	if o.Return != Never {
		ret = fmtDur(o.Return)
	}
	fmt.Fprintf(&b, "#%d [%s, %s] %s %s %s", o.ID, fmtDur(o.Call), ret, o.Client, o.Kind, o.Name)
	if o.Resource != "" && o.Resource != o.Name {
		fmt.Fprintf(&b, " resource=%s", o.Resource)
	}
	if o.Token != 0 {
		fmt.Fprintf(&b, " token=%d", o.Token)
	}
	if o.Takeover {
		b.WriteString(" takeover")
	}
	if o.HandedOff {
		b.WriteString(" handed-off")
	}
	if o.Lease > 0 {
		fmt.Fprintf(&b, " lease=%v", o.Lease)
	}
	fmt.Fprintf(&b, " -> %s", o.Outcome)
	if !o.Commit.IsZero() {
		fmt.Fprintf(&b, " commit=%s", o.Commit.UTC().Format("15:04:05.000000"))
	}
	if o.Settled {
		b.WriteString(" (settled by read-back)")
	}
	if o.Note != "" {
		fmt.Fprintf(&b, " (%s)", o.Note)
	}
	if o.Refusal != "" {
		fmt.Fprintf(&b, " refusal=%s", o.Refusal)
	}
	if o.Err != "" {
		fmt.Fprintf(&b, " err=%q", textcut.Cut(o.Err, 160, "…"))
	}
	return b.String()
}

// fmtDur prints a local time offset with millisecond precision.
func fmtDur(d time.Duration) string {
	return fmt.Sprintf("%.3fs", d.Seconds())
}
