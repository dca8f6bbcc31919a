package main

import (
	"context"
	"sync/atomic"

	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// partition cuts one simulated instance off from Spanner and can heal it
// again. While cut, every call of its client fails as it would for a process
// that froze or lost its network: the holder can neither renew its lease nor
// finish, exactly like a crashed one, yet it can wake up later, which is what
// fencing is for. Its methods are safe for concurrent use.
type partition struct {
	cut atomic.Bool
}

// errPartitioned is what a cut-off client's calls fail with.
var errPartitioned = status.Error(codes.Unavailable, "spanmutex demo: this instance is cut off from Spanner (simulated crash)")

// clientOption installs the partition in a Spanner client.
func (p *partition) clientOption() []option.ClientOption {
	return []option.ClientOption{
		option.WithGRPCDialOption(grpc.WithChainUnaryInterceptor(p.unary)),
		option.WithGRPCDialOption(grpc.WithChainStreamInterceptor(p.stream)),
	}
}

// unary fails unary calls while the partition is cut.
func (p *partition) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if p.cut.Load() {
		return errPartitioned
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// stream fails streaming calls (queries, reads) while the partition is cut.
func (p *partition) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	if p.cut.Load() {
		return nil, errPartitioned
	}
	return streamer(ctx, desc, cc, method, opts...)
}
