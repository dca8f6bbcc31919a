package spanmutex

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
)

// A Scope is what the Locks of one process share: Locks made with the same
// Scope coordinate in memory, as the contenders of one process, and Locks of
// different Scopes behave exactly as contenders in different processes,
// whether or not they share an address space or a *spanner.Client.
//
// Sharing saves Spanner work and time, never decides ownership: every
// decision on ownership is still taken in a read-write transaction on
// Spanner's clock. What is shared (a gate, group commits of joins, the
// process's view of who holds a lock, wake-ups) is in doc/design.md,
// section 5.1.
//
// Give every Lock of a process the same Scope (one per process is the usual
// choice: NewScope in main, passed with WithScope). A Lock made without
// WithScope gets a Scope of its own. A Scope's zero value is not usable; it
// is safe for concurrent use. It holds state only while calls of its Locks
// are under way (and, per table, whether it has the optional Queued
// column), and a UDP socket while its waiters wait and for a minute
// after (see NewScope); Close stops listening at once.
type Scope struct {
	// id names the Scope in its waiters' ids (see newWaiterID), so that a
	// takeover from a silent holder can tell which queue entries went
	// silent with it: those of its process.
	id string
	// ids, if set, makes the UUIDs of waiter ids instead of uuid.NewV7
	// (the simulation's seeded source).
	ids func() string
	// ctxFirst, set only by the simulation (nil otherwise), picks from its
	// seed what a select would pick at random when a call whose ctx has
	// ended finds the gate free (localLock.lockGate): true, ctx's end.
	ctxFirst func() bool
	mu       sync.Mutex
	locks    map[localKey]*localLock
	wakes    wakeBoard
	// listening is the Scope's UDP listener, nil while it has none;
	// onDemand, whether it starts one when a waiter needs it
	// (scope_listen.go). lmu guards starting and stopping it, and closed
	// (Close was called), retryAt (when to try again after failing to
	// listen) and warned (the failure was logged).
	listening atomic.Pointer[listener]
	onDemand  bool
	idle      time.Duration // idleListen; shorter in tests
	lmu       sync.Mutex
	closed    bool
	retryAt   time.Time
	warned    bool
	sent      atomic.Int64
	received  atomic.Int64
	// headPoll is WithHeadPoll's interval, 0 if not set.
	headPoll time.Duration
	// sessionsOn: WithSessions; sessions holds the Scope's sessions (under
	// mu), made on first use (scope_session.go).
	sessionsOn bool
	sessions   map[sessionKey]*session
	// queuedCols remembers, per table (tableKey), whether it has the
	// Queued column (a queuedCheck, queue_mark.go): its Locks check it
	// once, not once each (an answer of no, once a minute).
	queuedCols sync.Map
	// dialects holds the dialects of its primitives' databases, each
	// declared one checked (declaredKey), or each read (readKey), once
	// (dialect.go).
	dialects sync.Map
}

// tableKey names a mutex table in a database.
type tableKey struct{ database, table string }

// NewScope returns a Scope for the Locks of one process. Unless made
// WithoutWakeUps, it listens for wake-ups from other processes while its
// waiters need them: from the first time one of them queues, on an
// ephemeral UDP port of the host's own address (the first private IPv4
// address of an interface that is up), until none has for a minute. An
// Unlock in another process that hands the lock to one of its waiters then
// wakes it at once instead of at its next poll. Where it cannot listen, it
// logs why once and its waiters poll; ListenScope sets the address.
func NewScope(opts ...ScopeOption) *Scope {
	s := &Scope{id: newScopeID(), locks: map[localKey]*localLock{}, wakes: wakeBoard{waiting: map[string]chan wakeUp{}}, onDemand: true, idle: idleListen}
	for _, o := range opts {
		o(s)
	}
	return s
}

// newScopeID returns a random Scope id: the last group of a UUID's text.
func newScopeID() string { return uuid.NewString()[24:] }

// newWaiterID returns a fresh id for a waiter (and its lease) of this
// Scope: a version 7 UUID whose last group (48 of its random bits) is the
// Scope's id. The waiters of one process that join in one commit share its
// timestamp and are queued in the order of their ids, which is the order in
// which their Lock calls began (uuid.NewV7 is monotonic in a process, in
// the bits before the last group); the last group says which Scope the
// entry belongs to (scopeOf). The id fits the WaiterID column's 36
// characters.
func (s *Scope) newWaiterID() string {
	if s.ids != nil {
		return s.ids()[:24] + s.id
	}
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.NewString()[:24] + s.id
	}
	return id.String()[:24] + s.id
}

// scopeOf returns the Scope id in waiter id: its last 12 characters.
func scopeOf(id string) string {
	if len(id) != 36 {
		return ""
	}
	return id[24:]
}

// WithScope makes a Lock, or an Election's candidate, one of the
// contenders of scope (see Scope). For a
// run-once Mutex, a Scope that listens (NewScope's does, on demand) wakes
// Run's waiters as soon as the section is recorded DONE or FAILED, instead
// of at their next backoff; a Mutex shares nothing else through it. Without
// WithScope, a Lock or a Mutex gets a Scope of its own.
func WithScope(scope *Scope) ElectionOption {
	return electionOption(func(c *config) { c.scope = scope })
}
