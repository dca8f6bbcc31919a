package bench

import (
	"maps"

	"cloud.google.com/go/spanner/apiv1/spannerpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// attempts attributes the calls made in read-write transactions to the
// transaction attempt they ran in, by the transaction id their requests
// carry (or the id Spanner returned to a call that began the transaction
// inline, or to a BeginTransaction), so that the calls of attempts Spanner
// aborted can be counted apart: on the emulator, which runs one read-write
// transaction at a time and aborts the others, they are what the emulator
// adds, not what production bills. Calls outside read-write transactions
// (single-use reads and commits, sessions) are not attributed. Guarded by
// the rpcCounter's mu.
type attempts struct {
	calls   map[string][]string // transaction id → the operations of its calls
	aborted map[string]bool     // transaction ids Spanner aborted
	// early counts, by operation, the calls Spanner aborted before any
	// transaction id was known (an aborted inline begin).
	early map[string]int64
}

func newAttempts() attempts {
	return attempts{calls: map[string][]string{}, aborted: map[string]bool{}, early: map[string]int64{}}
}

// transactionOf returns the transaction id req names, and whether req
// begins a transaction whose id its answer carries.
func transactionOf(req any) (id string, begins bool) {
	var sel *spannerpb.TransactionSelector
	switch r := req.(type) {
	case *spannerpb.ExecuteSqlRequest:
		sel = r.GetTransaction()
	case *spannerpb.ReadRequest:
		sel = r.GetTransaction()
	case *spannerpb.ExecuteBatchDmlRequest:
		sel = r.GetTransaction()
	case *spannerpb.CommitRequest:
		return string(r.GetTransactionId()), false
	case *spannerpb.RollbackRequest:
		return string(r.GetTransactionId()), false
	case *spannerpb.BeginTransactionRequest:
		return "", true
	}
	return string(sel.GetId()), sel.GetBegin() != nil
}

// beganAs returns the id of the transaction that answer, to a call that
// began one, says was begun; "" if it says none.
func beganAs(answer any) string {
	switch a := answer.(type) {
	case *spannerpb.Transaction:
		return string(a.GetId())
	case *spannerpb.ResultSet:
		return string(a.GetMetadata().GetTransaction().GetId())
	case *spannerpb.PartialResultSet:
		return string(a.GetMetadata().GetTransaction().GetId())
	case *spannerpb.ExecuteBatchDmlResponse:
		if rs := a.GetResultSets(); len(rs) > 0 {
			return string(rs[0].GetMetadata().GetTransaction().GetId())
		}
	}
	return ""
}

// attribute records a call of op in transaction id.
func (a *attempts) attribute(id, op string) {
	if id != "" {
		a.calls[id] = append(a.calls[id], op)
	}
}

// ended records how a call of op in transaction id ("" if none is known)
// ended: with err, ABORTED or not; begins: it was to begin one.
func (a *attempts) ended(id, op string, begins bool, err error) {
	if status.Code(err) != codes.Aborted {
		return
	}
	switch {
	case id != "":
		a.aborted[id] = true
	case begins:
		a.early[op]++
	}
}

// abortedCalls returns, by operation, the calls made in attempts Spanner
// aborted.
func (a *attempts) abortedCalls() map[string]int64 {
	out := maps.Clone(a.early)
	for id := range a.aborted {
		for _, op := range a.calls[id] {
			out[op]++
		}
	}
	return out
}
