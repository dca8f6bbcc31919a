package spanmutex

// Fuzz tests of the pure decision logic and of name validation: invariants
// that must hold for any input. `go test` runs the seed corpus;
// `go test -short -fuzz=FuzzDecide$ .` searches for more (-short: the fuzz
// targets need no emulator, and every fuzz worker would start one).
//
// Two seeds are the first failures these targets found, kept as
// regressions: a lease+jitter that overflowed int64 into an immediate
// takeover, and a lock that took a row in a state spanmutex never writes.

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"
)

// fuzzNow is Spanner's clock in fuzzed rows; the row's times are offsets
// from it, so that a decision depends on differences only.
var fuzzNow = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

// fuzzStates are the states a fuzzed row can be in: the four valid ones and
// some that only something other than spanmutex could have written.
var fuzzStates = []State{StateNeeded, StateStarted, StateDone, StateFailed, "", "started", "WEIRD"}

// fuzzRow builds a row from fuzz input: set says which of StartedAt,
// RenewedAt, UpdatedAt and FinishedAt (bits 0-3) are not NULL, and each ago
// is how long before now that time is (negative: after now).
func fuzzRow(exists bool, state uint8, leaseID string, token, attempts int64, set uint8, startedAgo, renewedAgo, updatedAgo, finishedAgo int64) row {
	at := func(bit uint8, ago int64) time.Time {
		if set&(1<<bit) == 0 {
			return time.Time{}
		}
		return fuzzNow.Add(-time.Duration(ago))
	}
	r := row{Exists: exists, Now: fuzzNow}
	if exists {
		r.State = fuzzStates[int(state)%len(fuzzStates)]
		r.LeaseID, r.Token, r.Attempts = leaseID, token, attempts
		r.StartedAt, r.RenewedAt = at(0, startedAgo), at(1, renewedAgo)
		r.UpdatedAt, r.FinishedAt = at(2, updatedAgo), at(3, finishedAgo)
	}
	return r
}

// fuzzPolicy turns fuzz input into a policy that New could produce: a
// positive lease, a jitter fraction in [0, 1) (jitter modulo the
// lease, as a fraction of it), a staleness of 0 or above the lease,
// and at least one attempt.
func fuzzPolicy(lease, jitter, staleness, maxAttempts int64) policy {
	p := policy{lease: time.Duration(lease & math.MaxInt64)}
	if p.lease == 0 {
		p.lease = 1
	}
	p.jitter = float64(time.Duration(jitter&math.MaxInt64)%p.lease) / float64(p.lease)
	if s := time.Duration(staleness & math.MaxInt64); s > p.lease {
		p.staleness = s
	}
	p.maxAttempts = 1 + (maxAttempts&math.MaxInt64)%1000
	return p
}

// refSilent is how long, by Spanner's clock, the holder of r has not
// renewed: since RenewedAt, else StartedAt, else UpdatedAt; never negative.
// It is written apart from silentFor, to check it.
func refSilent(r row) time.Duration {
	last := r.UpdatedAt
	switch {
	case !r.RenewedAt.IsZero():
		last = r.RenewedAt
	case !r.StartedAt.IsZero():
		last = r.StartedAt
	}
	return max(r.Now.Sub(last), 0) // time.Time.Sub saturates
}

// refLimit is the holder's lease (r's declared one, else the lease)
// plus the jitter's share of it, without overflow: the silence after which
// a takeover is allowed.
func refLimit(r row, p policy) time.Duration {
	lease := p.lease
	if r.Lease > 0 {
		lease = r.Lease
	}
	jitter := time.Duration(p.jitter * float64(lease))
	if jitter > math.MaxInt64-lease {
		return math.MaxInt64
	}
	return lease + jitter
}

// refStale reports whether a finished row's staleness threshold passed.
func refStale(r row, p policy) bool {
	return p.staleness > 0 && !r.FinishedAt.IsZero() && r.Now.Sub(r.FinishedAt) >= p.staleness
}

func FuzzDecide(f *testing.F) {
	type seed struct {
		exists                                          bool
		state                                           uint8
		attempts                                        int64
		set                                             uint8
		startedAgo, renewedAgo, updatedAgo, finishedAgo int64
		lease, jitter, staleness, maxAttempts, token    int64
	}
	s, m, h := int64(time.Second), int64(time.Minute), int64(time.Hour)
	for _, sd := range []seed{
		{exists: false, lease: m, maxAttempts: 2},
		{true, 0, 1, 0b0100, 0, 0, s, 0, m, 10 * s, 0, 2, 1},                // NEEDED
		{true, 0, 3, 0b0100, 0, 0, s, 0, m, 10 * s, 0, 2, 1},                // NEEDED, no attempts left
		{true, 1, 1, 0b0111, 30 * s, 30 * s, 30 * s, 0, m, 10 * s, 0, 2, 1}, // STARTED, live
		{true, 1, 1, 0b0111, h, h, h, 0, m, 10 * s, 0, 2, 1},                // STARTED, silent
		{true, 1, 3, 0b0111, h, h, h, 0, m, 10 * s, 0, 2, 1},                // STARTED, silent, last attempt
		{true, 1, 1, 0b0001, 70 * s, 0, 0, 0, m, 10 * s, 0, 2, 1},           // STARTED, no RenewedAt
		{true, 1, 1, 0b0111, -s, -s, -s, 0, m, 10 * s, 0, 2, 1},             // renewed after now
		{true, 2, 1, 0b1111, h, h, h, 2 * h, m, 0, h, 2, 1},                 // DONE, stale
		{true, 2, 1, 0b1111, h, h, h, 30 * m, m, 0, h, 2, 1},                // DONE, fresh
		{true, 3, 1, 0b1111, h, h, h, s, m, 0, 0, 2, 1},                     // FAILED, retry
		{true, 3, 3, 0b1111, h, h, h, 2 * h, m, 0, h, 2, 1},                 // FAILED, exhausted but stale
		{true, 3, 3, 0b0111, h, h, h, 0, m, 0, h, 2, 1},                     // FAILED, no FinishedAt
		{true, 6, 1, 0b0111, h, h, h, h, m, 0, 0, 2, 1},                     // unknown state
		{true, 1, 1, 0b0000, 0, 0, 0, 0, m, 0, 0, 2, 1},                     // STARTED with no times at all
		// A holder renewed a second ago, with a lease of about 253 years
		// (someone's "never take over") and a jitter drawn from the default
		// 0.2: lease+jitter overflowed int64 into an immediate takeover.
		{true, 1, 1, 0b0111, s, s, s, 0, 8e18, 15e17, 0, 2, 1},
	} {
		f.Add(sd.exists, sd.state, sd.token, sd.attempts, sd.set, sd.startedAgo, sd.renewedAgo, sd.updatedAgo, sd.finishedAgo,
			sd.lease, sd.jitter, sd.staleness, sd.maxAttempts)
	}
	f.Fuzz(func(t *testing.T, exists bool, state uint8, token, attempts int64, set uint8,
		startedAgo, renewedAgo, updatedAgo, finishedAgo, lease, jitter, staleness, maxAttempts int64) {
		r := fuzzRow(exists, state, "lease", token, attempts, set, startedAgo, renewedAgo, updatedAgo, finishedAgo)
		p := fuzzPolicy(lease, jitter, staleness, maxAttempts)
		d := decide(r, p)
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("decide(%+v, %+v) = {%v wait=%v fresh=%v retry=%v}: "+format,
				append([]any{r, p, d.action, d.wait, d.fresh, d.retry}, args...)...)
		}
		if d.action < actAcquire || d.action > actAbandon {
			fail("not an action")
		}
		if (d.wait != 0) != (d.action == actWait) {
			fail("a wait is given with actWait, and only with it")
		}
		if (d.fresh || d.retry) && d.action != actAcquire {
			fail("fresh and retry qualify only an acquisition")
		}
		if d.fresh && d.retry {
			fail("a fresh generation is not a retry")
		}
		silent, limit, stale := refSilent(r), refLimit(r, p), refStale(r, p)
		if !r.Exists {
			if d.action != actAcquire || !d.fresh {
				fail("no row: acquire a fresh generation")
			}
			return
		}
		switch r.State {
		case StateNeeded:
			if want := actAcquire; r.Attempts >= p.maxAttempts {
				if d.action != actExhausted {
					fail("NEEDED with %d of %d attempts used: exhausted", r.Attempts, p.maxAttempts)
				}
			} else if d.action != want || d.fresh || d.retry {
				fail("NEEDED with attempts left: acquire in the same generation")
			}
		case StateStarted:
			switch d.action {
			case actWait:
				if silent >= limit {
					fail("waits although the holder has been silent for %v, past lease+jitter %v", silent, limit)
				}
				if d.wait != limit-silent {
					fail("waits %v; the takeover is allowed in %v", d.wait, limit-silent)
				}
			case actTakeOver, actAbandon:
				if silent < limit {
					fail("takes over a holder silent for only %v, before lease+jitter %v", silent, limit)
				}
				if (d.action == actAbandon) != (r.Attempts >= p.maxAttempts) {
					fail("abandon exactly when no attempts are left (%d of %d)", r.Attempts, p.maxAttempts)
				}
			default:
				fail("a STARTED row is waited for, taken over or abandoned")
			}
		case StateDone:
			if d.action == actAcquire && !(stale && d.fresh) {
				fail("DONE is run again only as a fresh generation once stale")
			}
			if d.action != actDone && d.action != actAcquire {
				fail("DONE: done, or acquire once stale")
			}
			if stale != (d.action == actAcquire) {
				fail("DONE: acquire exactly when stale (%v)", stale)
			}
		case StateFailed:
			switch {
			case stale:
				if d.action != actAcquire || !d.fresh {
					fail("a stale FAILED row starts a fresh generation")
				}
			case r.Attempts >= p.maxAttempts:
				if d.action != actExhausted {
					fail("FAILED with no attempts left: exhausted")
				}
			default:
				if d.action != actAcquire || !d.retry {
					fail("FAILED with attempts left: retry")
				}
			}
		default:
			if d.action == actAcquire || d.action == actTakeOver || d.action == actAbandon {
				fail("a row in unknown state %q is never written", r.State)
			}
		}
	})
}

func FuzzDecideLock(f *testing.F) {
	s, m, h := int64(time.Second), int64(time.Minute), int64(time.Hour)
	type seed struct {
		exists            bool
		state             uint8
		mine, queued      bool
		ahead             int
		set               uint8
		renewedAgo, lease int64
		jitter            int64
	}
	for _, sd := range []seed{
		{false, 0, false, false, 0, 0, 0, m, 0},
		{false, 0, false, true, 3, 0, 0, m, 0},
		{true, 0, false, false, 0, 0b0100, s, m, 0},        // free
		{true, 0, false, true, 2, 0b0100, s, m, 0},         // free, others first
		{true, 1, false, true, 0, 0b0111, 10 * s, m, 0},    // held, live
		{true, 1, true, false, 0, 0b0111, 10 * s, m, 0},    // handed to us
		{true, 1, false, true, 0, 0b0111, h, m, 0},         // holder silent
		{true, 1, false, true, 1, 0b0111, h, m, 0},         // holder silent, others first
		{true, 2, false, false, 0, 0b1111, s, m, 0},        // DONE
		{true, 3, true, false, 0, 0b1111, s, m, 0},         // FAILED
		{true, 1, false, false, 0, 0b0111, s, 8e18, 15e17}, // lease+jitter overflows
		// A row in a state spanmutex never writes, silent for an hour.
		{true, 6, false, false, 0, 0b0111, h, m, 0},
	} {
		f.Add(sd.exists, sd.state, sd.mine, sd.queued, sd.ahead, sd.set, sd.renewedAgo, sd.renewedAgo, sd.renewedAgo, sd.lease, sd.jitter)
	}
	f.Fuzz(func(t *testing.T, exists bool, state uint8, mine, queued bool, ahead int, set uint8,
		startedAgo, renewedAgo, updatedAgo, lease, jitter int64) {
		leaseID := "someone-else"
		if mine {
			leaseID = "me"
		}
		r := fuzzRow(exists, state, leaseID, 7, 0, set, startedAgo, renewedAgo, updatedAgo, 0)
		v := lockView{row: r, ahead: max(ahead, 0) % (maxAhead + 1), queued: queued}
		p := fuzzPolicy(lease, jitter, 0, 1)
		d := decideLock(v, "me", p)
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("decideLock(%+v, ahead=%d, %+v) = {%v wait=%v}: "+format,
				append([]any{r, v.ahead, p, d.action, d.wait}, args...)...)
		}
		if d.action < lockAcquire || d.action > lockWrongKind {
			fail("not an action")
		}
		if d.wait != 0 && d.action != lockWait {
			fail("a wait is given only with lockWait")
		}
		if d.wait < 0 {
			fail("negative wait")
		}
		taking := d.action == lockAcquire || d.action == lockTakeOver
		if taking && v.ahead > 0 {
			fail("takes the lock with %d live waiters before us (FIFO)", v.ahead)
		}
		silent, limit := refSilent(r), refLimit(r, p)
		switch {
		case !r.Exists || r.State == StateNeeded:
			if want := map[bool]lockAction{true: lockPassOn, false: lockAcquire}[v.ahead > 0]; d.action != want || d.wait != 0 {
				fail("free lock: acquire if nobody is before us, else hand it to the first in line")
			}
		case r.State == StateDone || r.State == StateFailed:
			if d.action != lockWrongKind {
				fail("a run-once row is never used as a lock")
			}
		case r.State == StateStarted && r.LeaseID == "me":
			if d.action != lockHeld {
				fail("a lock handed to us is held")
			}
		case r.State == StateStarted:
			if d.action == lockTakeOver && silent < limit {
				fail("takes over a holder silent for only %v, before lease+jitter %v", silent, limit)
			}
			if d.action != lockTakeOver && d.action != lockWait && d.action != lockPassOn {
				fail("a lock held by another is waited for, taken over or passed on")
			}
			if d.action == lockPassOn && (silent < limit || v.ahead == 0) {
				fail("passes on a holder silent for %v (lease+jitter %v) with %d before us: only a silent holder's lock, to waiters before us", silent, limit, v.ahead)
			}
			if d.action == lockWait && v.ahead == 0 && silent >= limit {
				fail("waits for a holder silent for %v, past lease+jitter %v, with nobody before us", silent, limit)
			}
			if d.wait > limit {
				fail("waits %v, longer than lease+jitter %v", d.wait, limit)
			}
		default:
			if taking || d.action == lockHeld {
				fail("a row in unknown state %q is never taken (decide leaves such rows alone)", r.State)
			}
		}
	})
}

func FuzzValidateName(f *testing.F) {
	for _, s := range []string{"", "a", "migrations/0042", "schéma", "日本語", "a\x00b", "tab\there", "\xff", "a\u0085b", "\u200b",
		strings.Repeat("a", 256), strings.Repeat("a", 257), strings.Repeat("é", 256), strings.Repeat("é", 257), "\U0001F600"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := validateName(name)
		// The rule, decoded by hand: 1 to 256 runes of valid UTF-8, none a
		// control character.
		valid, runes := name != "", 0
		for i := 0; i < len(name); {
			r, size := utf8.DecodeRuneInString(name[i:])
			if r == utf8.RuneError && size == 1 || unicode.IsControl(r) {
				valid = false
			}
			runes++
			i += size
		}
		valid = valid && runes <= maxNameLength
		if valid != (err == nil) {
			t.Fatalf("validateName(%q) = %v; want valid=%v (%d runes)", name, err, valid, runes)
		}
		if err != nil {
			if !errors.Is(err, ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "spanmutex: ") {
				t.Fatalf("validateName(%q) = %v; want an error wrapping ErrInvalidConfig", name, err)
			}
			if !utf8.ValidString(err.Error()) {
				t.Fatalf("validateName(%q): the message is not valid UTF-8: %q", name, err.Error())
			}
		}
	})
}
