// The watermark: the takeover rule. The seeds call the lease a holder
// declares its watermark (WithLease; stored in LeaseMicros): the holder
// renews within it, and nobody takes over before the row has gone unrenewed
// for that long by Spanner's clock, whatever their own lease. The
// arithmetic is internal/leaserule's, shared by every primitive.

package spanmutex

import (
	"math/rand/v2"
	"time"

	"github.com/spanmutex/spanmutex/internal/leaserule"
)

// policy is what a decision depends on besides the row.
type policy struct {
	// lease is this contender's own lease: what it declares when it
	// acquires, and how it judges a row whose holder declared none.
	lease     time.Duration
	staleness time.Duration // 0: DONE and FAILED never go stale
	// jitter is this contender's extra wait past a holder's lease before a
	// takeover, as a fraction of that lease, drawn per call.
	jitter      float64
	maxAttempts int64
	version     string // "": versions are not compared
}

// holderLease returns the lease r's holder declared when it acquired: it
// renews within it, and no contender takes over before it has passed since
// the last renewal, by Spanner's clock. A row written without a declared
// lease (by a spanmutex older than the LeaseMicros column) is judged by the
// contender's own lease, own, as it was then.
func holderLease(r row, own time.Duration) time.Duration {
	return leaserule.Declared(r.Lease, own)
}

// takeoverAfter returns how long r's holder must have gone silent, by
// Spanner's clock, before this contender may take over: the holder's
// declared lease, plus this contender's jitter as a fraction of that lease.
// Only the holder's declaration sets the bound: a contender configured with
// a shorter lease waits as long as one with a longer one. The sum saturates
// (leaserule.After): an absurdly long lease means "never", not "at once".
func (p policy) takeoverAfter(r row) time.Duration {
	lease := holderLease(r, p.lease)
	return leaserule.After(lease, time.Duration(p.jitter*float64(lease)))
}

// drawFraction draws a contender's jitter, uniformly from [0, fraction),
// from the config's source (rand.Float64 unless a test set one).
func (c *config) drawFraction(fraction float64) float64 {
	if fraction <= 0 {
		return 0
	}
	if c.random != nil {
		return c.random() * fraction
	}
	return rand.Float64() * fraction
}

// drawJitter draws a duration uniformly from [0, fraction×d): taken off a
// waiter's renewal period of its queue entry (lock_entry.go), so that
// waiters do not renew in step. (A takeover's jitter is drawn as a
// fraction, drawFraction, of the holder's lease, known only from the row.)
func (c *config) drawJitter(d time.Duration, fraction float64) time.Duration {
	return time.Duration(c.drawFraction(fraction) * float64(d))
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
	return leaserule.Silent(r.Now, last)
}

// holderLive reports whether r shows the lock held by a holder that renewed
// it within its declared lease (own, if it declared none), by Spanner's
// clock: r.Now, read with the row.
func holderLive(r row, own time.Duration) bool {
	return r.State == StateStarted && silentFor(r) < holderLease(r, own)
}

// leaseLeft is how long the holder of r has, by Spanner's clock (r.Now),
// before it has gone silent past its declared lease (own, if it declared
// none); 0 if r shows no live holder.
func leaseLeft(r row, own time.Duration) time.Duration {
	if r.State != StateStarted {
		return 0
	}
	return max(holderLease(r, own)-silentFor(r), 0)
}
