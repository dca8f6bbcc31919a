// Package cutoff cuts a Spanner client off from Spanner and heals it again,
// as if its process froze or lost its network. The demo uses it to show a
// takeover and fencing; the tests use it to silence a holder. Unlike
// internal/faultinject it injects no random faults, so the operator binary
// may link it.
package cutoff

import (
	"context"
	"sync/atomic"

	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Switch cuts a Spanner client off from Spanner and can heal it again, as
// if its process froze or lost its network: while cut, every call fails
// with UNAVAILABLE before it is sent, so a holder can neither renew its
// lease nor finish, yet it can come back later, which is what fencing is
// for. The zero value is a healed Switch; its methods are safe for
// concurrent use.
type Switch struct {
	// Reason is put in the calls' error (default: a simulated crash).
	Reason string

	cut atomic.Bool
}

// Store cuts the client off (true) or heals it (false).
func (c *Switch) Store(cut bool) { c.cut.Store(cut) }

// Load reports whether the client is cut off.
func (c *Switch) Load() bool { return c.cut.Load() }

// ClientOptions installs the Switch in a Spanner client.
func (c *Switch) ClientOptions() []option.ClientOption {
	return []option.ClientOption{
		option.WithGRPCDialOption(grpc.WithChainUnaryInterceptor(c.unary)),
		option.WithGRPCDialOption(grpc.WithChainStreamInterceptor(c.stream)),
	}
}

func (c *Switch) err() error {
	reason := c.Reason
	if reason == "" {
		reason = "this client is cut off from Spanner (simulated crash)"
	}
	return status.Error(codes.Unavailable, reason)
}

func (c *Switch) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if c.cut.Load() {
		return c.err()
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

func (c *Switch) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	if c.cut.Load() {
		return nil, c.err()
	}
	return streamer(ctx, desc, cc, method, opts...)
}
