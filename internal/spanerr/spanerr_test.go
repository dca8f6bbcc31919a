package spanerr

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"cloud.google.com/go/spanner"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		name                        string
		err                         error
		transient, unknown, lostTxn bool
	}{
		{"aborted", status.Error(codes.Aborted, "conflict"), true, false, false},
		{"unavailable", status.Error(codes.Unavailable, "down"), true, true, false},
		{"exhausted", status.Error(codes.ResourceExhausted, "busy"), true, false, false},
		{"rpc deadline", status.Error(codes.DeadlineExceeded, "late"), true, true, false},
		{"lost insert race", status.Error(codes.AlreadyExists, "row exists"), true, false, false},
		{"transaction not found", status.Error(codes.NotFound, "Transaction not found: 7"), true, true, true},
		{"rolled back", status.Error(codes.FailedPrecondition, "Cannot commit a transaction after it has been committed or rolledback"), true, true, true},
		{"internal", status.Error(codes.Internal, "oops"), false, true, false},
		{"ctx deadline", fmt.Errorf("commit: %w", context.DeadlineExceeded), false, true, false},
		{"ctx canceled", context.Canceled, false, true, false},
		{"table missing", status.Error(codes.NotFound, "Table not found: Locks"), false, false, false},
		{"bad argument", status.Error(codes.InvalidArgument, "bad"), false, false, false},
		{"our own error", errors.New("decode: bad state"), false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Transient(tc.err); got != tc.transient {
				t.Errorf("Transient = %v, want %v", got, tc.transient)
			}
			if got := UnknownOutcome(tc.err); got != tc.unknown {
				t.Errorf("UnknownOutcome = %v, want %v", got, tc.unknown)
			}
			if got := TransactionLost(tc.err); got != tc.lostTxn {
				t.Errorf("TransactionLost = %v, want %v", got, tc.lostTxn)
			}
			if got, want := Retryable(tc.err), tc.transient || tc.unknown; got != want {
				t.Errorf("Retryable = %v, want %v", got, want)
			}
		})
	}
}

// Permanent: what no retry mends, but never a transaction Spanner ended.
func TestPermanent(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{spanner.ToSpannerError(status.Error(codes.NotFound, "Table not found: Requests")), true},
		{spanner.ToSpannerError(status.Error(codes.NotFound, "Transaction not found: 7")), false},
		{spanner.ToSpannerError(status.Error(codes.PermissionDenied, "no")), true},
		{spanner.ToSpannerError(status.Error(codes.Unavailable, "reset")), false},
	} {
		if got := Permanent(c.err); got != c.want {
			t.Errorf("Permanent(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
