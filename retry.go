package spanmutex

import (
	"context"
	"errors"

	"cloud.google.com/go/spanner"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// isTransient reports whether err is worth another try after a backoff: the
// Spanner service was briefly unavailable, overloaded, or a transaction lost a
// race the client did not retry itself. Run's ctx decides whether to go on.
func isTransient(err error) bool {
	switch spanner.ErrCode(err) {
	case codes.Aborted, codes.Unavailable, codes.ResourceExhausted, codes.DeadlineExceeded:
		return true
	case codes.AlreadyExists:
		// Our Insert met a row that a concurrent acquisition created after
		// our read: we lost that race; the next read shows the winner.
		return true
	}
	return false
}

// isUnknownOutcome reports whether a failed read-write transaction may
// nevertheless have committed: the call ended (deadline, cancellation, a
// dropped connection) without Spanner's answer to Commit. Such an outcome is
// settled by reading the row again, never guessed.
func isUnknownOutcome(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
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
