package bench

import (
	"math"
	"slices"
	"time"
)

// percentile returns the p-th percentile (0 < p ≤ 100) of samples by the
// nearest-rank method: the smallest sample that at least p% of the samples
// are less than or equal to. It returns false if there are no samples. It
// does not modify samples.
func percentile(samples []time.Duration, p float64) (time.Duration, bool) {
	if len(samples) == 0 || !(p > 0 && p <= 100) {
		return 0, false
	}
	sorted := slices.Clone(samples)
	slices.Sort(sorted)
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[max(rank, 1)-1], true
}
