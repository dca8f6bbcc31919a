// Package sheets is the spreadsheet service of the spanmutex request-queue
// example: the workflow of "Implementing a Distributed Lock State Machine"
// (a front end records create and update requests for users' spreadsheets;
// back-end workers create and update them), ported from Postgres row locks
// to Cloud Spanner with package queue.
//
// It has three parts, one per file:
//
//   - Store (store.go) stands in for the spreadsheet API. It keeps sheets in
//     memory and records every write with the fencing token it came with, and
//     detects what the queue must never let happen (violation.go): two
//     creates of one sheet, an update before the sheet's create, two writers
//     on one sheet at once, and a write with a token lower than one the sheet
//     has already seen. Each write takes a small artificial time, so that
//     overlapping writers are observable.
//   - Server (frontend.go) is the HTTP front end: it turns POST /sheets and
//     POST /sheets/{id}/updates into queue requests and answers
//     GET /sheets/{id} with the requests' statuses and the stored sheet.
//     Requests that arrive together are enqueued together, in one
//     transaction (batch.go). Client (client.go) calls it.
//   - Backend (backend.go) is the queue workers' handler: a create job
//     creates the sheet; an update job applies every click the worker
//     grouped into it in one write. Writes are keyed by request id, since a
//     job may be done again by the next holder of a sheet when a worker
//     loses its lease after writing and before recording it: the queue runs
//     a request at least once, fenced, never twice at a time.
//
// The store's detector is independent of the queue: it is how the example
// (and "spanmutex demo spreadsheets") checks the queue's guarantees from the
// outside, the way a real spreadsheet would suffer from their violation.
package sheets
