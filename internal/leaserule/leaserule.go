// Package leaserule is the one rule by which every spanmutex primitive
// (the Mutex, the Lock and its Election, and package queue's change-stream
// capture) decides that a silent holder may be taken over: once the lease
// the holder declared has passed, plus the contender's jitter, since its
// last sign of life, measured by Spanner's clock only (a CURRENT_TIMESTAMP()
// read with the row, against commit timestamps in the row). A contender's
// own lease judges only a holder that declared none (a row written before
// leases were declared).
package leaserule

import (
	"math"
	"time"
)

// Declared returns the lease a holder declared, or own when it declared
// none (declared ≤ 0).
func Declared(declared, own time.Duration) time.Duration {
	if declared > 0 {
		return declared
	}
	return own
}

// After returns how long a holder with lease must have gone silent before
// a contender with jitter may take over: their sum. It saturates instead
// of overflowing, so that an absurdly long lease means "never" rather than
// "at once".
func After(lease, jitter time.Duration) time.Duration {
	if jitter > math.MaxInt64-lease {
		return math.MaxInt64
	}
	return lease + jitter
}

// Silent returns how long a holder whose last sign of life is last has
// been silent at now, both by Spanner's clock. A now before last (which
// Spanner's commit timestamps rule out) counts as no time at all.
func Silent(now, last time.Time) time.Duration {
	d := now.Sub(last)
	if d < 0 {
		return 0
	}
	return d
}

// Lapsed reports whether a holder that declared declared (own when it
// declared none) and last showed life at last may be taken over at now by
// a contender with jitter.
func Lapsed(now, last time.Time, declared, own, jitter time.Duration) bool {
	return Silent(now, last) >= After(Declared(declared, own), jitter)
}
