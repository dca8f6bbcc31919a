// Package spanerr classifies the errors of Spanner calls, once for every
// package of spanmutex: which are worth another try, and which leave a
// commit's outcome unknown (settled by reading again, never guessed).
package spanerr

import (
	"context"
	"errors"
	"strings"

	"cloud.google.com/go/spanner"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Retryable reports whether a failed Spanner call is worth another try: a
// transient failure, or one whose outcome is unknown (which the caller
// settles by reading before it relies on anything).
func Retryable(err error) bool { return Transient(err) || UnknownOutcome(err) }

// TransactionLost reports whether err says that the transaction a call
// used was gone: rolled back or aborted by Spanner behind the client's
// back. The client retries only Aborted; Spanner (the emulator above all,
// which runs one read-write transaction at a time and ends the others)
// also answers NotFound "Transaction not found" and FailedPrecondition
// "... after it has been committed or rolledback" or "Invalid transaction
// ID". The transaction's commit may or may not have landed (an earlier
// try's answer may have been lost), so it counts as unknown outcome too.
func TransactionLost(err error) bool {
	switch spanner.ErrCode(err) {
	case codes.NotFound:
		return strings.Contains(err.Error(), "Transaction not found")
	case codes.FailedPrecondition:
		msg := err.Error()
		return strings.Contains(msg, "has been committed or rolledback") ||
			strings.Contains(msg, "has been committed or rolled back") ||
			strings.Contains(msg, "Invalid transaction ID")
	}
	return false
}

// Transient reports whether err is worth another try after a backoff: the
// Spanner service was briefly unavailable, overloaded, or a transaction lost a
// race the client did not retry itself. The caller's ctx decides whether to go on.
func Transient(err error) bool {
	switch spanner.ErrCode(err) {
	case codes.Aborted, codes.Unavailable, codes.ResourceExhausted, codes.DeadlineExceeded:
		return true
	case codes.AlreadyExists:
		// Our Insert met a row that a concurrent acquisition created after
		// our read: we lost that race; the next read shows the winner.
		return true
	}
	return TransactionLost(err)
}

// Permanent reports whether err is one no retry mends: the database,
// table or column is missing, the request is malformed, or the caller may
// not make it. A transaction Spanner ended (TransactionLost, NotFound too)
// is not permanent.
func Permanent(err error) bool {
	switch spanner.ErrCode(err) {
	case codes.NotFound:
		return !TransactionLost(err)
	case codes.InvalidArgument, codes.PermissionDenied, codes.Unauthenticated:
		return true
	}
	return false
}

// UnknownOutcome reports whether a failed read-write transaction may
// nevertheless have committed: the call ended (deadline, cancellation, a
// dropped connection) without Spanner's answer to Commit. Such an outcome is
// settled by reading the row again, never guessed.
func UnknownOutcome(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || TransactionLost(err) {
		return true
	}
	if _, ok := status.FromError(err); !ok {
		// Not an RPC error (spanner.ErrCode calls those Unknown too): it
		// came from our own code before any commit was sent.
		return false
	}
	switch spanner.ErrCode(err) {
	case codes.DeadlineExceeded, codes.Canceled, codes.Unavailable, codes.Unknown, codes.Internal:
		return true
	}
	return false
}
