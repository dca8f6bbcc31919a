package queue

import "sync/atomic"

// WorkerStats counts what a worker has done since it was made. Counts are
// cumulative.
type WorkerStats struct {
	// Jobs counts handler calls.
	Jobs int64
	// RequestsCompleted and RequestsFailed count the requests this worker
	// recorded complete, or ended in error: the handler failed, their create
	// failed, they have no create, or they were claimed too often.
	RequestsCompleted, RequestsFailed int64
	// RequestsReleased counts requests released back to new because their
	// handler overran the shutdown grace, or failed after the lease was lost.
	RequestsReleased int64
	// Grouped counts requests handled beyond the first in update jobs: how
	// many handler calls grouping saved.
	Grouped int64
	// Skipped counts resources a scan passed over as held by another
	// worker: TryLock said so, or, between sweeps, a request in-progress.
	Skipped int64
	// Tenures counts the resources this worker locked; IdleTenures counts those
	// in which it found nothing to claim (another worker had handled the
	// requests the scan saw).
	Tenures, IdleTenures int64
	// Scans counts passes over the pending index.
	Scans int64
	// Recovered counts requests claimed again after the worker that had
	// claimed them lost its lease (it died, or went silent past the lease).
	Recovered int64
	// LeasesLost counts tenures in which this worker lost a resource's lease
	// before it was done: whatever it had claimed and not recorded is left
	// to the next holder.
	LeasesLost int64
	// Transactions counts attempts of the queue's read-write transactions
	// (claims and finishes), aborted attempts the client retried included.
	Transactions int64
	// Reads counts the queue's single-use reads (scan pages, read-backs).
	Reads int64
}

// workerCounters are the counters behind WorkerStats.
type workerCounters struct {
	tenures, idleTenures, jobs, completed, failed, released, grouped, skipped, scans, recovered,
	leasesLost, transactions, reads atomic.Int64
	// sweeps counts the passes that were sweeps (Run); not in WorkerStats.
	sweeps atomic.Int64
}

// Stats returns what the worker has done so far. It is safe to call while
// Run runs.
func (w *Worker) Stats() WorkerStats {
	c := &w.stats
	return WorkerStats{
		Jobs: c.jobs.Load(), RequestsCompleted: c.completed.Load(), RequestsFailed: c.failed.Load(),
		RequestsReleased: c.released.Load(), Grouped: c.grouped.Load(), Skipped: c.skipped.Load(),
		Tenures: c.tenures.Load(), IdleTenures: c.idleTenures.Load(), Scans: c.scans.Load(), Recovered: c.recovered.Load(), LeasesLost: c.leasesLost.Load(),
		Transactions: c.transactions.Load(), Reads: c.reads.Load(),
	}
}
