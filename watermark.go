package spanmutex

import (
	"math"
	"math/rand/v2"
	"time"
)

// takeoverAfter is how long, by Spanner's clock, a STARTED row must have gone
// without a renewal before this contender may take it over: the watermark
// plus this contender's jitter.
// The sum saturates instead of overflowing, so that an absurdly long
// watermark means "never" rather than "at once".
func takeoverAfter(watermark, jitter time.Duration) time.Duration {
	if jitter > math.MaxInt64-watermark {
		return math.MaxInt64
	}
	return watermark + jitter
}

// drawJitter draws a contender's extra wait past the watermark, uniformly
// from [0, fraction×watermark). Contenders that saw the same abandoned row
// then try their takeovers at different moments, and most find it already
// taken over by a lock-free read instead of contending in a transaction.
func drawJitter(watermark time.Duration, fraction float64) time.Duration {
	if fraction <= 0 {
		return 0
	}
	return time.Duration(rand.Float64() * fraction * float64(watermark))
}

// silentFor is how long, by Spanner's clock (now is CURRENT_TIMESTAMP() read
// in the same transaction or snapshot as the row), the holder of a STARTED
// row has gone without renewing it. A clock reading before the renewal (which
// Spanner's commit timestamps rule out) counts as no time at all.
func silentFor(r row) time.Duration {
	last := r.RenewedAt
	if last.IsZero() {
		last = r.StartedAt
	}
	if last.IsZero() {
		last = r.UpdatedAt
	}
	d := r.Now.Sub(last)
	if d < 0 {
		return 0
	}
	return d
}
