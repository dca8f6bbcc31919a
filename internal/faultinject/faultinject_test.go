package faultinject

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/spanmutex/spanmutex/internal/testutil"
)

const commit = "/google.spanner.v1.Spanner/Commit"

// fakeServer stands for the server behind a unary invoker: it counts the
// calls that reached it and answers with err.
type fakeServer struct {
	mu    sync.Mutex
	calls []string
	err   error
}

func (s *fakeServer) invoke(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, method)
	return s.err
}

func (s *fakeServer) received() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls)
}

func newInjector(t *testing.T, rules ...Rule) *Injector {
	t.Helper()
	in, err := New(1, rules...)
	require.NoError(t, err)
	return in
}

func call(in *Injector, s *fakeServer, method string) error {
	return callCtx(context.Background(), in, s, method)
}

func callCtx(ctx context.Context, in *Injector, s *fakeServer, method string) error {
	return in.UnaryClientInterceptor()(ctx, method, nil, nil, nil, s.invoke)
}

func TestFailIsNotSent(t *testing.T) {
	for _, code := range []codes.Code{codes.Unavailable, codes.DeadlineExceeded} {
		t.Run(code.String(), func(t *testing.T) {
			in := newInjector(t, Rule{Methods: []string{"Commit"}, Action: Fail, Probability: 1, Codes: []codes.Code{code}})
			s := &fakeServer{}
			err := call(in, s, commit)
			assert.Equal(t, code, status.Code(err))
			assert.Contains(t, err.Error(), "the call was not sent")
			assert.True(t, IsInjected(err))
			assert.Zero(t, s.received(), "the server never saw the call")
			require.NoError(t, call(in, s, "/google.spanner.v1.Spanner/ExecuteSql"), "other methods pass")
			assert.Equal(t, 1, s.received())
			assert.Equal(t, int64(1), in.Stats().Injected(Fail))
		})
	}
}

func TestDropResponseSendsThenFails(t *testing.T) {
	in := newInjector(t, Rule{Methods: []string{commit}, Action: DropResponse, Probability: 1, Codes: []codes.Code{codes.DeadlineExceeded}})
	s := &fakeServer{}
	err := call(in, s, commit)
	assert.Equal(t, codes.DeadlineExceeded, status.Code(err))
	assert.Contains(t, err.Error(), "the call succeeded and its response was dropped")
	assert.Equal(t, 1, s.received(), "the server acted on the call")
	assert.Equal(t, int64(1), in.Stats().Injected(DropResponse))

	// A call the server failed is passed on as it is, and not counted.
	s.err = status.Error(codes.Aborted, "server says aborted")
	err = call(in, s, commit)
	assert.Equal(t, codes.Aborted, status.Code(err))
	assert.False(t, IsInjected(err))
	assert.Equal(t, int64(1), in.Stats().Injected(DropResponse))
	assert.Equal(t, map[codes.Code]int64{codes.DeadlineExceeded: 1}, in.Stats().Rules[0].ByCode)
}

func TestDropResponseNeverMatchesStreams(t *testing.T) {
	in := newInjector(t, Rule{Action: DropResponse, Probability: 1})
	opened := 0
	streamer := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		opened++
		return nil, nil
	}
	_, err := in.StreamClientInterceptor()(context.Background(), &grpc.StreamDesc{}, nil, "/x.Y/Stream", streamer)
	require.NoError(t, err)
	assert.Equal(t, 1, opened)
	assert.Zero(t, in.Stats().Rules[0].Seen)
}

func TestStreamFailAndDelay(t *testing.T) {
	in := newInjector(t,
		Rule{Methods: []string{"ExecuteStreamingSql"}, Action: Delay, Probability: 1, MinDelay: 30 * time.Millisecond, MaxDelay: 30 * time.Millisecond},
		Rule{Methods: []string{"ExecuteStreamingSql"}, Action: Fail, Probability: 1, Limit: 1},
	)
	opened := 0
	streamer := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		opened++
		return nil, nil
	}
	open := func() error {
		_, err := in.StreamClientInterceptor()(context.Background(), &grpc.StreamDesc{}, nil, "/google.spanner.v1.Spanner/ExecuteStreamingSql", streamer)
		return err
	}
	start := time.Now()
	assert.Equal(t, codes.Unavailable, status.Code(open()), "failed after the delay, not opened")
	assert.GreaterOrEqual(t, time.Since(start), 30*time.Millisecond)
	assert.Zero(t, opened)
	require.NoError(t, open(), "the Fail rule's limit is spent")
	assert.Equal(t, 1, opened)
	st := in.Stats()
	assert.Equal(t, int64(2), st.Injected(Delay))
	assert.Equal(t, int64(1), st.Injected(Fail))
}

func TestDelayHonoursContext(t *testing.T) {
	in := newInjector(t, Rule{Action: Delay, Probability: 1, MinDelay: time.Hour, MaxDelay: time.Hour})
	s := &fakeServer{}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err := callCtx(ctx, in, s, commit)
	assert.Equal(t, codes.DeadlineExceeded, status.Code(err))
	assert.Zero(t, s.received())
}

func TestDelayIsWithinBounds(t *testing.T) {
	in := newInjector(t, Rule{Action: Delay, Probability: 1, MinDelay: 5 * time.Millisecond, MaxDelay: 15 * time.Millisecond})
	s := &fakeServer{}
	for range 5 {
		start := time.Now()
		require.NoError(t, call(in, s, commit))
		assert.GreaterOrEqual(t, time.Since(start), 5*time.Millisecond)
	}
	assert.Equal(t, 5, s.received())
}

func TestHoldUntilRelease(t *testing.T) {
	in := newInjector(t, Rule{Methods: []string{"Commit"}, Action: Hold, Probability: 1})
	s := &fakeServer{}
	done := make(chan error, 1)
	go func() { done <- call(in, s, commit) }()
	testutil.WaitFor(t, 10*time.Second, "the call to be held", func() bool { return in.Stats().Injected(Hold) > 0 })
	select {
	case err := <-done:
		t.Fatalf("held call returned before Release: %v", err)
	default:
	}
	assert.Zero(t, s.received())

	// A held call whose ctx ends is not sent.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	assert.Equal(t, codes.DeadlineExceeded, status.Code(callCtx(ctx, in, s, commit)))

	in.Release()
	require.NoError(t, <-done)
	assert.Equal(t, 1, s.received())
	require.NoError(t, call(in, s, commit), "after Release, Hold rules let calls through")
	assert.Equal(t, 2, s.received())
	assert.Equal(t, int64(2), in.Stats().Injected(Hold))
	in.Release() // idempotent
}

func TestSkipAndLimit(t *testing.T) {
	in := newInjector(t, Rule{Action: Fail, Probability: 1, Skip: 2, Limit: 3})
	s := &fakeServer{}
	var got []bool
	for range 8 {
		got = append(got, call(in, s, commit) != nil)
	}
	assert.Equal(t, []bool{false, false, true, true, true, false, false, false}, got)
	st := in.Stats()
	assert.Equal(t, int64(8), st.Rules[0].Seen)
	assert.Equal(t, int64(3), st.Rules[0].Injected)
}

func TestLimitHoldsUnderConcurrency(t *testing.T) {
	in := newInjector(t, Rule{Action: DropResponse, Probability: 1, Limit: 1})
	s := &fakeServer{}
	var wg sync.WaitGroup
	var mu sync.Mutex
	dropped := 0
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if call(in, s, commit) != nil {
				mu.Lock()
				dropped++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, 1, dropped)
	assert.Equal(t, 50, s.received())
}

// The same seed gives the same faults to the same sequence of calls, and the
// rate is about the probability.
func TestSeededAndProbabilistic(t *testing.T) {
	pattern := func(seed uint64) []bool {
		in, err := New(seed, Rule{Action: Fail, Probability: 0.3, Codes: []codes.Code{codes.Unavailable, codes.DeadlineExceeded}})
		require.NoError(t, err)
		s := &fakeServer{}
		var out []bool
		for range 2000 {
			out = append(out, call(in, s, commit) != nil)
		}
		return out
	}
	a, b, c := pattern(7), pattern(7), pattern(8)
	assert.Equal(t, a, b)
	assert.NotEqual(t, a, c)
	n := 0
	for _, f := range a {
		if f {
			n++
		}
	}
	assert.InDelta(t, 600, n, 90, "about 30%% of 2000 calls fail")
}

func TestBothCodesAreDrawn(t *testing.T) {
	in := newInjector(t, Rule{Action: Fail, Probability: 1, Codes: []codes.Code{codes.Unavailable, codes.DeadlineExceeded}})
	s := &fakeServer{}
	seen := map[codes.Code]int{}
	for range 200 {
		seen[status.Code(call(in, s, commit))]++
	}
	assert.Len(t, seen, 2)
	assert.Greater(t, seen[codes.Unavailable], 50)
	assert.Greater(t, seen[codes.DeadlineExceeded], 50)
	st := in.Stats()
	assert.Equal(t, map[codes.Code]int64{codes.Unavailable: int64(seen[codes.Unavailable]), codes.DeadlineExceeded: int64(seen[codes.DeadlineExceeded])}, st.Rules[0].ByCode)
	assert.Contains(t, st.String(), fmt.Sprintf("(DeadlineExceeded %d, Unavailable %d)", seen[codes.DeadlineExceeded], seen[codes.Unavailable]), "by code, in code order")
}

func TestMatchAndMethods(t *testing.T) {
	in := newInjector(t, Rule{
		Methods: []string{"Commit", "/google.spanner.v1.Spanner/Rollback"},
		Action:  Fail, Probability: 1,
		Match: func(method string, req any) bool { return req == "bad" },
	})
	s := &fakeServer{}
	ic := in.UnaryClientInterceptor()
	assert.Error(t, ic(context.Background(), commit, "bad", nil, nil, s.invoke))
	assert.Error(t, ic(context.Background(), "/google.spanner.v1.Spanner/Rollback", "bad", nil, nil, s.invoke))
	assert.NoError(t, ic(context.Background(), commit, "good", nil, nil, s.invoke))
	assert.NoError(t, ic(context.Background(), "/other.Service/Commitment", "bad", nil, nil, s.invoke))
	assert.NoError(t, ic(context.Background(), "/google.spanner.v1.Spanner/ExecuteSql", "bad", nil, nil, s.invoke))
	assert.Equal(t, 3, s.received())
}

func TestDisabledPassesThrough(t *testing.T) {
	in := newInjector(t, Rule{Action: Fail, Probability: 1})
	s := &fakeServer{}
	in.SetEnabled(false)
	require.NoError(t, call(in, s, commit))
	assert.Equal(t, Stats{Calls: 0, Rules: []RuleStats{{Name: "fail *", Action: Fail}}}, in.Stats())
	in.SetEnabled(true)
	assert.Error(t, call(in, s, commit))
	assert.Equal(t, int64(1), in.Stats().Calls)
}

// Only the first Fail or DropResponse that fires decides a call; delays add up.
func TestRulesCombine(t *testing.T) {
	in := newInjector(t,
		Rule{Name: "d1", Action: Delay, Probability: 1, MinDelay: time.Millisecond, MaxDelay: time.Millisecond},
		Rule{Name: "fail", Action: Fail, Probability: 1, Codes: []codes.Code{codes.DeadlineExceeded}},
		Rule{Name: "drop", Action: DropResponse, Probability: 1},
		Rule{Name: "d2", Action: Delay, Probability: 1, MinDelay: time.Millisecond, MaxDelay: time.Millisecond},
	)
	s := &fakeServer{}
	assert.Equal(t, codes.DeadlineExceeded, status.Code(call(in, s, commit)))
	st := in.Stats()
	got := map[string]int64{}
	for _, r := range st.Rules {
		got[r.Name] = r.Injected
	}
	assert.Equal(t, map[string]int64{"d1": 1, "fail": 1, "drop": 0, "d2": 1}, got)
	assert.Contains(t, st.String(), "fail: 1 of 1")
}

func TestNewRejectsBadRules(t *testing.T) {
	tests := []struct {
		name string
		rule Rule
	}{
		{"no action", Rule{Probability: 1}},
		{"zero probability", Rule{Action: Fail}},
		{"probability above 1", Rule{Action: Fail, Probability: 1.5}},
		{"negative skip", Rule{Action: Fail, Probability: 1, Skip: -1}},
		{"negative limit", Rule{Action: Fail, Probability: 1, Limit: -1}},
		{"delay without MaxDelay", Rule{Action: Delay, Probability: 1}},
		{"MaxDelay below MinDelay", Rule{Action: Delay, Probability: 1, MinDelay: 2, MaxDelay: 1}},
		{"OK is no fault", Rule{Action: Fail, Probability: 1, Codes: []codes.Code{codes.OK}}},
		{"empty method", Rule{Action: Fail, Probability: 1, Methods: []string{""}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(1, tt.rule)
			assert.ErrorContains(t, err, "faultinject: rule 0")
		})
	}
}

// The interceptors work on a real connection: a health check through a
// bufconn server is failed, dropped and passed as the rules say. A call
// sealed by an earlier rule is not seen by later Fail or DropResponse rules.
func TestOnARealConnection(t *testing.T) {
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer()
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)

	in := newInjector(t,
		Rule{Name: "fail first", Methods: []string{"Check"}, Action: Fail, Probability: 1, Limit: 1},
		Rule{Name: "drop second", Methods: []string{"Check"}, Action: DropResponse, Probability: 1, Limit: 1, Codes: []codes.Code{codes.DeadlineExceeded}},
	)
	opts := append(in.DialOptions(),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	cc, err := grpc.NewClient("passthrough:///bufnet", opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cc.Close() })
	client := healthpb.NewHealthClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	_, err = client.Check(ctx, &healthpb.HealthCheckRequest{})
	assert.Equal(t, codes.Unavailable, status.Code(err))
	_, err = client.Check(ctx, &healthpb.HealthCheckRequest{})
	assert.Equal(t, codes.DeadlineExceeded, status.Code(err))
	resp, err := client.Check(ctx, &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	assert.Equal(t, healthpb.HealthCheckResponse_SERVING, resp.GetStatus())
	assert.Equal(t, "3 calls; fail first: 1 of 3; drop second: 1 of 2", in.Stats().String())
	assert.False(t, IsInjected(errors.New("other")))
}
