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
// that committed counts none, nor do single-use calls, but the explicit
// BeginTransaction that begins an aborted attempt's retry does; an inline
// begin aborted before it learnt its transaction counts as itself.
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
		if !begins || !a.begun(req, op) {
			a.attribute(req, id, op)
		}
		a.ended(req, id, op, begins, err)
	}
	commit := func(id string) *spannerpb.CommitRequest {
		return &spannerpb.CommitRequest{Session: "s", Transaction: &spannerpb.CommitRequest_TransactionId{TransactionId: []byte(id)}}
	}
	// Attempt x: an inline begin, a read, a Commit answered ABORTED.
	call(&spannerpb.ExecuteSqlRequest{Session: "s", Transaction: begin}, began("x"), "step", nil)
	call(&spannerpb.ReadRequest{Session: "s", Transaction: in("x")}, &spannerpb.ResultSet{}, "step", nil)
	call(commit("x"), nil, "step", aborted)
	// Its retry y on the same session: an explicit BeginTransaction (owed
	// to the abort), a statement, and a Commit aborted again.
	call(&spannerpb.BeginTransactionRequest{Session: "s"}, &spannerpb.Transaction{Id: []byte("y")}, "untagged BeginTransaction", nil)
	call(&spannerpb.ExecuteSqlRequest{Session: "s", Transaction: in("y")}, &spannerpb.ResultSet{}, "step", nil)
	call(commit("y"), nil, "step", aborted)
	// Its retry w: the BeginTransaction owed again, a Commit that lands.
	call(&spannerpb.BeginTransactionRequest{Session: "s"}, &spannerpb.Transaction{Id: []byte("w")}, "untagged BeginTransaction", nil)
	call(commit("w"), &spannerpb.CommitResponse{}, "step", nil)
	// A blind write on another session begins explicitly, owing nothing.
	call(&spannerpb.BeginTransactionRequest{Session: "t"}, &spannerpb.Transaction{Id: []byte("z")}, "untagged BeginTransaction", nil)
	call(&spannerpb.CommitRequest{Session: "t", Transaction: &spannerpb.CommitRequest_TransactionId{TransactionId: []byte("z")}}, &spannerpb.CommitResponse{}, "join", nil)
	// An inline begin aborted before it learnt its transaction.
	call(&spannerpb.ReadRequest{Transaction: begin}, nil, "acquire", aborted)
	// Single-use calls, one failed otherwise.
	call(&spannerpb.ReadRequest{}, &spannerpb.ResultSet{}, "look", nil)
	call(&spannerpb.CommitRequest{}, nil, "renew", errors.New("unavailable"))

	assert.Equal(t, map[string]int64{"step": 5, "acquire": 1, "untagged BeginTransaction": 2}, a.abortedCalls())
}
