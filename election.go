package spanmutex

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"cloud.google.com/go/spanner"

	"github.com/spanmutex/spanmutex/internal/names"
)

// Election elects one leader at a time among the candidates that campaign
// under one name. It is a Lock whose holder is the leader: the same row,
// queue, tokens and leases, so candidates are served first come, first
// served, a leader that resigns hands over at once, and a leader that stops
// renewing is replaced once its declared lease has passed by Spanner's
// clock. The value a leader campaigned with is recorded as the row's owner,
// where Leader and Observe read it.
//
// An Election is one candidate: it campaigns for at most one leadership at
// a time. Leader and Observe may be called by any instance, candidate or
// not, and all methods are safe for concurrent use. An Election not made
// by NewElection (its zero value, or nil) does nothing: Campaign, Leader
// and Run return an error wrapping ErrInvalidConfig, Observe a closed
// channel, Name "".
type Election struct {
	client *spanner.Client
	name   string
	opts   []LockOption // of the Lock each Campaign makes, without the owner
	cfg    config
	sp     *spannerStore // its Campaigns share its dialect
	// rows is what Observe reads the row's present and history with: sp,
	// or the simulation's store. It does not read sessions: Observe
	// reports the terms it sees held, alive or not, at one read a poll.
	rows historyReader
	// live is what Leader reads the row with: a store of the Scope's that
	// learns whether the table has sessions (marks), so that a term held
	// through one is judged by it, not by the century its row declares.
	live *spannerStore

	// observeEvery is how often Observe reads the row (defaultObserveEvery);
	// tests lengthen it to exercise how Observe finds the terms in between.
	observeEvery time.Duration

	mu     sync.Mutex
	active bool // a Campaign is under way, or its leadership has not ended
}

// defaultObserveEvery is how often Observe reads the lock's row: one
// single-use read by key per observer. It bounds how late a change is
// reported, not which changes are: terms shorter than it are found by
// reading the row's history (see Observe).
const defaultObserveEvery = 100 * time.Millisecond

// NewElection returns a candidate of the election name, stored in client's
// database like a Lock of that name. It takes the options of NewLock but
// WithOwner: a candidate's owner identity is the value it campaigns with.
// Its lease is the lease a leader declares; pass WithScope(ListenScope(...))
// to be woken at once when leadership is handed over to it from another
// process, and WithScope(NewScope(WithSessions())) to hold a term won while
// nobody led (or by takeover) through the Scope's session, with the
// Scope's locks, at one renewal for all. Every error wraps ErrInvalidConfig.
func NewElection(client *spanner.Client, name string, opts ...ElectionOption) (*Election, error) {
	if client == nil {
		return nil, errNilClient("NewElection")
	}
	cfg, err := configure(name, opts) // configure.go
	if err != nil {
		return nil, err
	}
	sp := cfg.newStore(client)
	// The Locks of its Campaigns share its Scope (the one given, or its
	// own), and with it the database's dialect, learnt once.
	lockOpts := make([]LockOption, 0, len(opts)+1)
	for _, o := range opts {
		lockOpts = append(lockOpts, o)
	}
	lockOpts = append(lockOpts, WithScope(cfg.scope))
	live := cfg.newStore(client)
	live.shared = cfg.scope // what its Locks learnt of the table's columns
	return &Election{client: client, name: name, opts: lockOpts, cfg: cfg, sp: sp, rows: sp, live: live,
		observeEvery: defaultObserveEvery}, nil
}

// made returns errNotMade unless NewElection made e.
func (e *Election) made() error {
	if e == nil || e.sp == nil {
		return errNotMade("Election", "NewElection")
	}
	return nil
}

// Campaign blocks until this candidate leads, and returns its leadership,
// whose value is value (1-256 characters, recorded as the lock's owner).
// Candidates lead in the order they began to campaign. If ctx ends first it
// returns an error matching ErrNotObtained and ctx.Err(), having left the
// queue; it returns the errors of Lock.Lock otherwise. A Campaign while this
// Election campaigns or leads returns an error: end the leadership with
// Resign first.
func (e *Election) Campaign(ctx context.Context, value string) (*Leadership, error) {
	if ctx == nil {
		return nil, errNilContext
	}
	if err := e.made(); err != nil {
		return nil, err
	}
	if err := names.Text("value", value, maxNameLength); err != nil {
		return nil, fmt.Errorf("spanmutex: Campaign for %q: %v", e.name, err)
	}
	if !e.begin() {
		return nil, fmt.Errorf("spanmutex: Campaign for %q: this Election already campaigns or leads; Resign first, or use another Election", e.name)
	}
	l, err := NewLock(e.client, e.name, append(e.opts[:len(e.opts):len(e.opts)], WithOwner(value))...)
	if err != nil {
		e.end()
		return nil, err
	}
	lease, err := l.Lock(ctx)
	if err != nil {
		e.end()
		return nil, err
	}
	return newLeadership(e, l, lease, value), nil
}

// begin marks a campaign under way, unless one already is.
func (e *Election) begin() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.active {
		return false
	}
	e.active = true
	return true
}

// end marks that this Election neither campaigns nor leads.
func (e *Election) end() {
	e.mu.Lock()
	e.active = false
	e.mu.Unlock()
}

// LeaderInfo describes one leadership term.
type LeaderInfo struct {
	// Value is what the leader gave Campaign.
	Value string
	// Token is the term's fencing token: every later term's is higher.
	Token int64
	// Since is when the term began (the Spanner commit timestamp of the
	// acquisition or hand-off).
	Since time.Time
}

// Leader returns the current leader, read with a strong read: the leader
// whose lease had not run out at the read's timestamp, by Spanner's clock.
// A term held through a session (WithSessions) is live while its session
// is, as for every contender (doc/design.md, section 5.3). It returns an
// error matching ErrNoLeader when nobody leads (no candidate has led yet,
// the last leader resigned with nobody waiting, or its lease or session
// ran out unrenewed).
func (e *Election) Leader(ctx context.Context) (LeaderInfo, error) {
	if ctx == nil {
		return LeaderInfo{}, errNilContext
	}
	if err := e.made(); err != nil {
		return LeaderInfo{}, err
	}
	e.live.marks(ctx) // whether to read the row's session; a failed check reads without, as before sessions
	r, err := e.live.read(ctx, e.name)
	if err != nil {
		return LeaderInfo{}, err
	}
	if !holderLive(r, e.cfg.lease) {
		return LeaderInfo{}, fmt.Errorf("%w: election %q (state %s, last token %d)", ErrNoLeader, e.name, stateName(r), r.Token)
	}
	return termOf(r), nil
}

// stateName names r's state for a message: NONE for an absent row.
func stateName(r row) State {
	if !r.Exists {
		return "NONE"
	}
	return r.State
}

// termOf is the term r shows held.
func termOf(r row) LeaderInfo {
	return LeaderInfo{Value: r.Owner, Token: r.Token, Since: r.StartedAt.UTC()}
}

// Leadership is this instance's term as leader, from the Campaign that won
// it until Resign or its loss. Its methods are safe for concurrent use.
//
// Act as leader only while Context is not done, and fence what you change:
// Guard inside your own Spanner transactions, or pass Token to a Fence. A
// leader that was paused past its lease learns of the loss from Done when it
// resumes, but it may commit nothing fenced after another leader took over:
// the takeover raised the token, so Guard and Fence refuse it.
type Leadership struct {
	e     *Election
	lock  *Lock
	lease *Lease
	value string

	ctx    context.Context
	cancel context.CancelCauseFunc

	endOnce sync.Once
	endErr  error
}

// newLeadership starts the term lease holds, and a watch that ends it when
// the lease is lost.
func newLeadership(e *Election, l *Lock, lease *Lease, value string) *Leadership {
	ctx, cancel := context.WithCancelCause(context.Background())
	ld := &Leadership{e: e, lock: l, lease: lease, value: value, ctx: ctx, cancel: cancel}
	go func() {
		select {
		case <-lease.Done():
			cancel(lease.Err())
			ctx, stop := context.WithTimeout(context.Background(), e.cfg.finishTimeout)
			defer stop()
			_ = ld.end(ctx) // the loss is reported by Err; unlocking only cleans up
		case <-ctx.Done():
		}
	}()
	return ld
}

// Value returns the value this leader campaigned with.
func (ld *Leadership) Value() string { return ld.value }

// Lease returns the lease behind the term: its Token fences the leader's
// writes (Lease.Guard, Fence), and it reports AcquiredAt, TookOver,
// HandedOff.
func (ld *Leadership) Lease() *Lease { return ld.lease }

// Context returns a context that is cancelled when the term ends: with an
// error matching ErrLeaseLost as its cause (context.Cause) when leadership was lost,
// with ErrResigned when Resign was called. Run leader-only work under it.
func (ld *Leadership) Context() context.Context { return ld.ctx }

// Resign ends the term: Context is cancelled with ErrResigned first, then
// the lock is handed to the next candidate in the same transaction that
// releases it, so that it leads at once, with no lease to wait out. It
// returns nil if it handed over or the term had already ended; otherwise the
// error of Lock.Unlock, and the next candidate leads once this term's lease
// has run out. Calls after the first return the first one's result.
func (ld *Leadership) Resign(ctx context.Context) error {
	if ctx == nil {
		return errNilContext
	}
	ld.cancel(ErrResigned)
	return ld.end(ctx)
}

// end unlocks the term's lock, once, and lets the Election campaign again.
// A lock already lost is not an error: the term had ended.
func (ld *Leadership) end(ctx context.Context) error {
	ld.endOnce.Do(func() {
		defer ld.e.end()
		if err := ld.lock.Unlock(ctx); err != nil && !errors.Is(err, ErrLeaseLost) {
			ld.endErr = err
		}
	})
	return ld.endErr
}
