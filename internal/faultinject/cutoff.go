package faultinject

import (
	"context"
	"sync/atomic"

	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Cutoff cuts a Spanner client off from Spanner and can heal it again, as
// if its process froze or lost its network: while cut, every call fails
// with UNAVAILABLE before it is sent, so a holder can neither renew its
// lease nor finish, yet it can come back later, which is what fencing is
// for. The zero value is a healed Cutoff; its methods are safe for
// concurrent use.
type Cutoff struct {
	// Reason is put in the calls' error (default: a simulated crash).
	Reason string

	cut atomic.Bool
}

// Store cuts the client off (true) or heals it (false).
func (c *Cutoff) Store(cut bool) { c.cut.Store(cut) }

// Load reports whether the client is cut off.
func (c *Cutoff) Load() bool { return c.cut.Load() }

// ClientOptions installs the Cutoff in a Spanner client.
func (c *Cutoff) ClientOptions() []option.ClientOption {
	return []option.ClientOption{
		option.WithGRPCDialOption(grpc.WithChainUnaryInterceptor(c.unary)),
		option.WithGRPCDialOption(grpc.WithChainStreamInterceptor(c.stream)),
	}
}

func (c *Cutoff) err() error {
	reason := c.Reason
	if reason == "" {
		reason = "this client is cut off from Spanner (simulated crash)"
	}
	return status.Error(codes.Unavailable, reason)
}

func (c *Cutoff) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if c.cut.Load() {
		return c.err()
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

func (c *Cutoff) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	if c.cut.Load() {
		return nil, c.err()
	}
	return streamer(ctx, desc, cc, method, opts...)
}
