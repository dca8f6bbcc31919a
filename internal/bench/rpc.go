package bench

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/spanner/apiv1/spannerpb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
)

// rpcCounter counts the gRPC calls that a run's Spanner clients start, by
// method: every unary call and every stream, whether it succeeds or not.
// It also notes, for every successful Commit, how far the commit timestamp
// (Spanner's clock) is ahead of the local clock when the call returns: the
// error of comparing the two clocks, as the hand-off latency does. Its
// methods are safe for concurrent use.
type rpcCounter struct {
	// latency, if set, delays each call of a method it names by that
	// much before it is sent: a model of production's round trips
	// (ParseLatency). It is set before the client is opened.
	latency  map[string]time.Duration
	mu       sync.Mutex
	byMethod map[string]int64 // short method name ("Commit") → calls started
	leads    []time.Duration  // commit timestamp − local time at the Commit's return
}

func newRPCCounter() *rpcCounter { return &rpcCounter{byMethod: map[string]int64{}} }

// clientOptions returns the options that install the counting interceptors
// on a Spanner client.
func (c *rpcCounter) clientOptions() []option.ClientOption {
	var opts []option.ClientOption
	for _, o := range c.dialOptions() {
		opts = append(opts, option.WithGRPCDialOption(o))
	}
	return opts
}

// dialOptions returns the counting interceptors as gRPC dial options, for
// any gRPC client.
func (c *rpcCounter) dialOptions() []grpc.DialOption {
	unary := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		c.count(method)
		if err := c.delay(ctx, method); err != nil {
			return err
		}
		err := invoker(ctx, method, req, reply, cc, opts...)
		if resp, ok := reply.(*spannerpb.CommitResponse); ok && err == nil && resp.GetCommitTimestamp() != nil {
			c.lead(resp.GetCommitTimestamp().AsTime().Sub(time.Now()))
		}
		return err
	}
	stream := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		c.count(method)
		if err := c.delay(ctx, method); err != nil {
			return nil, err
		}
		return streamer(ctx, desc, cc, method, opts...)
	}
	return []grpc.DialOption{grpc.WithChainUnaryInterceptor(unary), grpc.WithChainStreamInterceptor(stream)}
}

// count records one call of method, a full gRPC method name such as
// "/google.spanner.v1.Spanner/Commit".
func (c *rpcCounter) count(method string) {
	short := method[strings.LastIndex(method, "/")+1:]
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byMethod[short]++
}

// delay waits the modelled latency of method, or until ctx ends.
func (c *rpcCounter) delay(ctx context.Context, method string) error {
	d := c.latency[method[strings.LastIndex(method, "/")+1:]]
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// lead records how far a commit timestamp was ahead of the local clock.
func (c *rpcCounter) lead(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.leads = append(c.leads, d)
}

// commitLeads returns what lead recorded so far.
func (c *rpcCounter) commitLeads() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.leads)
}

// snapshot returns the counts so far.
func (c *rpcCounter) snapshot() rpcCounts {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.byMethod)
}

// rpcCounts are calls started, by method.
type rpcCounts map[string]int64

// total returns the calls of every method.
func (r rpcCounts) total() int64 {
	var n int64
	for _, v := range r {
		n += v
	}
	return n
}

// since returns the calls made after earlier, a snapshot of the same
// counter; methods with none are left out.
func (r rpcCounts) since(earlier rpcCounts) rpcCounts {
	out := rpcCounts{}
	for m, v := range r {
		if d := v - earlier[m]; d > 0 {
			out[m] = d
		}
	}
	return out
}
