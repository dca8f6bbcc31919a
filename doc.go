// Package spanmutex lets many instances of a service agree, through Cloud
// Spanner, on who runs a critical section, so that it runs exactly once (or,
// failing that, is known to have possibly run twice) even when processes
// crash, pause, retry and race.
//
// # The run-once mutex
//
// A Mutex names a critical section, such as a schema migration or a one-off
// job. Its state lives in one row of a Spanner table (see package ddl for the
// schema, or run `spanmutex ddl`), which moves through
//
//	NEEDED (or no row) → STARTED → DONE
//	                             ↘ FAILED → STARTED (retry, while attempts remain)
//
// Every replica calls Run with the same name. One acquires the row and runs
// the section; the others wait with lock-free reads and return AlreadyDone
// when it is DONE. A failed section is retried by whoever calls or waits next,
// at most MaxAttempts starts in all. A holder that goes silent for longer than
// its lease (plus a random jitter per contender) is taken over.
//
// # Leases
//
// Each holder declares its lease, its watermark (WithWatermark), in the row
// when it acquires, and renews it every third of it. Contenders take over
// only once the row has gone that long unrenewed by Spanner's clock, whatever
// their own watermark: replicas configured differently can make a takeover
// later, never earlier than the holder promised. A lost lease closes
// Lease.Done and, for a Mutex, cancels the section's ctx.
//
// # The reusable lock
//
// A Lock (NewLock) is held by one holder at a time, again and again: Lock
// waits in a FIFO queue, Unlock hands the lock to the oldest live waiter in
// the same transaction. Locks made with the same Scope (WithScope) share
// what one process's contenders can share in memory; Locks of different
// Scopes behave exactly as separate processes. Lease.Guard fences writes in
// your own Spanner transactions; Fence fences writes to other resources by
// token.
//
// # Guarantees
//
//   - Mutual exclusion of acquisition: every acquisition and takeover is one
//     serializable read-write transaction that re-reads the row and decides
//     there, so two contenders can never both commit STARTED from the same
//     row version. The section runs only after that commit was acknowledged
//     (or, when the answer was lost, read back by its random lease id).
//   - Fencing: each acquisition gets a token one above the row's last token,
//     so tokens of one name strictly increase and are never reused. DONE and
//     FAILED are written only if the row still carries our lease and token;
//     otherwise Run returns a *LeaseLostError.
//   - Exactly once, within the watermark: the section runs exactly once if it
//     finishes (and records DONE) within the watermark. If it runs longer, or
//     its process pauses longer, it may be taken over and run again; the old
//     holder then learns it with ErrLeaseLost, and writes fenced with the
//     token can reject it. No lock can prevent a paused process from acting
//     when it resumes: fence your writes with Lease.Token.
//
// CORRECTNESS_DISCLAIMER.md states these precisely, with the test behind each.
//
// # Releases, resets and interruptions
//
// WithVersion runs a section once per version (a release): a row DONE at
// another version is a new generation. Mutex.Reset re-arms a FAILED or
// exhausted section, refusing a live holder. A section that returns
// Interrupt (stopped from outside, as by a pod eviction) gives the row back
// without using up an attempt. Schema migrations with golang-migrate are
// package github.com/spanmutex/spanmutex/migrations, a module of its own.
//
// # Clocks
//
// Ownership decisions use Spanner's clock only: the holder's declared lease
// and staleness are compared against commit timestamps stored in the row, using
// CURRENT_TIMESTAMP() read in the same read-write transaction that writes the
// decision. The local clock only paces the waits between reads; a local clock
// that is hours off changes no decision.
//
// # Use
//
//	m, err := spanmutex.New(client, "migrations/0042", spanmutex.WithWatermark(15*time.Minute))
//	if err != nil { ... }          // bad input: wraps ErrInvalidConfig
//	out, err := m.Run(ctx, func(ctx context.Context, lease *spanmutex.Lease) error {
//		return migrate(ctx, lease.Token())
//	})
//
// A Mutex is safe for concurrent use.
//
// # Deadlines and failing fast
//
// Bound every ctx you pass (context.WithTimeout): a call waits as long as
// its ctx allows, and the Spanner client keeps retrying an endpoint that
// does not answer, so Run or Lock with context.Background() against an
// unreachable Spanner never returns. At start-up, call Ping with a deadline
// of a few seconds: it fails with a *NotFoundError when the database or its
// instance does not exist (saying which), or an *UnreachableError naming the
// host and the cause (connection refused, DNS, TLS, credentials). A call
// that ends before any call to Spanner succeeded returns the same
// *UnreachableError, which still matches ErrNotObtained and ctx.Err(). The
// library sets no connection timeout of its own: how long to wait for a
// cold start is the application's choice. Package emulator starts the Cloud Spanner emulator
// for tests; cmd/spanmutex is a CLI that wraps any command.
package spanmutex
