package spanmutex

import "sync/atomic"

// storeStats counts the Spanner operations of one store, cumulatively: the
// package's tests read them (opCounts); users see the OpenTelemetry metrics.
type storeStats struct {
	rwAttempts  atomic.Int64
	blindWrites atomic.Int64
	reads       atomic.Int64
}
