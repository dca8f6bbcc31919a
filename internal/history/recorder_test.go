package history_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/spanner/apiv1/spannerpb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/spanmutex/spanmutex/internal/history"
)

// Many goroutines record at once; every operation is kept, with its
// invocation before its response, and one still open is reported as never
// returned.
func TestRecorderConcurrent(t *testing.T) {
	rec := history.NewRecorder()
	const clients, each = 8, 200
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				call := rec.Begin(history.Op{Client: fmt.Sprint("c", c), Kind: history.Write, Name: "L", Token: int64(i + 1)})
				call.End(history.Result{Outcome: history.OK, Commit: t0})
				call.End(history.Result{Outcome: history.Unknown}) // ignored
			}
		}()
	}
	open := rec.Begin(history.Op{Client: "late", Kind: history.Release, Name: "L", Token: 9})
	wg.Wait()
	ops := rec.Ops()
	require.Len(t, ops, clients*each+1)
	for i, o := range ops {
		assert.Equal(t, i+1, o.ID)
		if o.Client == "late" {
			assert.Equal(t, history.Never, o.Return)
			assert.Equal(t, history.Unknown, o.Outcome)
			continue
		}
		assert.Equal(t, history.OK, o.Outcome)
		assert.LessOrEqual(t, o.Call, o.Return)
	}
	open.End(history.Result{Outcome: history.LeaseLost, Err: errors.New("lost")})
	var last history.Op
	for _, o := range rec.Ops() {
		if o.Client == "late" {
			last = o
		}
	}
	assert.Equal(t, history.LeaseLost, last.Outcome)
	assert.Equal(t, "lost", last.Err)
	assert.NotEqual(t, history.Never, last.Return)
}

// renewal is the Commit request a lease renewal sends.
func renewal(table, name string) *spannerpb.CommitRequest {
	vals, _ := structpb.NewList([]any{name, "spanner.commit_timestamp()"})
	return &spannerpb.CommitRequest{Mutations: []*spannerpb.Mutation{{Operation: &spannerpb.Mutation_Update{
		Update: &spannerpb.Mutation_Write{Table: table, Columns: []string{"Name", "RenewedAt"}, Values: []*structpb.ListValue{vals}},
	}}}}
}

// The renewal observer records renewals of the given table, with the
// commit timestamp Spanner answered, and nothing else.
func TestRenewalObserver(t *testing.T) {
	rec := history.NewRecorder()
	observe := rec.RenewalObserver("c1", "Mutexes")
	commitTS := t0.Add(time.Second)
	var fail error
	invoker := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
		if fail != nil {
			return fail
		}
		if r, ok := reply.(*spannerpb.CommitResponse); ok {
			r.CommitTimestamp = timestamppb.New(commitTS)
		}
		return nil
	}
	const commit = "/google.spanner.v1.Spanner/Commit"
	call := func(method string, req any) {
		_ = observe(context.Background(), method, req, &spannerpb.CommitResponse{}, nil, invoker)
	}
	call(commit, renewal("Mutexes", "lock-a"))
	call(commit, renewal("Other", "lock-a"))                                                  // another table
	call("/google.spanner.v1.Spanner/BeginTransaction", &spannerpb.BeginTransactionRequest{}) // not a commit
	call(commit, &spannerpb.CommitRequest{})                                                  // no mutations
	fail = status.Error(codes.Aborted, "aborted")
	call(commit, renewal("Mutexes", "lock-b"))
	fail = status.Error(codes.DeadlineExceeded, "lost")
	call(commit, renewal("Mutexes", "lock-c"))

	ops := rec.Ops()
	require.Len(t, ops, 3)
	assert.Equal(t, history.Renew, ops[0].Kind)
	assert.Equal(t, "lock-a", ops[0].Name)
	assert.Equal(t, "c1", ops[0].Client)
	assert.Equal(t, history.OK, ops[0].Outcome)
	assert.True(t, commitTS.Equal(ops[0].Commit))
	assert.Equal(t, history.NoEffect, ops[1].Outcome, "an aborted commit wrote nothing")
	assert.Equal(t, history.Unknown, ops[2].Outcome, "a commit whose answer was lost may have happened")
}
