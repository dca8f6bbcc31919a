package main

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/spanner/apiv1/spannerpb"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/spanmutex/spanmutex"
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
// session looks silent from its acquisition on, which makes their
// takeover check weaker for it, never wrong; the fenced writes, tokens,
// disjoint holders and the table's final state are checked as for any
// lease. The session's rule is checked here (checkSessionTakeovers), from
// what the session clients' wire showed: which leases were taken through
// which session, and when each session was written.

// sessionClient reports whether client i (from 0) holds through sessions:
// with --sessions, every other client, the pattern shifted every four
// clients (c1, c3, c6, c8, c9, ...), so that with the mismatched fault
// each lease it declares (--lease, a third, three times) is declared by
// clients with and without sessions alike.
func (o *tortureOptions) sessionClient(i int) bool {
	return o.sessions && i%2 == (i/4)%2
}

// sessionWrites records, from the wire, a client's commits of its
// sessions' rows (a start, an insert in the commit of the first write
// that names the session; a renewal, a Commit of its own, tag
// spanmutex.session) and of lock rows it took through a session (the
// holder's write names the session), each with its commit timestamp.
// Commits whose answer it did not see (failed, or lost in transit before
// it reached the interceptor) are missing: a session then looks renewed
// earlier than it was, which can hide a violation from
// checkSessionTakeovers, never invent one.
type sessionWrites struct {
	locks, table    string // the mutex table, the sessions table
	starts, renewed atomic.Int64

	mu     sync.Mutex
	writes map[string][]time.Time // by session: its starts' and renewals' commits
	holds  map[holdKey]sessionHold
}

// holdKey is one lease of a lock: its name and token.
type holdKey struct {
	name  string
	token int64
}

// sessionHold is a lease taken through a session, as its commit showed it.
type sessionHold struct {
	session string
	commit  time.Time
}

// unary is a gRPC interceptor that records the commits Spanner
// acknowledged of the sessions table, and of lock rows taken through a
// session.
func (s *sessionWrites) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	cr, ok := req.(*spannerpb.CommitRequest)
	resp, answered := reply.(*spannerpb.CommitResponse)
	if err != nil || !ok || !answered || resp.GetCommitTimestamp() == nil {
		return err
	}
	at := resp.GetCommitTimestamp().AsTime()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range cr.GetMutations() {
		s.record(m, at)
	}
	return err
}

// record records mutation m, committed at at, if it writes a session's
// row or takes a lock through one (s.mu held).
func (s *sessionWrites) record(m *spannerpb.Mutation, at time.Time) {
	switch w := cmp.Or(m.GetInsert(), m.GetUpdate(), m.GetInsertOrUpdate()); {
	case w == nil || len(w.GetValues()) != 1:
	case w.GetTable() == s.table:
		if m.GetInsertOrUpdate() != nil {
			s.starts.Add(1)
		} else {
			s.renewed.Add(1)
		}
		id := w.GetValues()[0].GetValues()[0].GetStringValue()
		s.writes[id] = append(s.writes[id], at)
	case w.GetTable() == s.locks:
		col := map[string]*structpb.Value{}
		for i, c := range w.GetColumns() {
			col[c] = w.GetValues()[0].GetValues()[i]
		}
		session, state := col["Session"].GetStringValue(), col["State"].GetStringValue()
		token, err := strconv.ParseInt(col["Token"].GetStringValue(), 10, 64) // INT64 travels as a string
		if session != "" && state == string(spanmutex.StateStarted) && err == nil {
			s.holds[holdKey{col["Name"].GetStringValue(), token}] = sessionHold{session: session, commit: at}
		}
	}
}

// newSessionWrites records the session commits of one client.
func newSessionWrites() *sessionWrites {
	return &sessionWrites{locks: ddl.DefaultMutexTable, table: ddl.DefaultMutexTable + ddl.SessionsSuffix,
		writes: map[string][]time.Time{}, holds: map[holdKey]sessionHold{}}
}

// lastWrite returns the latest commit of session id before t, and
// whether there is one.
func (s *sessionWrites) lastWrite(id string, t time.Time) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var last time.Time
	for _, at := range s.writes[id] {
		if at.Before(t) && at.After(last) {
			last = at
		}
	}
	return last, !last.IsZero()
}

// held returns how many leases were taken through a session.
func (s *sessionWrites) held() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.holds)
}

// hold returns the lease k if it was taken through a session.
func (s *sessionWrites) hold(k holdKey) (sessionHold, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.holds[k]
	return h, ok
}

// sessionTakeoverTolerance is the slack of checkSessionTakeovers, as the
// history's takeover check allows (commit timestamps, one clock).
const sessionTakeoverTolerance = 10 * time.Millisecond

// checkSessionTakeovers checks each takeover in ops of a lease held
// through a session: it committed only once the lease its holder declared
// had passed since the later of its acquisition and its session's last
// write before the takeover, by commit timestamps (the session's rule,
// doc/design.md 5.3). It returns how many it checked and the violations.
func (t *torture) checkSessionTakeovers(ops []history.Op) (checked int, violations []string) {
	for _, a := range ops {
		if a.Kind != history.Acquire || a.Outcome != history.OK || !a.Takeover || a.Commit.IsZero() {
			continue
		}
		for _, c := range t.clients {
			if c.sessions == nil {
				continue
			}
			h, ok := c.sessions.hold(holdKey{a.Name, a.Token - 1})
			if !ok {
				continue
			}
			checked++
			last := h.commit
			if w, ok := c.sessions.lastWrite(h.session, a.Commit); ok && w.After(last) {
				last = w
			}
			if silent := a.Commit.Sub(last); silent < c.lease-sessionTakeoverTolerance {
				violations = append(violations, fmt.Sprintf("%s: token %d (%s) took over token %d, held by %s through session %s, %v after its last sign of life, within the lease %v",
					a.Name, a.Token, a.Client, a.Token-1, c.ID, h.session, silent, c.lease))
			}
		}
	}
	return checked, violations
}

// writeSessions writes, with --sessions, which clients held through
// sessions, the session commits they made, the lock rows' own renewals
// seen on the wire of each kind of client (those of a client with
// sessions renew locks handed to it by an Unlock, which it renews on its
// own), and the check of takeovers of leases held through a session. It
// returns the violations of that check.
func (t *torture) writeSessions(w *strings.Builder, ops []history.Op) int {
	if !t.opts.sessions {
		return 0
	}
	var (
		names                   []string
		starts, renewals, holds int64
	)
	with := map[string]bool{}
	for _, c := range t.clients {
		if c.sessions != nil {
			names = append(names, c.ID)
			with[c.ID] = true
			starts += c.sessions.starts.Load()
			renewals += c.sessions.renewed.Load()
			holds += int64(c.sessions.held())
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
	fmt.Fprintf(w, "Sessions: %s held through their Scope's session: %d leases taken through a session, %d sessions started, %d session renewals; lock rows renewed on their own: %d by them, %d by the others\n",
		strings.Join(names, ", "), holds, starts, renewals, own[1], own[0])
	checked, bad := t.checkSessionTakeovers(ops)
	verdict := "ok"
	if len(bad) > 0 {
		verdict = fmt.Sprintf("VIOLATED %d times", len(bad))
	}
	fmt.Fprintf(w, "  session-takeover  %s  %d takeovers of leases held through a session, against the session's last write and the lease its holder declared\n", verdict, checked)
	for _, v := range bad {
		fmt.Fprintf(w, "  VIOLATION (session-takeover): %s\n", v)
	}
	return len(bad)
}
