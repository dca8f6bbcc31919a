package main

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"

	"cloud.google.com/go/spanner/apiv1/spannerpb"
	"google.golang.org/grpc"

	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/internal/history"
)

// With --sessions, half the clients hold their locks through their Scope's
// session (spanmutex.WithSessions), the others renew each lock on its own,
// as a fleet does once every process reads sessions and some have turned
// them on. Mixed, not all: a lock then passes between the two kinds of
// holder in every way (taken while free, taken over, handed on by Unlock),
// so that a contender without a session judges a row by its session, and a
// session's holder judges a row by its own renewals.
//
// The history's checks stay as they are: they see each lock row's own
// renewals on the wire, not the session's, so a lease held through a
// session looks silent from its acquisition on. That makes the takeover
// check weaker for such a lease (its silence is measured from its
// acquisition, not from the session's last renewal), never wrong; the
// fenced writes, tokens, disjoint holders and the table's final state are
// checked as for any lease.

// sessionClient reports whether client i (from 0) holds through sessions:
// with --sessions, every other client, the pattern shifted every four
// clients (c1, c3, c6, c8, c9, ...), so that with the mismatched fault
// each lease it declares (--lease, a third, three times) is declared by
// clients with and without sessions alike.
func (o *tortureOptions) sessionClient(i int) bool {
	return o.sessions && i%2 == (i/4)%2
}

// sessionWrites counts a client's commits of its sessions' rows (one
// Commit each, tag spanmutex.session): starts and renewals.
type sessionWrites struct {
	table           string // the sessions table
	starts, renewed atomic.Int64
}

// unary is a gRPC interceptor that counts the commits of the sessions
// table that Spanner acknowledged.
func (s *sessionWrites) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	cr, ok := req.(*spannerpb.CommitRequest)
	if err != nil || !ok || len(cr.GetMutations()) != 1 {
		return err
	}
	switch m := cr.GetMutations()[0]; {
	case m.GetInsertOrUpdate().GetTable() == s.table:
		s.starts.Add(1)
	case m.GetUpdate().GetTable() == s.table:
		s.renewed.Add(1)
	}
	return err
}

// newSessionWrites counts the session commits of one client.
func newSessionWrites() *sessionWrites {
	return &sessionWrites{table: ddl.DefaultMutexTable + ddl.SessionsSuffix}
}

// writeSessions writes, with --sessions, which clients held through
// sessions, the session commits they made, and the lock rows' own
// renewals seen on the wire of each kind of client: those of a client
// with sessions renew locks handed to it by an Unlock, which it renews on
// its own.
func (t *torture) writeSessions(w *strings.Builder, ops []history.Op) {
	if !t.opts.sessions {
		return
	}
	var (
		names            []string
		starts, renewals int64
	)
	with := map[string]bool{}
	for _, c := range t.clients {
		if c.sessions != nil {
			names = append(names, c.ID)
			with[c.ID] = true
			starts += c.sessions.starts.Load()
			renewals += c.sessions.renewed.Load()
		}
	}
	var own [2]int64 // lock-row renewals by clients without, with sessions
	for _, o := range ops {
		if o.Kind == history.Renew && o.Outcome == history.OK {
			if with[o.Client] {
				own[1]++
			} else {
				own[0]++
			}
		}
	}
	fmt.Fprintf(w, "Sessions: %s held through their Scope's session: %d sessions started, %d session renewals; lock rows renewed on their own: %d by them, %d by the others\n",
		strings.Join(names, ", "), starts, renewals, own[1], own[0])
}
