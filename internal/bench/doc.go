// Package bench measures what a lock on Cloud Spanner costs under
// contention: spanmutex's Lock, and the naive lock most libraries implement
// (a read-write transaction that takes the row if it is free, and a
// randomised exponential backoff while it is held).
//
// For each number of contenders N and each lock, Run starts N goroutines,
// spread over a few Spanner clients, that each acquire one lock and release
// it at once, again and again, for a fixed duration (the window). Then no
// new Lock call starts; Lock calls still waiting get a short drain period to
// complete, and are cancelled after it. Each (lock, N) pair uses a lock name
// of its own and fresh clients, so runs do not disturb each other.
//
// What is measured, per run:
//
//   - Acquisitions: Lock calls that returned holding the lock, before the
//     drain ended. Acquisitions per second counts only those that completed
//     within the window, divided by the window.
//   - Costs per acquisition: the RPCs the run's clients started, from the
//     start of the window until every contender stopped (the drain and
//     clean-up of cancelled waiters included), divided by the acquisitions.
//     gRPC interceptors on the run's clients count every unary and streaming
//     RPC by method, background session-pool RPCs included; both locks are
//     measured the same way. Commits are Commit RPCs: one per read-write
//     transaction attempt that got as far as committing, aborted at commit
//     included (spanmutex's joins, renewals and leaves of the queue are
//     read-write transactions too). An attempt that gives up before its
//     commit, as the naive lock's does when it finds the lock held, sends a
//     Rollback instead, so its cost shows in reads and RPCs, not in commits.
//     Reads are StreamingRead, Read and ExecuteStreamingSql RPCs: snapshot
//     reads and the reads inside read-write transactions alike (ExecuteSql,
//     which Go's client uses for DML, is left out).
//   - Wait: from calling Lock to Lock returning with the lock (local clock).
//   - FIFO violations: an acquisition is a violation when, at the moment
//     its Lock call returns, another contender that started its own Lock
//     call at least FIFOTolerance earlier is still waiting (its call has
//     neither returned nor been cancelled). Waiting contenders' start times
//     are tracked under a mutex, so the check sees one consistent moment.
//   - Hand-off latency: from the previous holder calling its release to
//     the next holder's Lock returning, both on the local clock of the one
//     process that runs the contenders (Spanner's commit timestamps run
//     ahead of it on the emulator, so they are not used). It includes the
//     release's own transaction: an upper bound on the time from the
//     release's commit to the next holder knowing it holds the lock. For
//     spanmutex, a sample is taken when the lease was handed over in the
//     previous holder's Unlock (Lease.HandedOff); a lock taken free gives no
//     sample. For the naive lock, every acquisition after a release gives a
//     sample, paired with the release of the previous token.
//
// Figures from the Cloud Spanner emulator, which runs one read-write
// transaction at a time and aborts the others, show more aborts (and so more
// commits and RPCs) than production Spanner would; compare the two locks
// measured in the same run rather than the absolute figures. The emulator
// has a second quirk: each commit pushes its commit timestamps a few
// microseconds further ahead of the real clock, for the life of the process,
// and a strong read waits until the real clock catches up. After some
// thousands of commits every strong read takes tens of milliseconds, which
// slows spanmutex's waiters (they poll with strong reads) far more than the
// naive lock (it reads inside read-write transactions). Config.PerRun gives
// each run a fresh emulator; Result.CommitLeadP50 shows the drift.
package bench
