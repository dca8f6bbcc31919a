package queue

import (
	"context"
	"fmt"
	"testing"

	"cloud.google.com/go/spanner"
	"github.com/stretchr/testify/assert"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The capture retries what Spanner may answer to a step that changed
// nothing for good, and gives up on what no retry mends. A transaction that
// Spanner ended behind the client's back (the emulator does it often on one
// multiplexed session, the newest clients' only kind) is retried: the step
// reads its checkpoint again.
func TestCaptureRetryable(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		err  error
		want bool
	}{
		{spanner.ToSpannerError(status.Error(codes.NotFound, "Transaction not found: 1022")), true},
		{spanner.ToSpannerError(status.Error(codes.FailedPrecondition, "Invalid transaction ID. Transaction ID must be >= 256")), true},
		{fmt.Errorf("queue: look up ids: %w", spanner.ToSpannerError(status.Error(codes.NotFound, "Transaction not found: 7"))), true},
		{spanner.ToSpannerError(status.Error(codes.Unavailable, "connection reset")), true},
		{spanner.ToSpannerError(status.Error(codes.NotFound, "Table not found: Requests")), false},
		{spanner.ToSpannerError(status.Error(codes.FailedPrecondition, "Cannot specify a null value for column: Id")), false},
		{fmt.Errorf("bad record: %w", ErrMapper), false},
	} {
		assert.Equal(t, c.want, captureRetryable(ctx, c.err), "%v", c.err)
	}
}
