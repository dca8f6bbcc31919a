// Package queue is a request queue on Cloud Spanner for work on named
// resources (creating and updating a customer's spreadsheet, say): a front
// end enqueues create and update requests, and many back-end workers claim
// them in FIFO order and run a handler under the resource's spanmutex lease.
//
// Requests move new → in-progress → complete or error. A claim is a committed
// lease, not an open transaction: a worker that crashes or pauses loses its
// lease on the resource after the watermark (by Spanner's clock), and the
// next worker to take the resource claims its requests again; their writes
// are fenced on the lease's token.
//
// Capture: Enqueue commits its own transaction; EnqueueTx writes inside the
// caller's transaction, so that a request exists if and only if the caller's
// change committed.
//
// # Workers
//
// A Worker (Queue.NewWorker) scans the pending requests in queue order
// (commit timestamp of the enqueue, then request id), takes each resource's
// lock with TryLock, skipping resources that another worker holds, and,
// holding it, claims and hands to its Handler first the resource's create,
// then all of its outstanding updates as one Job. See Worker for the steps.
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
//     take the resource, after the watermark, with a higher token, and the
//     dead worker's late outcome is rejected. A request claimed
//     WithMaxAttempts times without finishing ends in error.
//   - A request's outcome is recorded once, in a transaction fenced by the
//     lease (spanmutex.Lease.Guard). Its handler may run more than once (a
//     worker died, or lost its lease, after the work but before recording
//     it): make handlers idempotent, or fence their writes with Job.Token.
//
// What it does not: strict FIFO across resources. A resource held by another
// worker is skipped and handled later, and several workers hand out jobs in
// parallel.
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
package queue
