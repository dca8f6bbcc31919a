package history

import (
	"context"
	"slices"

	"cloud.google.com/go/spanner/apiv1/spannerpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// commitMethod is the gRPC method of Spanner's Commit.
const commitMethod = "/google.spanner.v1.Spanner/Commit"

// RenewalObserver returns a gRPC unary client interceptor that records, as
// Renew operations of client, the commits that renew a lease in the
// spanmutex table named table: those whose only mutation updates exactly
// Name and RenewedAt, which is what a lease renewal writes and nothing else
// does. Renewals run inside the library, so the wire is where they can be
// seen; the Renew's Token is attributed by Check.
//
// Install it innermost, after any fault injection (last in
// grpc.WithChainUnaryInterceptor), so that it sees Spanner's own answer
// even when a fault then drops it.
func (r *Recorder) RenewalObserver(client, table string) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		name, ok := renewedName(method, req, table)
		if !ok {
			return invoker(ctx, method, req, reply, cc, opts...)
		}
		c := r.Begin(Op{Client: client, Kind: Renew, Name: name})
		err := invoker(ctx, method, req, reply, cc, opts...)
		res := Result{Outcome: OK, Err: err}
		switch {
		case err == nil:
			if resp, ok := reply.(*spannerpb.CommitResponse); ok && resp.GetCommitTimestamp() != nil {
				res.Commit = resp.GetCommitTimestamp().AsTime()
			}
		case status.Code(err) == codes.Aborted || status.Code(err) == codes.FailedPrecondition ||
			status.Code(err) == codes.NotFound || status.Code(err) == codes.InvalidArgument:
			// Spanner refused the commit: nothing was written.
			res.Outcome = NoEffect
		default:
			// Lost in transit, or cancelled: it may have committed.
			res.Outcome = Unknown
		}
		c.End(res)
		return err
	}
}

// renewedName returns the lock name a Commit request renews, if it is a
// renewal of a lease in table.
func renewedName(method string, req any, table string) (string, bool) {
	if method != commitMethod {
		return "", false
	}
	cr, ok := req.(*spannerpb.CommitRequest)
	if !ok || len(cr.GetMutations()) != 1 {
		return "", false
	}
	w := cr.GetMutations()[0].GetUpdate()
	if w == nil || w.GetTable() != table || !slices.Equal(w.GetColumns(), []string{"Name", "RenewedAt"}) || len(w.GetValues()) != 1 {
		return "", false
	}
	vals := w.GetValues()[0].GetValues()
	if len(vals) != 2 {
		return "", false
	}
	return vals[0].GetStringValue(), true
}
