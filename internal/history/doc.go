// Package history records what concurrent clients of spanmutex do and
// checks the record: that no two holders ever acted on one lock at once, as
// far as Spanner committed it.
//
// # Recording
//
// A Recorder takes operations of many clients: acquisitions and takeovers
// with their tokens and commit timestamps, renewals (seen on the wire by
// RenewalObserver), releases, run-once completions, guarded writes, and the
// start and end of each holder's section. Each operation has an invocation
// and a response time on the local monotonic clock, which orders
// operations within one process, and, where Spanner gave one, a commit
// timestamp, which orders what Spanner committed. The two clocks are never
// compared with each other.
//
// # What is checked, and what is not
//
// A holder that lost its lease (it paused past the lease and was taken
// over) still believes it holds the lock: the library cancels its context
// but cannot stop it. So "at most one holder at a time" is checked on what
// Spanner committed, never on local beliefs; overlapping beliefs are only
// counted. Check runs:
//
//   - a linearizability check with porcupine, per name, against a model of
//     the row and the guarded resources (lockState): tokens strictly
//     increase; a run-once section is acquired only while not DONE and
//     recorded DONE at most once; a renewal, release, completion or
//     committed guarded write happens only while its token holds the row,
//     and a guarded write never carries a token below one already written
//     to its resource. Operations of unknown outcome may or may not have
//     taken effect, at any time after their call;
//   - direct checks on Spanner's commit timestamps alone: tokens increase
//     in commit order; every guarded write and renewal of a holder
//     committed between its acquisition and the next one; the tokens of a
//     resource's writes never decrease in commit order; a takeover came
//     the lease the previous holder declared (Op.Lease) after its last
//     sign of life, whatever the taker's own lease;
//   - the history against the table read back after the run: what clients
//     were told committed is there, what they were told was refused is not,
//     and no lock is left held by a token no Lock call returned;
//   - Lock calls that returned no lease returned an error of Lock's
//     contract (ErrNotObtained, *OutageError, *HeldError from TryLock);
//   - liveness: the longest stall of each lock, a stretch of the local
//     clock during which it was free while a Lock call waited, reported,
//     and a violation only past StallBound (liveness.go);
//   - lease limbo: a lease that a call was handed and its client renewed,
//     but that no call returned, is listed, and is a violation if it
//     lapsed (taken over, or handed on only past its lease) while the call
//     still waited and no recorded pause of its client explains it
//     (limbo.go).
//
// Renewals are seen on the wire without a token. Each is attributed to the
// lease that held the row when it committed, a lease of its own client
// since renewals are fenced: the client's latest acquisition, or a token
// that no call returned in a gap between two acquisitions; a renewal that
// fits neither keeps its client's latest acquisition, so that the checks
// report it (attribute.go).
//
// A violation comes with the offending sub-history and, for the
// linearizability check, porcupine's HTML visualization in a temporary
// file.
package history
