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
// the watermark (plus a random jitter per contender) is taken over.
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
// Ownership decisions use Spanner's clock only: the watermark and staleness
// are compared against commit timestamps stored in the row, using
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
// A Mutex is safe for concurrent use. Package emulator starts the Cloud Spanner
// emulator for tests; cmd/spanmutex is a CLI that wraps any command.
package spanmutex
