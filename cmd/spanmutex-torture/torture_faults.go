package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/spanmutex/spanmutex/internal/faultinject"
)

// The faults "spanmutex-torture" can inject.
const (
	faultAbort       = "abort"       // the emulator aborts commits at random (--enable_fault_injection)
	faultUnavailable = "unavailable" // a call fails with UNAVAILABLE before it is sent
	faultDropCommit  = "drop-commit" // a commit succeeds and its answer is lost: its outcome is unknown
	faultDelay       = "delay"       // a call is held back a while before it is sent
	faultPause       = "pause"       // a client freezes past the lease, and is taken over
	faultImpatient   = "impatient"   // some Lock calls give up after 5 to 60 ms
	faultMismatched  = "mismatched"  // every other client declares a lease of a third or three times --lease
)

// allFaults lists the faults in the order reports show them.
var allFaults = []string{faultAbort, faultUnavailable, faultDropCommit, faultDelay, faultPause, faultImpatient, faultMismatched}

// impatientShare is the share of Lock calls the impatient fault cuts
// short, and impatientMin and impatientMax bound their deadlines.
const (
	impatientShare = 0.3
	impatientMin   = 5 * time.Millisecond
	impatientMax   = 60 * time.Millisecond
)

// parseFaults parses --faults: a comma-separated subset of allFaults, or
// "none".
func parseFaults(s string) ([]string, error) {
	if s == "none" || s == "" {
		return nil, nil
	}
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if !slices.Contains(allFaults, f) {
			return nil, fmt.Errorf("unknown fault %q; want a comma-separated list of %s, or none", f, strings.Join(allFaults, ", "))
		}
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return slices.Index(allFaults, a) - slices.Index(allFaults, b) })
	return out, nil
}

// clientFaults are the faults of one torture client's Spanner client: a
// freezer outermost (a frozen process sends nothing), then the RPC faults,
// then a counter of the aborts Spanner answers with.
type clientFaults struct {
	freezer *freezer
	inject  *faultinject.Injector // nil if no RPC fault is on
	aborts  atomic.Int64
}

// newClientFaults builds the faults of one client. rate is the chance of
// each RPC fault per call; maxDelay bounds a delay.
func newClientFaults(faults []string, rate float64, maxDelay time.Duration, seed uint64) (*clientFaults, error) {
	cf := &clientFaults{freezer: &freezer{}}
	var rules []faultinject.Rule
	for _, f := range faults {
		switch f {
		case faultUnavailable:
			rules = append(rules, faultinject.Rule{Name: f, Action: faultinject.Fail, Probability: rate,
				Codes: []codes.Code{codes.Unavailable}})
		case faultDropCommit:
			// Not UNAVAILABLE: the client library retries that on Commit,
			// and the emulator acknowledges the retried commit, which hides
			// the fault.
			rules = append(rules, faultinject.Rule{Name: f, Methods: []string{"Commit"}, Action: faultinject.DropResponse,
				Probability: rate, Codes: []codes.Code{codes.DeadlineExceeded, codes.Unknown}})
		case faultDelay:
			rules = append(rules, faultinject.Rule{Name: f, Action: faultinject.Delay, Probability: rate, MaxDelay: maxDelay})
		}
	}
	if len(rules) > 0 {
		in, err := faultinject.New(seed, rules...)
		if err != nil {
			return nil, err
		}
		cf.inject = in
	}
	return cf, nil
}

// clientOptions installs the faults; inner are interceptors to put
// innermost, closest to the network.
func (cf *clientFaults) clientOptions(inner ...grpc.UnaryClientInterceptor) []option.ClientOption {
	opts := []option.ClientOption{
		option.WithGRPCDialOption(grpc.WithChainUnaryInterceptor(cf.freezer.unary)),
		option.WithGRPCDialOption(grpc.WithChainStreamInterceptor(cf.freezer.stream)),
	}
	if cf.inject != nil {
		opts = append(opts, cf.inject.ClientOptions()...)
	}
	inner = append(inner, cf.countAborts)
	return append(opts, option.WithGRPCDialOption(grpc.WithChainUnaryInterceptor(inner...)))
}

// countAborts counts the calls Spanner answered with ABORTED: commits the
// emulator aborted, by fault injection or because another transaction ran.
func (cf *clientFaults) countAborts(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	if status.Code(err) == codes.Aborted {
		cf.aborts.Add(1)
	}
	return err
}

// injected returns the faults the injector injected, by rule name.
func (cf *clientFaults) injected() map[string]int64 {
	out := map[string]int64{}
	if cf.inject != nil {
		for _, r := range cf.inject.Stats().Rules {
			out[r.Name] += r.Injected
		}
	}
	return out
}

// freezer freezes a client as SIGSTOP would freeze its process: while
// frozen, every call waits before it is sent, until the client thaws or the
// call's context ends. Its methods are safe for concurrent use.
type freezer struct {
	mu     sync.Mutex
	thawed chan struct{} // nil while not frozen
}

// freeze freezes the client until thaw.
func (f *freezer) freeze() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.thawed == nil {
		f.thawed = make(chan struct{})
	}
}

// thaw lets the client's calls go on.
func (f *freezer) thaw() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.thawed != nil {
		close(f.thawed)
		f.thawed = nil
	}
}

// wait returns when the client is not frozen, or with ctx's status if ctx
// ends first.
func (f *freezer) wait(ctx context.Context) error {
	f.mu.Lock()
	c := f.thawed
	f.mu.Unlock()
	if c == nil {
		return nil
	}
	select {
	case <-c:
		return nil
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	}
}

func (f *freezer) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if err := f.wait(ctx); err != nil {
		return err
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

func (f *freezer) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	if err := f.wait(ctx); err != nil {
		return nil, err
	}
	return streamer(ctx, desc, cc, method, opts...)
}
