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
	// transaction id was known (an aborted inline begin), and the
	// BeginTransaction calls that began the retry of an aborted attempt.
	early map[string]int64
	// sessionOf names the session of each transaction; retrying holds the
	// sessions whose last transaction was aborted: the Go client retries
	// on the same session, beginning the retry with an explicit
	// BeginTransaction (a first attempt begins inline, with its first
	// statement or read).
	sessionOf map[string]string
	retrying  map[string]bool
}

func newAttempts() attempts {
	return attempts{calls: map[string][]string{}, aborted: map[string]bool{}, early: map[string]int64{},
		sessionOf: map[string]string{}, retrying: map[string]bool{}}
}

// sessionOfCall returns the session req names, "" if none.
func sessionOfCall(req any) string {
	if r, ok := req.(interface{ GetSession() string }); ok {
		return r.GetSession()
	}
	return ""
}

// begun records a call of op, req, that began a transaction, and reports
// whether it is owed to an abort: on a session whose last transaction was
// aborted, an explicit BeginTransaction begins its retry, and counts with
// the aborted attempt's calls (and not again with its own attempt's).
func (a *attempts) begun(req any, op string) (owed bool) {
	session := sessionOfCall(req)
	_, explicit := req.(*spannerpb.BeginTransactionRequest)
	owed = explicit && a.retrying[session]
	if owed {
		a.early[op]++
	}
	delete(a.retrying, session)
	return owed
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

// attribute records a call of op, req, in transaction id.
func (a *attempts) attribute(req any, id, op string) {
	if id == "" {
		return
	}
	a.calls[id] = append(a.calls[id], op)
	if s := sessionOfCall(req); s != "" {
		a.sessionOf[id] = s
	}
}

// ended records how a call of op, req, in transaction id ("" if none is
// known) ended: with err, ABORTED or not; begins: it was to begin one.
func (a *attempts) ended(req any, id, op string, begins bool, err error) {
	if status.Code(err) != codes.Aborted {
		return
	}
	switch {
	case id != "":
		a.aborted[id] = true
		if s := a.sessionOf[id]; s != "" {
			a.retrying[s] = true
		}
	case begins:
		a.early[op]++
		if s := sessionOfCall(req); s != "" {
			a.retrying[s] = true
		}
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
