package bench

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/spanner/apiv1/spannerpb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/spanmutex/spanmutex/internal/pace"
)

// rpcCounter counts the gRPC calls that a run's Spanner clients start, by
// method: every unary call and every stream, whether it succeeds or not.
// It also notes, for every successful Commit, how far the commit timestamp
// (Spanner's clock) is ahead of the local clock when the call returns: the
// error of comparing the two clocks, as the hand-off latency does. Its
// methods are safe for concurrent use.
type rpcCounter struct {
	// latency, if set, makes each call of a method it names take at least
	// that long: the interceptor holds the answer back until then (pad),
	// a model of production's round trips (ParseLatency) that does not
	// count the emulator's own time on top of production's. It is set
	// before the client is opened.
	latency  map[string]time.Duration
	mu       sync.Mutex
	byMethod map[string]int64 // short method name ("Commit") → calls started
	// byOp counts the calls by the operation their request's tag names
	// (the transaction tag, else the request tag; "untagged" without),
	// and aborted those of them that Spanner answered ABORTED.
	byOp, aborted map[string]int64
	// attempts attributes calls to read-write transaction attempts, to
	// count those of aborted attempts apart.
	attempts attempts
	leads    []time.Duration // commit timestamp − local time at the Commit's return
}

func newRPCCounter() *rpcCounter {
	return &rpcCounter{byMethod: map[string]int64{}, byOp: map[string]int64{}, aborted: map[string]int64{}, attempts: newAttempts()}
}

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
		op := c.countOp(method, req)
		start := time.Now()
		err := invoker(ctx, method, req, reply, cc, opts...)
		c.pad(ctx, method, start)
		c.noteAbort(op, err)
		c.noteAttempt(req, reply, op, err)
		if resp, ok := reply.(*spannerpb.CommitResponse); ok && err == nil && resp.GetCommitTimestamp() != nil {
			c.lead(resp.GetCommitTimestamp().AsTime().Sub(time.Now()))
		}
		return err
	}
	stream := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		c.count(method)
		start := time.Now()
		cs, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil {
			c.pad(ctx, method, start)
			return nil, err
		}
		return &taggedStream{ClientStream: cs, c: c, method: method, ctx: ctx, start: start}, nil
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

// tagged is a Spanner request that carries request options (tags).
type tagged interface {
	GetRequestOptions() *spannerpb.RequestOptions
}

// countOp counts req, a request of method, under the operation its tag
// names, or "untagged METHOD" (sessions, Rollback, a BeginTransaction,
// which the client sends without the transaction's tag; etcd's calls),
// and returns the operation.
func (c *rpcCounter) countOp(method string, req any) string {
	op := "untagged " + method[strings.LastIndex(method, "/")+1:]
	if t, ok := req.(tagged); ok {
		o := t.GetRequestOptions()
		op = cmp.Or(o.GetTransactionTag(), o.GetRequestTag(), op)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byOp[op]++
	return op
}

// noteAbort counts err against op if Spanner aborted the call.
func (c *rpcCounter) noteAbort(op string, err error) {
	if status.Code(err) != codes.Aborted {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.aborted[op]++
}

// noteAttempt attributes a unary call of op, req answered by reply or
// err, to its read-write transaction attempt (attempts).
func (c *rpcCounter) noteAttempt(req, reply any, op string, err error) {
	id, begins := transactionOf(req)
	if begins && err == nil {
		id = beganAs(reply)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !begins || !c.attempts.begun(req, op) {
		c.attempts.attribute(req, id, op)
	}
	c.attempts.ended(req, id, op, begins, err)
}

// taggedStream counts a streaming call under the operation its request's
// tag names, and an ABORTED answer against it; and attributes it to its
// read-write transaction attempt (attempts), once it knows the attempt.
type taggedStream struct {
	grpc.ClientStream
	c      *rpcCounter
	method string
	op     string
	sent   bool
	id     string // the transaction, once known
	begins bool   // the call begins its transaction: its first answer names it
	req    any    // the call's request
	// ctx and start are the call's and when it was opened; padded, that
	// its first answer was held back to the modelled latency (pad).
	ctx    context.Context
	start  time.Time
	padded bool
}

func (s *taggedStream) SendMsg(m any) error {
	if !s.sent {
		s.sent, s.op = true, s.c.countOp(s.method, m)
		s.id, s.begins = transactionOf(m)
		s.req = m
		s.c.mu.Lock()
		if s.begins {
			s.c.attempts.begun(m, s.op)
		}
		s.c.attempts.attribute(m, s.id, s.op)
		s.c.mu.Unlock()
	}
	return s.ClientStream.SendMsg(m)
}

func (s *taggedStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if !s.padded {
		s.padded = true
		s.c.pad(s.ctx, s.method, s.start)
	}
	if s.op == "" {
		return err
	}
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	if s.begins && s.id == "" && err == nil {
		if s.id = beganAs(m); s.id != "" {
			s.c.attempts.attribute(s.req, s.id, s.op)
		}
	}
	if err != nil {
		s.c.attempts.ended(s.req, s.id, s.op, s.begins, err)
		if status.Code(err) == codes.Aborted {
			s.c.aborted[s.op]++
		}
	}
	return err
}

// pad waits, once a call of method begun at start has its (first)
// answer, until the call has taken the modelled latency of method, or
// until ctx ends; a call that took longer is not held back. It returns how
// long it waited.
func (c *rpcCounter) pad(ctx context.Context, method string, start time.Time) time.Duration {
	d := c.latency[method[strings.LastIndex(method, "/")+1:]] - time.Since(start)
	if d <= 0 {
		return 0
	}
	_ = pace.Sleep(ctx, d) // the call's answer stands, whatever ctx says
	return d
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

// opSnapshot returns the counts so far by operation, and of them those
// Spanner aborted.
func (c *rpcCounter) opSnapshot() (byOp, aborted rpcCounts) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.byOp), maps.Clone(c.aborted)
}

// abortedAttempts returns, by operation, the calls so far that were made
// in read-write transaction attempts Spanner aborted.
func (c *rpcCounter) abortedAttempts() rpcCounts {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.attempts.abortedCalls()
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
