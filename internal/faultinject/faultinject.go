// Package faultinject injects faults into the RPCs of a gRPC client, such as
// a Cloud Spanner client, for tests: it fails calls before they are sent,
// drops the response of calls that succeeded (so that the caller cannot know
// that the server acted), delays calls, and holds them until released.
//
// An Injector is a list of rules, each for some methods, with a probability
// and counters. Its interceptors plug into a client's connections:
//
//	in, err := faultinject.New(1, faultinject.Rule{
//		Methods: []string{"Commit"}, Action: faultinject.DropResponse, Probability: 0.3,
//		Codes: []codes.Code{codes.Unavailable, codes.DeadlineExceeded},
//	})
//	client, err := spanner.NewClient(ctx, db, in.ClientOptions()...)
//
// The interceptors sit below the client library's own retries: a call the
// library retries (Spanner's client retries UNAVAILABLE on most unary calls)
// meets the rules again on every try, as it would meet a flaky network.
//
// Random draws come from one math/rand/v2 source seeded by New, so that a
// sequence of calls meets the same faults on every run. Calls made by
// concurrent goroutines arrive in an order the scheduler chooses, so only a
// single-goroutine sequence is exactly reproducible.
//
// An Injector is safe for concurrent use. It keeps no package-level state.
package faultinject

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Action is what a rule does to a call it fires on.
type Action int

const (
	// Fail returns one of the rule's codes without sending the call: the
	// server never sees it.
	Fail Action = iota + 1
	// DropResponse sends the call and, if the server answered it
	// successfully, returns one of the rule's codes instead of the answer:
	// the server acted, and the caller cannot tell. A call the server
	// failed is passed on unchanged and not counted. Unary calls only:
	// stream calls never match a DropResponse rule.
	DropResponse
	// Delay waits a random duration in [MinDelay, MaxDelay] before sending
	// the call. If the call's context ends first, the call is not sent and
	// fails with the context's status.
	Delay
	// Hold blocks the call until Release is called, then sends it. If the
	// call's context ends first, the call is not sent and fails with the
	// context's status. After Release, Hold rules let every call through.
	Hold
)

func (a Action) String() string {
	switch a {
	case Fail:
		return "fail"
	case DropResponse:
		return "drop-response"
	case Delay:
		return "delay"
	case Hold:
		return "hold"
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// Rule says which calls to disturb and how.
type Rule struct {
	// Name labels the rule in Stats; default: its action and methods.
	Name string
	// Methods are the methods the rule applies to, each either a full
	// gRPC method name ("/google.spanner.v1.Spanner/Commit") or its last
	// element ("Commit"). Empty: every method.
	Methods []string
	// Match, if set, must also return true for the rule to apply. For
	// unary calls req is the request message; for stream calls it is nil,
	// as no request has been sent when the stream is opened.
	Match func(method string, req any) bool
	// Action is what the rule does when it fires. Required.
	Action Action
	// Codes are the status codes Fail and DropResponse return, one drawn
	// at random per fault (default: codes.Unavailable). Not codes.OK.
	Codes []codes.Code
	// Probability is the chance, in (0, 1], that the rule fires on a call
	// it applies to (after Skip, within Limit).
	Probability float64
	// Skip lets the first Skip calls the rule applies to through untouched.
	Skip int
	// Limit bounds how many times the rule fires (0: no limit).
	Limit int
	// MinDelay and MaxDelay bound a Delay rule's wait, drawn uniformly.
	MinDelay, MaxDelay time.Duration
}

func (r Rule) validate(i int) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("faultinject: rule %d (%s): %s", i, r.label(), fmt.Sprintf(format, args...))
	}
	switch r.Action {
	case Fail, DropResponse, Delay, Hold:
	default:
		return bad("unknown action %v", r.Action)
	}
	if !(r.Probability > 0 && r.Probability <= 1) { // also rejects NaN
		return bad("probability %v is not in (0, 1]", r.Probability)
	}
	if r.Skip < 0 || r.Limit < 0 {
		return bad("Skip (%d) and Limit (%d) must not be negative", r.Skip, r.Limit)
	}
	if r.MinDelay < 0 || r.MaxDelay < r.MinDelay {
		return bad("want 0 <= MinDelay (%v) <= MaxDelay (%v)", r.MinDelay, r.MaxDelay)
	}
	if r.Action == Delay && r.MaxDelay == 0 {
		return bad("a Delay rule needs MaxDelay > 0")
	}
	for _, c := range r.Codes {
		if c == codes.OK {
			return bad("codes.OK is not a fault")
		}
	}
	for _, m := range r.Methods {
		if m == "" {
			return bad("empty method name")
		}
	}
	return nil
}

func (r Rule) label() string {
	if r.Name != "" {
		return r.Name
	}
	methods := "*"
	if len(r.Methods) > 0 {
		methods = strings.Join(r.Methods, ",")
	}
	return r.Action.String() + " " + methods
}

// applies reports whether the rule is about method (and req).
func (r *Rule) applies(method string, req any, stream bool) bool {
	if stream && r.Action == DropResponse {
		return false
	}
	if len(r.Methods) > 0 {
		short := method[strings.LastIndexByte(method, '/')+1:]
		found := false
		for _, m := range r.Methods {
			if m == method || m == short {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return r.Match == nil || r.Match(method, req)
}

// maxCode bounds the status codes counted per code (codes.Unauthenticated
// is the highest defined one).
const maxCode = codes.Unauthenticated

// rule is a Rule with its counters.
type rule struct {
	Rule
	label    string
	seen     int64 // calls it applied to; guarded by Injector.mu
	injected atomic.Int64
	byCode   [maxCode + 1]atomic.Int64 // Fail and DropResponse faults, by code
}

// count adds n faults with code c.
func (r *rule) count(c codes.Code, n int64) {
	r.injected.Add(n)
	if c <= maxCode {
		r.byCode[c].Add(n)
	}
}

// Injector holds the rules and their counters. Create it with New.
type Injector struct {
	mu       sync.Mutex // guards rng and every rule's seen
	rng      *rand.Rand
	rules    []*rule
	disabled atomic.Bool
	released chan struct{}
	release  sync.Once
	calls    atomic.Int64
}

// New returns an enabled Injector with the given rules, evaluated in order,
// drawing from a source seeded with seed. It returns an error if a rule is
// invalid.
func New(seed uint64, rules ...Rule) (*Injector, error) {
	in := &Injector{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), released: make(chan struct{})}
	for i, r := range rules {
		if err := r.validate(i); err != nil {
			return nil, err
		}
		r.Methods = append([]string(nil), r.Methods...)
		r.Codes = append([]codes.Code(nil), r.Codes...)
		in.rules = append(in.rules, &rule{Rule: r, label: r.label()})
	}
	return in, nil
}

// SetEnabled turns the injector on or off. While off, calls pass through
// untouched and are not counted; calls already delayed or held stay so.
func (in *Injector) SetEnabled(on bool) { in.disabled.Store(!on) }

// Release lets every held call go on, and every later call that a Hold rule
// fires on pass without waiting. It is safe to call more than once.
func (in *Injector) Release() { in.release.Do(func() { close(in.released) }) }

// plan is what to do with one call.
type plan struct {
	delay time.Duration
	hold  bool
	fail  *rule // Fail or DropResponse, the first that fired
	code  codes.Code
	held  []*rule // Hold rules that fired, counted when the call waits
}

// decide draws, under the lock, what to do with a call.
func (in *Injector) decide(method string, req any, stream bool) plan {
	var p plan
	if in.disabled.Load() {
		return p
	}
	in.calls.Add(1)
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, r := range in.rules {
		if !r.applies(method, req, stream) {
			continue
		}
		if p.fail != nil && (r.Action == Fail || r.Action == DropResponse) {
			continue // the call's fate is sealed: do not count it here
		}
		r.seen++
		if r.seen <= int64(r.Skip) || (r.Limit > 0 && r.injected.Load() >= int64(r.Limit)) {
			continue
		}
		if r.Probability < 1 && in.rng.Float64() >= r.Probability {
			continue
		}
		switch r.Action {
		case Delay:
			d := r.MinDelay
			if span := r.MaxDelay - r.MinDelay; span > 0 {
				d += time.Duration(in.rng.Int64N(int64(span) + 1))
			}
			p.delay += d
			r.injected.Add(1)
		case Hold:
			select {
			case <-in.released:
				continue // released: Hold rules no longer fire
			default:
			}
			p.hold = true
			p.held = append(p.held, r)
			r.injected.Add(1)
		case Fail:
			p.fail, p.code = r, in.drawCode(r)
			r.count(p.code, 1)
		case DropResponse:
			// Counted now, so that Limit holds under concurrent calls, and
			// taken back if the server fails the call.
			p.fail, p.code = r, in.drawCode(r)
			r.count(p.code, 1)
		}
	}
	return p
}

func (in *Injector) drawCode(r *rule) codes.Code {
	switch len(r.Codes) {
	case 0:
		return codes.Unavailable
	case 1:
		return r.Codes[0]
	}
	return r.Codes[in.rng.IntN(len(r.Codes))]
}

// before waits out the plan's delay and hold, and returns the error to
// fail the call with before it is sent, if any.
func (in *Injector) before(ctx context.Context, p plan) error {
	if p.delay > 0 {
		t := time.NewTimer(p.delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return status.FromContextError(ctx.Err()).Err()
		}
	}
	if p.hold {
		select {
		case <-in.released:
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
	}
	if p.fail != nil && p.fail.Action == Fail {
		return status.Errorf(p.code, "faultinject: %s: injected %v; the call was not sent", p.fail.label, p.code)
	}
	return nil
}

// UnaryClientInterceptor returns the interceptor for unary calls.
func (in *Injector) UnaryClientInterceptor() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		p := in.decide(method, req, false)
		if err := in.before(ctx, p); err != nil {
			return err
		}
		err := invoker(ctx, method, req, reply, cc, opts...)
		if p.fail == nil || p.fail.Action != DropResponse {
			return err
		}
		if err != nil {
			p.fail.count(p.code, -1) // nothing to drop
			return err
		}
		return status.Errorf(p.code, "faultinject: %s: injected %v; the call succeeded and its response was dropped", p.fail.label, p.code)
	}
}

// StreamClientInterceptor returns the interceptor for stream calls. Faults
// apply when the stream is opened; DropResponse rules never match streams.
func (in *Injector) StreamClientInterceptor() grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		p := in.decide(method, nil, true)
		if err := in.before(ctx, p); err != nil {
			return nil, err
		}
		return streamer(ctx, desc, cc, method, opts...)
	}
}

// DialOptions returns the dial options that install both interceptors.
func (in *Injector) DialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(in.UnaryClientInterceptor()),
		grpc.WithChainStreamInterceptor(in.StreamClientInterceptor()),
	}
}

// ClientOptions returns the options that install both interceptors in a
// Google Cloud client, such as spanner.NewClient's.
func (in *Injector) ClientOptions() []option.ClientOption {
	var opts []option.ClientOption
	for _, o := range in.DialOptions() {
		opts = append(opts, option.WithGRPCDialOption(o))
	}
	return opts
}

// RuleStats counts what one rule did.
type RuleStats struct {
	Name     string
	Action   Action
	Seen     int64 // calls the rule applied to while enabled
	Injected int64 // faults it injected (a DropResponse in flight counts)
	// ByCode splits the faults of a Fail or DropResponse rule by the
	// status code returned.
	ByCode map[codes.Code]int64
}

// Stats counts the calls an Injector saw and the faults it injected.
type Stats struct {
	Calls int64 // calls seen while enabled
	Rules []RuleStats
}

// Injected returns the number of faults injected by rules with action a.
func (s Stats) Injected(a Action) int64 {
	var n int64
	for _, r := range s.Rules {
		if r.Action == a {
			n += r.Injected
		}
	}
	return n
}

// String summarises the stats on one line, for test logs.
func (s Stats) String() string {
	parts := []string{fmt.Sprintf("%d calls", s.Calls)}
	for _, r := range s.Rules {
		part := fmt.Sprintf("%s: %d of %d", r.Name, r.Injected, r.Seen)
		if len(r.ByCode) > 1 {
			var byCode []string
			for c := codes.Code(0); c <= maxCode; c++ {
				if n := r.ByCode[c]; n > 0 {
					byCode = append(byCode, fmt.Sprintf("%v %d", c, n))
				}
			}
			part += " (" + strings.Join(byCode, ", ") + ")"
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, "; ")
}

// Stats returns the counters so far.
func (in *Injector) Stats() Stats {
	in.mu.Lock()
	defer in.mu.Unlock()
	s := Stats{Calls: in.calls.Load()}
	for _, r := range in.rules {
		rs := RuleStats{Name: r.label, Action: r.Action, Seen: r.seen, Injected: r.injected.Load()}
		for c := range r.byCode {
			if n := r.byCode[c].Load(); n != 0 {
				if rs.ByCode == nil {
					rs.ByCode = map[codes.Code]int64{}
				}
				rs.ByCode[codes.Code(c)] = n
			}
		}
		s.Rules = append(s.Rules, rs)
	}
	return s
}

// IsInjected reports whether err is, or wraps the text of, a fault this
// package injected. Client libraries rewrap errors, so it looks at the text.
func IsInjected(err error) bool {
	return err != nil && strings.Contains(err.Error(), "faultinject: ")
}
