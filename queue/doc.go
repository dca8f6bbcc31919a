// Package queue is a request queue on Cloud Spanner for work on named
// resources (creating and updating a customer's spreadsheet, say): a front
// end enqueues create and update requests, and many back-end workers claim
// them in FIFO order and run a handler under the resource's spanmutex lease.
//
// Requests move new → in-progress → complete or error. A claim is a committed
// lease, not an open transaction: a worker that crashes or pauses loses its
// lease on the resource after the lease (by Spanner's clock), and the
// next worker to take the resource claims its requests again; their writes
// are fenced on the lease's token.
//
// Enqueue commits its own transaction; EnqueueTx writes inside the caller's
// transaction, so that a request exists if and only if the caller's change
// committed: guaranteed delivery, no phantom requests, one transactional
// boundary. For applications that cannot be changed, a Capture turns the
// committed changes of a change stream into requests (see below).
//
// Requests are kept as a history once finished; ddl.RequestsRetention gives
// the row deletion policy that makes Spanner expire them after some days.
//
// # Workers
//
// A Worker (Queue.NewWorker) scans the pending requests in queue order
// (commit timestamp of the enqueue, then request id), takes each resource's
// lock with TryLock, skipping resources that another worker holds, and,
// holding it, claims and hands to its Handler first the resource's create,
// then its outstanding updates as one Job (the oldest 1,000 at a time).
// See Worker for the steps.
//
// What it guarantees:
//
//   - At most one handler runs on a resource at a time, as long as handlers
//     honour their context: it is cancelled when the lease is lost, and the
//     worker waits for the handler before it lets go of the resource.
//   - A resource's updates are handed to a handler only once its create has
//     completed; if the create ended in error, they end in error too ("create
//     failed: <reason>") without reaching a handler.
//   - Every request ends complete or error; none is lost or stuck: a claim
//     abandoned by a worker that died is claimed again by the next worker to
//     take the resource, after the lease, with a higher token, and the
//     dead worker's late outcome is rejected. A request claimed
//     WithMaxAttempts times without finishing ends in error.
//   - A request's outcome is recorded once, in a transaction fenced by the
//     lease (spanmutex.Lease.Guard). Its handler may run more than once (a
//     worker died, or lost its lease, after the work but before recording
//     it): make handlers idempotent, or fence their writes with Job.Token.
//
// What it does not: strict FIFO across resources (a resource held by another
// worker is skipped and handled later, and several workers hand out jobs in
// parallel); a timeout for a handler that never returns (its resource stays
// held while its lease is renewed); exactly-once handling.
//
// These guarantees, their arguments and the tests that show them are claims
// 17–19 of CORRECTNESS_DISCLAIMER.md in the spanmutex repository.
//
// Clocks: whether a claim is abandoned is decided by the lease, on Spanner's
// clock (commit timestamps). The local clock only paces polling and the
// shutdown grace.
//
// Cost: while idle, each worker makes one strong single-use read of the
// pending index per poll interval (WithPollInterval; by default 50ms, doubling
// to 2s while nothing is found), and wakes at once when its Queue's Enqueue or
// Notify is called in the same process. Uncontended, handling a resource
// costs its lock (a read and two read-write transactions), plus one read-write
// transaction per job and one to find nothing left: a create and its grouped
// updates take five read-write transactions in all.
//
// # Capture: requests from applications that cannot be changed
//
// A Capture reads a Spanner change stream over the tables of an application
// that cannot be changed, and turns each committed change into requests,
// exactly once: the role that triggers play in databases that have them.
// Create the stream with ddl.ChangeStream and the checkpoint table with
// ddl.CaptureStatements, then run q.NewCapture(client, stream, mapper).Run.
//
// The Mapper turns each changed row (a Change: table, INSERT/UPDATE/DELETE,
// keys, new and old values as the stream's JSON, commit timestamp and the
// record's identity) into zero or more requests. Every request gets an id
// derived from the change's identity (CaptureRequestID), and the requests of
// a batch of changes are written in the same read-write transaction as the
// partition's new checkpoint, after a read, in that transaction, of which of
// those ids already exist. So:
//
//   - nothing is lost: a change is checkpointed only with its requests, and
//     a restarted capture resumes every unfinished partition from its
//     checkpoint;
//   - nothing is duplicated: a change read again (the checkpoint is
//     inclusive, a crash may come between a commit and its
//     acknowledgement, another instance may take a partition over) maps to
//     the same ids, which are found and skipped;
//   - nothing is invented: a change stream holds committed changes only, so
//     a rolled-back application transaction produces nothing.
//
// The Mapper must therefore be deterministic: the same Change must give the
// same requests. A change that maps to a create of a resource that already
// has one, or to an update of a resource that has none (an UPDATE of a row
// inserted before the stream's start, an INSERT after a DELETE), is not
// refused: by default its kind is adapted (ConflictAdapt), or it is written
// as a request in status error that says why (ConflictRecordError). It never
// blocks the stream and is never dropped silently. A Mapper error, or a
// malformed request, stops Run with a *MapperError, the checkpoint before
// the change: fix the Mapper and run again.
//
// Partitions: the capture follows the stream's partitions as Spanner splits
// and merges them, reading each partition in commit order and starting a
// child only when all its parents are finished, so that the changes of one
// key reach the queue in commit order (request ids begin with the commit
// timestamp, so requests enqueued in one transaction keep that order too).
// The emulator does not keep that promise across its partition churn: it
// may put a key's next change in a partition that is not a child of the one
// that held the previous change. Exactly-once holds regardless.
//
// Ownership: each partition is read by one capture instance at a time,
// under a lease renewed by every checkpoint (a Spanner commit timestamp;
// its expiry is judged with CURRENT_TIMESTAMP() read in the claiming
// transaction). Every checkpoint transaction checks the owner, so an
// instance that paused past its lease writes nothing more, and a successor
// resumes from the last checkpoint. Several instances may run on one
// stream: without WithMaxPartitions the first takes every free partition
// and the others stand by; with it, they share the partitions.
//
// Latency: each partition is read in windows (WithQueryWindow: a query with
// an end_timestamp), so a change is captured within about one window of
// its commit, even where query results arrive only when a query ends (as
// they do from the emulator). Limits: only GoogleSQL databases and streams
// with the default partition mode; a capture stopped for longer than the
// stream's retention period (one day by default) cannot resume, and Run
// says so.
package queue
