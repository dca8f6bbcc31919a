package lockbench

import (
	"context"
	"maps"
	"strings"
	"sync"

	"cloud.google.com/go/spanner/apiv1/spannerpb"
	"google.golang.org/grpc"
)

// msgCounter counts, from the wire, what a client of the idle benchmark
// sends, by short method name: calls started (every unary call and every
// stream opened) and messages sent (a unary call's request, and every
// message a stream's client sends: etcd's LeaseKeepAlive and Watch are
// bidirectional streams, each keepalive one message on one long-lived
// stream). A Spanner Commit is counted under its transaction's tag, as
// "Commit (spanmutex.session)", so that a session's renewals and a lock's
// own (spanmutex.renew) are told apart on the wire. Its methods are safe
// for concurrent use.
type msgCounter struct {
	mu    sync.Mutex
	calls map[string]int64
	sent  map[string]int64
}

// newMsgCounter returns a counter with nothing counted.
func newMsgCounter() *msgCounter {
	return &msgCounter{calls: map[string]int64{}, sent: map[string]int64{}}
}

// dialOptions returns the interceptors that count, as gRPC dial options.
func (c *msgCounter) dialOptions() []grpc.DialOption {
	unary := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		c.add(method, commitTag(req), 1, 1)
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	stream := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		c.add(method, "", 1, 0)
		cs, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil {
			return nil, err
		}
		return &sendCounting{ClientStream: cs, c: c, method: method}, nil
	}
	return []grpc.DialOption{grpc.WithChainUnaryInterceptor(unary), grpc.WithChainStreamInterceptor(stream)}
}

// commitTag returns the transaction tag of req if it is a Spanner Commit,
// "" otherwise.
func commitTag(req any) string {
	if c, ok := req.(*spannerpb.CommitRequest); ok {
		return c.GetRequestOptions().GetTransactionTag()
	}
	return ""
}

// add counts calls started and messages sent of method, a full gRPC
// method name such as "/etcdserverpb.Lease/LeaseKeepAlive", under its
// short name followed by tag in parentheses, if any.
func (c *msgCounter) add(method, tag string, calls, sent int64) {
	short := method[strings.LastIndex(method, "/")+1:]
	if tag != "" {
		short += " (" + tag + ")"
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[short] += calls
	c.sent[short] += sent
}

// snapshot returns the counts so far.
func (c *msgCounter) snapshot() (calls, sent map[string]int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.calls), maps.Clone(c.sent)
}

// sendCounting is a client stream that counts every message sent on it.
type sendCounting struct {
	grpc.ClientStream
	c      *msgCounter
	method string
}

// SendMsg counts m as one message sent and sends it.
func (s *sendCounting) SendMsg(m any) error {
	s.c.add(s.method, "", 0, 1)
	return s.ClientStream.SendMsg(m)
}
