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
package queue
