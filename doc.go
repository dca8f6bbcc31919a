// Package spanmutex provides distributed locks on Cloud Spanner: a run-once
// critical section, a reusable FIFO lock, leases that are renewed and whose
// loss is signalled, and fencing for the writes a holder makes.
//
// Every change of holder is one Spanner read-write transaction that reads the
// lock's row, decides, and writes; every time that decides ownership is
// Spanner's. The state lives in tables whose schema is in package ddl (or
// `spanmutex ddl`).
//
// # Primitives
//
//   - [Mutex] ([New]) runs a named critical section, such as a migration or
//     a one-off job, once across every process: [Mutex.Run] returns
//     Executed where it ran, AlreadyDone elsewhere, and retries a failed
//     section at most MaxAttempts times in all.
//   - [Lock] ([NewLock]) is a reusable lock held by one holder at a time,
//     granted first come, first served among live waiters: [Lock.Lock]
//     waits its turn, [Lock.TryLock] does not, and [Lock.Unlock] hands the
//     lock to the oldest live waiter.
//   - [Lease] is a holder's claim: its fencing token ([Lease.Token]), a
//     background renewal, and the signal that it ended ([Lease.Done],
//     [Lease.Err]): lost (for a Mutex, the section's ctx is cancelled
//     too), or released by its holder ([ErrReleased]).
//   - [Lease.Guard] makes a write in the caller's own Spanner transaction
//     commit only while the lease is held.
//   - [Fence] ([NewFence]) refuses, per resource, an operation whose token
//     is lower than one the resource already accepted.
//   - [Scope] ([NewScope], [WithScope]) is what the Locks of one process
//     share; [ListenScope] also receives wake-ups from other processes.
//     Sharing saves Spanner work and time, never decides ownership.
//   - [Election] ([NewElection]) elects one leader at a time on a Lock:
//     [Election.Campaign] blocks until this candidate leads and returns its
//     [Leadership] (token, a context that ends on loss, [Leadership.Resign]
//     that hands over at once); [Election.Leader] and [Election.Observe]
//     tell any instance who leads, every term in order.
//   - [Inspect] reads the rows of the mutex table, without locking.
//   - [Mutex.Reset] re-arms a section that failed or gave up; [WithVersion]
//     runs a section once per release; a section that returns [Interrupt]
//     gives its row back without using up an attempt.
//   - [Ping] checks once, at start-up, that Spanner and the database answer.
//
// Package queue builds a request queue on the Lock, package migrations runs
// golang-migrate from every replica under a Lock, and package emulator starts
// the Cloud Spanner emulator for tests.
//
// # Leases
//
// A holder declares its lease ([WithLease]) in the row
// when it becomes holder, and renews it every third of it. Nobody takes over
// before the row has gone that long unrenewed, by Spanner's clock, plus a
// random jitter: processes configured with different leases can make a
// takeover later, never earlier than the holder promised. While its process
// runs, a holder learns that its lease is lost no later than the earliest
// moment another could take over. A paused process learns it only when it
// resumes, which is why writes need fencing.
//
// # Fencing
//
// Tokens of a name strictly increase with every change of holder and are
// never reused while the row exists. spanmutex fences its own writes (renew,
// DONE, FAILED, Unlock) on the lease. Fence yours: with [Lease.Guard] inside
// the Spanner transaction that writes, or by passing [Lease.Token] to a
// resource guarded by a [Fence] (or one that checks tokens itself). No lock
// can stop a paused process from acting when it resumes; a fence where the
// write lands can refuse it.
//
// # Clocks
//
// Ownership is decided on Spanner's clock only: commit timestamps stored in
// the row, compared with CURRENT_TIMESTAMP() (or a strong read's timestamp)
// read in the deciding transaction. The local clock paces reads and renewals
// and measures one duration, the time since the last acknowledged renewal,
// to signal a lost lease in time; a local clock that is hours off changes no
// decision.
//
// # Guarantees
//
// CORRECTNESS_DISCLAIMER.md states what is guaranteed, under which
// assumptions, and which tests show it; doc/proofs.md gives the arguments,
// and doc/design.md the algorithms. In short: at most one holder change
// commits from a given row version; a section runs exactly once while its
// holder renews, and otherwise at least once, with the earlier holder told
// and fenceable; Lock waiters are served in order among live waiters; a
// Lock call that gives up leaves nothing that delays others.
//
// # Use
//
//	m, err := spanmutex.New(client, "migrations/0042", spanmutex.WithLease(15*time.Minute))
//	if err != nil { ... }          // bad input: wraps ErrInvalidConfig
//	out, err := m.Run(ctx, func(ctx context.Context, lease *spanmutex.Lease) error {
//		return migrate(ctx, lease.Token())
//	})
//
// Mutex, Lock, Fence and Scope are safe for concurrent use; a Lock value is
// one contender (use one per goroutine that competes).
//
// Bound every ctx (context.WithTimeout): a call waits as long as its ctx
// allows, and the Spanner client keeps retrying an endpoint that does not
// answer. A call whose ctx ends before it holds the section or lock returns
// an error matching [ErrNotObtained] and ctx.Err(), having left nothing
// behind; if no call to Spanner had succeeded and Spanner looks out of
// reach, that error also matches [ErrUnreachable] and names the host and the cause.
// The library sets no connection timeout of its own: call [Ping] with a
// deadline of a few seconds at start-up to fail fast.
package spanmutex
