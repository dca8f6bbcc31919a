package spanmutex

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A session keeps every lease of a Scope alive with one write per renewal
// interval, whatever the number of leases (WithSessions). It is a row of
// the sessions table (the mutex table's name followed by
// ddl.SessionsSuffix); a lock row held through it names it (Session) and
// declares sessionHeldLease as its own lease, so that nobody who does not
// read sessions ever takes it over.
//
// The rule (doc/design.md, section 5.3): a session is live while its row's
// RenewedAt plus its LeaseMicros has not passed by Spanner's clock, and a
// row held through it is live while the session is (or while the row's own
// RenewedAt plus the session's lease has not passed: the acquisition counts
// as a renewal). Its holder knows the commit timestamp of each of its
// acknowledged writes: a renewal that commits a whole lease or more after
// the last acknowledged one may have come after a takeover, so it loses
// every lease of the session, as a renewal that finds a row taken over
// loses that row's. Locally, as keepAlive does for one lease, every lease
// of the session is lost once the local time since the send of the last
// acknowledged write reaches the lease.
type session struct {
	st       sessionStore
	clk      clock
	lease    time.Duration
	interval time.Duration
	owner    string
	log      *slog.Logger
	newID    func() string

	mu      sync.Mutex
	id      string    // "" while there is none: the next use starts one
	anchor  time.Time // the local send time of the last acknowledged write
	at      time.Time // its commit timestamp
	members map[*Lease]func(error)
	users   int  // calls under way that write the id into rows
	running bool // the renewal loop runs
	// starting is the start under way; nil if none is.
	starting *sessionStart
}

// sessionStart is a start of a session under way: done is closed when it
// ends, err then set if it failed.
type sessionStart struct {
	done chan struct{}
	err  error
}

// sessionStore writes a Scope's session rows.
type sessionStore interface {
	// startSession inserts session id, declaring lease, and returns the
	// commit timestamp.
	startSession(ctx context.Context, id, owner string, lease time.Duration) (time.Time, error)
	// renewSession sets the session's RenewedAt to the commit timestamp,
	// which it returns; an error matching errSessionGone if the row is
	// not there.
	renewSession(ctx context.Context, id string) (time.Time, error)
}

// sessionHeldLease is the lease a row held through a session declares in
// LeaseMicros: a century, so that a contender that does not read the
// sessions table (an older spanmutex) waits instead of taking the row over
// when its own RenewedAt grows old. Contenders that read it judge the row
// by its session (row.withSession).
const sessionHeldLease = 100 * 365 * 24 * time.Hour

// errSessionGone: the session's row is not there (deleted, or expired by
// the table's row deletion policy): it lapsed long ago.
var errSessionGone = status.Error(codes.NotFound, "spanmutex: the session's row is gone")

// errSessionChanged: the session a lease was written under was lost and
// another started; the lease cannot be granted through it. Transient: the
// caller hands the lock on and waits again.
var errSessionChanged = status.Error(codes.Unavailable, "spanmutex: the session the lock was taken under was lost")

func newSession(st sessionStore, cfg *config) *session {
	return &session{st: st, clk: forClock(cfg.clock, "session"), lease: cfg.lease, interval: cfg.renewEvery(), owner: cfg.owner,
		log: cfg.logger, newID: uuid.NewString, members: map[*Lease]func(error){}}
}

// use counts a use of the session, for a call that will write its id into
// rows (current gives the id to write); done ends the use. While any use
// or member lease remains, the session is renewed.
func (s *session) use() (done func()) {
	s.mu.Lock()
	s.users++
	s.mu.Unlock()
	return sync.OnceFunc(func() {
		s.mu.Lock()
		s.users--
		s.mu.Unlock()
	})
}

// current returns the id of the live session, for a write about to name
// it, starting one if there is none. A session left unrenewed for a
// renewal interval with nothing held through it (its loop stopped) is let
// go and another started: the start costs what a renewal would, and a row
// written under it is not granted on a session about to lapse. The
// session a call starts is its answer, however late the start was
// answered (admit renews it before a grant). Calls that find a start
// under way wait for it (on a channel, never a mutex held across a Spanner
// call) and share its outcome, a failure included: none of them races
// the others to start the next (the simulation replays only what turns
// order).
func (s *session) current(ctx context.Context) (string, error) {
	for {
		s.mu.Lock()
		var lost []func(error)
		if s.id != "" && s.clk.Now().Sub(s.anchor) >= s.interval {
			if len(s.members) == 0 {
				s.log.Debug("session let go unused", "session", s.id)
				s.id = ""
			} else if s.clk.Now().Sub(s.anchor) >= s.lease {
				lost = s.loseLocked("renewals failed for a whole lease (" + s.lease.String() + ")")
			}
		}
		switch {
		case s.id != "":
			id := s.id
			s.runLocked()
			s.mu.Unlock()
			notify(lost)
			return id, nil
		case s.starting != nil:
			started := s.starting
			s.mu.Unlock()
			notify(lost)
			select {
			case <-started.done:
			case <-ctx.Done():
				return "", ctx.Err()
			}
			if started.err != nil {
				return "", started.err
			}
		default:
			started := &sessionStart{done: make(chan struct{})}
			s.starting = started
			s.mu.Unlock()
			notify(lost)
			err := s.begin(ctx)
			s.mu.Lock()
			s.starting, started.err = nil, err
			close(started.done)
			id := s.id
			if err == nil && id != "" {
				s.runLocked() // renewed while used: a waiting entry names it
			}
			s.mu.Unlock()
			switch {
			case err != nil:
				return "", err
			case id != "":
				// Named even if its start was answered a renewal
				// interval late: starting another would meet the same
				// delay, for ever (a slow link), and the grant renews
				// it first (admit).
				return id, nil
			}
		}
	}
}

// alive reports whether session id is the session's, and its last
// acknowledged write is less than a lease old by the local clock: rows
// that name it may still be live.
func (s *session) alive(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return id != "" && s.id == id && s.clk.Now().Sub(s.anchor) < s.lease
}

// live returns the session's id and the local send time of its last
// acknowledged write; "" if there is none. It starts nothing.
func (s *session) live() (string, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id, s.anchor
}

// begin starts a session: its row, under a fresh id. The start is given
// up after a lease, whatever ctx allows: one answered later is stale
// before it is used.
func (s *session) begin(ctx context.Context) error {
	id := s.newID()
	sent := s.clk.Now()
	bctx, cancel := context.WithTimeout(ctx, s.lease)
	defer cancel()
	at, err := s.st.startSession(bctx, id, s.owner, s.lease)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.id, s.anchor, s.at = id, sent, at
	s.mu.Unlock()
	s.log.Debug("session started", "session", id)
	return nil
}

// admit makes lease l, whose row was written naming session id, a member
// of the session: it is renewed with it and lost with it (onLost, at most
// once, with an error matching ErrLeaseLost). It is the session's part of
// the grant rule (freshen): a session whose last acknowledged write is
// older than a renewal interval by the local clock is renewed first. It
// returns errSessionChanged if id is no longer the session's, or the error
// of a renewal, made through st (the caller's: the loop may be renewing
// at the same time). The returned leave ends the membership.
func (s *session) admit(ctx context.Context, st sessionStore, l *Lease, id string, onLost func(error)) (leave func(), err error) {
	for range maxFreshen {
		s.mu.Lock()
		if s.id != id {
			s.mu.Unlock()
			return nil, errSessionChanged
		}
		if s.clk.Now().Sub(s.anchor) < s.interval {
			s.members[l], l.through = onLost, s
			l.setAnchor(latest(l.lastAnchor(), s.anchor))
			l.setRenewedAt(s.at)
			s.runLocked()
			s.mu.Unlock()
			return func() { s.leave(l) }, nil
		}
		s.mu.Unlock()
		sctx, cancel := context.WithTimeout(ctx, s.lease)
		err := s.renew(sctx, st, id)
		cancel()
		if err != nil {
			return nil, err
		}
	}
	return nil, errSlowRenewals
}

// holds reports whether lease l is a member of the session.
func (s *session) holds(l *Lease) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.members[l]
	return ok
}

// leave ends lease l's membership.
func (s *session) leave(l *Lease) {
	s.mu.Lock()
	delete(s.members, l)
	s.mu.Unlock()
}

// runLocked starts the renewal loop unless it runs (s.mu held).
func (s *session) runLocked() {
	if !s.running {
		s.running = true
		go s.loop()
	}
}

// loop renews the session every interval after its last acknowledged
// write (a quarter interval after a failure) while it has uses or members,
// and loses it once renewals have failed for a whole lease.
func (s *session) loop() {
	var retryAt time.Time // after a failure: when to try again
	for first := true; ; first = false {
		s.mu.Lock()
		id, anchor := s.id, s.anchor
		// Whether uses remain is judged when a timer wakes the loop, not
		// as it starts: the call that started it may be ending at the
		// same instant, and the simulation replays only what turns order.
		if id == "" || !first && len(s.members)+s.users == 0 {
			s.running = false
			s.mu.Unlock()
			return
		}
		now := s.clk.Now()
		if now.Sub(anchor) >= s.lease {
			lost := s.loseLocked("renewals failed for a whole lease (" + s.lease.String() + ")")
			s.running = false
			s.mu.Unlock()
			notify(lost)
			return
		}
		s.mu.Unlock()
		due := maxTime(anchor.Add(s.interval), retryAt)
		if wait := minTime(due, anchor.Add(s.lease)).Sub(now); wait > 0 {
			c, _ := s.clk.NewTimer(wait)
			<-c
			continue // look again: uses may have ended, the session been lost, or the lease passed
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.lease-now.Sub(anchor))
		err := s.renew(ctx, s.st, id)
		cancel()
		retryAt = time.Time{}
		if err != nil && !errors.Is(err, errSessionChanged) && !errors.Is(err, ErrLeaseLost) {
			s.log.Warn("session renewal failed; retrying", "session", id, "err", err)
			retryAt = s.clk.Now().Add(max(s.interval/4, time.Millisecond))
		}
	}
}

// renew writes one renewal of session id through st. On its acknowledgement it moves
// the session's anchor and commit timestamp on, and those of its members;
// if it committed a whole lease or more after the last acknowledged write,
// or found the row gone, it loses the session (and returns an error
// matching ErrLeaseLost). A renewal of unknown outcome moves nothing.
func (s *session) renew(ctx context.Context, st sessionStore, id string) error {
	sent := s.clk.Now()
	at, err := st.renewSession(ctx, id)
	s.mu.Lock()
	if s.id != id {
		s.mu.Unlock()
		return errSessionChanged
	}
	var lost []func(error)
	var lerr error
	switch {
	case errors.Is(err, errSessionGone):
		lost, lerr = s.loseLocked("its row is gone"), ErrLeaseLost
	case err != nil:
		s.mu.Unlock()
		return err
	case at.Sub(s.at) >= s.lease:
		lost, lerr = s.loseLocked(fmt.Sprintf("a renewal committed %v after the last, past its lease (%v): another holder may have taken its locks over", at.Sub(s.at), s.lease)), ErrLeaseLost
	default:
		s.anchor, s.at = maxTime(s.anchor, sent), maxTime(s.at, at)
		for l := range s.members {
			l.setAnchor(latest(l.lastAnchor(), s.anchor))
			l.setRenewedAt(s.at)
		}
	}
	s.mu.Unlock()
	notify(lost)
	return lerr
}

// loseLocked ends the session (s.mu held): its members are lost, the next
// use starts another. It returns the members' onLost calls, each bound to
// its error, for the caller to make once s.mu is released.
func (s *session) loseLocked(why string) []func(error) {
	s.log.Warn("session lost: every lease held through it is lost", "session", s.id, "reason", why)
	members := slices.SortedFunc(maps.Keys(s.members), func(a, b *Lease) int {
		return cmp.Or(cmp.Compare(a.name, b.name), cmp.Compare(a.token, b.token))
	})
	var lost []func(error)
	for _, l := range members { // in a fixed order: the simulation replays it
		onLost, err := s.members[l], &leaseLostError{Name: l.name, Token: l.token, Reason: "its session was lost: " + why}
		lost = append(lost, func(error) { onLost(err) })
	}
	s.id, s.members = "", map[*Lease]func(error){}
	return lost
}

// notify makes the onLost calls loseLocked returned.
func notify(lost []func(error)) {
	for _, f := range lost {
		f(nil)
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
