package bench

import (
	"errors"
	"testing"

	"cloud.google.com/go/spanner/apiv1/spannerpb"
	"github.com/stretchr/testify/assert"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestAttemptsCountTheCallsOfAbortedAttempts: every call of an aborted
// attempt counts, the one answered ABORTED and those before it; an attempt
// that committed counts none, nor do single-use calls; an inline begin
// aborted before it learnt its transaction counts as itself.
func TestAttemptsCountTheCallsOfAbortedAttempts(t *testing.T) {
	aborted := status.Error(codes.Aborted, "aborted")
	begin := &spannerpb.TransactionSelector{Selector: &spannerpb.TransactionSelector_Begin{Begin: &spannerpb.TransactionOptions{}}}
	in := func(id string) *spannerpb.TransactionSelector {
		return &spannerpb.TransactionSelector{Selector: &spannerpb.TransactionSelector_Id{Id: []byte(id)}}
	}
	began := func(id string) *spannerpb.ResultSet {
		return &spannerpb.ResultSet{Metadata: &spannerpb.ResultSetMetadata{Transaction: &spannerpb.Transaction{Id: []byte(id)}}}
	}
	a := newAttempts()
	call := func(req, reply any, op string, err error) {
		id, begins := transactionOf(req)
		if begins && err == nil {
			id = beganAs(reply)
		}
		a.attribute(id, op)
		a.ended(id, op, begins, err)
	}
	// Attempt x: an inline begin, a read, a Commit answered ABORTED.
	call(&spannerpb.ExecuteSqlRequest{Transaction: begin}, began("x"), "step", nil)
	call(&spannerpb.ReadRequest{Transaction: in("x")}, &spannerpb.ResultSet{}, "step", nil)
	call(&spannerpb.CommitRequest{Transaction: &spannerpb.CommitRequest_TransactionId{TransactionId: []byte("x")}}, nil, "step", aborted)
	// Its retry y: an explicit BeginTransaction, a read, a Commit that lands.
	call(&spannerpb.BeginTransactionRequest{}, &spannerpb.Transaction{Id: []byte("y")}, "untagged BeginTransaction", nil)
	call(&spannerpb.ExecuteSqlRequest{Transaction: in("y")}, &spannerpb.ResultSet{}, "step", nil)
	call(&spannerpb.CommitRequest{Transaction: &spannerpb.CommitRequest_TransactionId{TransactionId: []byte("y")}}, &spannerpb.CommitResponse{}, "step", nil)
	// An inline begin aborted before it learnt its transaction.
	call(&spannerpb.ReadRequest{Transaction: begin}, nil, "acquire", aborted)
	// Single-use calls, one failed otherwise.
	call(&spannerpb.ReadRequest{}, &spannerpb.ResultSet{}, "look", nil)
	call(&spannerpb.CommitRequest{}, nil, "renew", errors.New("unavailable"))

	assert.Equal(t, map[string]int64{"step": 3, "acquire": 1}, a.abortedCalls())
}
