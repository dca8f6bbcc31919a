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
	id      string    // "" while there is none: the next write begins one
	pending bool      // id is begun, not started: no write naming it acknowledged
	anchor  time.Time // the local send time of the last acknowledged write
	at      time.Time // its commit timestamp
	members map[*Lease]func(error)
	users   int  // calls under way that write the id into rows
	running bool // the renewal loop runs
}

// sessionStore renews a Scope's session rows (the write that names a
// session first inserts its row: session.next).
type sessionStore interface {
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
// rows (next gives the id to write); done ends the use. While any use
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

// next returns the id of the session a write about to be sent names, and,
// if that write starts the session, the row it inserts beside what it
// names (nil if the session is started: its first write was acknowledged).
// A session is started by the first acknowledged write that names it,
// which inserts its row in the same commit (sessionInsert): no row ever
// names a session whose row that commit did not write, and a start costs
// no RPC of its own. Until one is acknowledged (started), every write
// that names the session inserts the row (a later insert, an
// insert-or-update, is a renewal); the writer reports how its write ended
// (started, unstarted). A session left unrenewed for a renewal interval
// with nothing held through it (its loop stopped) is let go and another
// begun, so that a row is not granted on a session about to lapse. next
// makes no Spanner call.
func (s *session) next() (string, *sessionRow) {
	s.mu.Lock()
	lost := s.expireLocked()
	if s.id == "" {
		s.id, s.pending = s.newID(), true
	}
	id, pending := s.id, s.pending
	if !pending {
		s.runLocked()
	}
	s.mu.Unlock()
	notify(lost)
	if pending {
		return id, &sessionRow{id: id, owner: s.owner, lease: s.lease}
	}
	return id, nil
}

// expireLocked lets the started session go if it is unrenewed for a
// renewal interval with nothing held through it, and loses it if its
// members' renewals failed for a whole lease (s.mu held); it returns the
// onLost calls to make once s.mu is released.
func (s *session) expireLocked() []func(error) {
	since := s.clk.Now().Sub(s.anchor)
	if s.id == "" || s.pending || since < s.interval {
		return nil
	}
	if len(s.members) == 0 {
		s.log.Debug("session let go unused", "session", s.id)
		s.id = ""
		return nil
	}
	if since >= s.lease {
		return s.loseLocked("renewals failed for a whole lease (" + s.lease.String() + ")")
	}
	return nil
}

// started reports that a write that named session id and inserted its
// row (next's row) committed at Spanner time at, sent at local time sent:
// the session is started, anchored at sent, and its renewal loop runs,
// unless the answer came a lease or more after sent (the session is then
// let go unstarted). If another write started it first, this one counts
// as a renewal of it (renew's acknowledgement). A session lost or let go
// since (id no longer the session's) is not taken up again: the write's
// leases are refused (admit: errSessionChanged), and its row lapses after
// a lease.
func (s *session) started(id string, sent, at time.Time) {
	s.mu.Lock()
	if s.id != id {
		s.mu.Unlock()
		return
	}
	var lost []func(error)
	switch {
	case s.pending && s.clk.Now().Sub(sent) >= s.lease:
		// Answered a lease or more after it was sent: stale before it is
		// used, as a renewal so late would lose the session. Decided
		// here, not by the loop it would start, which would race the
		// writer's next step.
		s.log.Debug("session's start answered a lease late; let go", "session", id)
		s.id, s.pending = "", false
	case s.pending:
		s.pending, s.anchor, s.at = false, sent, at
		s.log.Debug("session started", "session", id)
	default:
		lost, _ = s.ackLocked(sent, at)
	}
	if s.id != "" {
		s.runLocked() // renewed while used: a waiting entry names it
	}
	s.mu.Unlock()
	notify(lost)
}

// unstarted reports that a write that would have started session id (it
// inserted its row) failed, its outcome unknown: unless another
// write started it, the id is not named again (the next write begins
// another), so that no later write revives a row that may have been
// written long before.
func (s *session) unstarted(id string) {
	s.mu.Lock()
	if s.id == id && s.pending {
		s.id, s.pending = "", false
	}
	s.mu.Unlock()
}

// sessionRow is a session's row as the write that starts it inserts it.
type sessionRow struct {
	id, owner string
	lease     time.Duration
}

// alive reports whether session id is the session's, started, and its
// last acknowledged write is less than a lease old by the local clock:
// rows that name it may still be live.
func (s *session) alive(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return id != "" && s.id == id && !s.pending && s.clk.Now().Sub(s.anchor) < s.lease
}

// live returns the started session's id and the local send time of its
// last acknowledged write; "" if there is none. It begins none.
func (s *session) live() (string, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending {
		return "", time.Time{}
	}
	return s.id, s.anchor
}

// admit makes lease l, whose row was written naming session id, a member
// of the session: it is renewed with it and lost with it (onLost, at most
// once, with an error matching ErrLeaseLost). It is the session's part of
// the grant rule (freshen): a session whose last acknowledged write is
// older than a renewal interval by the local clock is renewed first. It
// returns errSessionChanged if id is no longer the session's, or is not
// started (the write's caller reports its acknowledgement first:
// started), or the error of a renewal, made through st (the caller's: the
// loop may be renewing at the same time). The returned leave ends the
// membership.
func (s *session) admit(ctx context.Context, st sessionStore, l *Lease, id string, onLost func(error)) (leave func(), err error) {
	for range maxFreshen {
		s.mu.Lock()
		if s.id != id || s.pending {
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
		if id == "" || s.pending || !first && len(s.members)+s.users == 0 {
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
	default:
		var ok bool
		if lost, ok = s.ackLocked(sent, at); !ok {
			lerr = ErrLeaseLost
		}
	}
	s.mu.Unlock()
	notify(lost)
	return lerr
}

// ackLocked takes in an acknowledged write of the session, sent at local
// time sent and committed at Spanner time at (s.mu held): it moves the
// session's anchor and commit timestamp on, and those of its members;
// one that committed a whole lease or more after the last acknowledged
// write may have come after a takeover, so it loses the session: ok
// false, and its members' onLost calls to make once s.mu is released.
func (s *session) ackLocked(sent, at time.Time) (lost []func(error), ok bool) {
	if at.Sub(s.at) >= s.lease {
		return s.loseLocked(fmt.Sprintf("a renewal committed %v after the last, past its lease (%v): another holder may have taken its locks over", at.Sub(s.at), s.lease)), false
	}
	s.anchor, s.at = maxTime(s.anchor, sent), maxTime(s.at, at)
	for l := range s.members {
		l.setAnchor(latest(l.lastAnchor(), s.anchor))
		l.setRenewedAt(s.at)
	}
	return nil, true
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
	s.id, s.pending, s.members = "", false, map[*Lease]func(error){}
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
