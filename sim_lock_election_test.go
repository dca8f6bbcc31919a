//go:build go1.25

package spanmutex

// The Election in the simulation. A candidate's Campaign is a Lock call
// and its Resign an Unlock (election.go), so the contenders are its
// candidates; what the Election adds is Observe, which reports every term
// once, in order, however short, by reading the row and its history. An
// observer process runs it beside the contenders in every schedule (from
// a stream of its own: the contenders' schedules stay as they were), and
// what it reported is checked against the row's versions (inv11).
// Where the schedule draws sessions (stream 0x5e5510), terms are held
// through them, and lost with them; the run counts the terms the observer
// reported that were (simResult.sessionTerms).

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// simObserver is a process that only observes the election.
type simObserver struct {
	p    *simProc
	done chan struct{}

	mu sync.Mutex
	// got is what Observe reported. first is the Spanner time of its
	// first strong read that succeeded; upTo that of the last poll that
	// succeeded and was followed by another (Observe then reported every
	// term up to it). pending is the present poll's read time (zero if
	// its read failed), failed whether one of its reads failed.
	got                  []LeaderInfo
	first, upTo, pending time.Time
	failed               bool
}

// newObserver starts an observer process, drawing from r alone.
func (h *simHarness) newObserver(r *rand.Rand) *simObserver {
	p := &simProc{h: h, name: "OBS", slot: -1, simLife: newSimLife(), seed: r.Uint64(), lease: h.par.lease}
	p.ctx, p.kill = context.WithCancel(context.Background())
	p.clk = &simClock{p: p, off: time.Duration(r.Int64N(int64(2*time.Hour))) - time.Hour, rate: 1, start: h.start}
	p.conn = &simConn{db: h.db, p: p}
	p.scope = NewScope(WithoutWakeUps())
	o := &simObserver{p: p, done: make(chan struct{})}
	cfg, err := configure(simName, []LockOption{WithLease(h.par.lease), WithBackOff(func() backoff.BackOff { return &simBackOff{p: p} })})
	if err != nil {
		panic(err)
	}
	cfg.clock = p.clk
	e := &Election{name: simName, cfg: cfg, rows: o, observeEvery: defaultObserveEvery}
	h.event(p.name, "observing")
	go func() {
		defer close(o.done)
		for info := range e.Observe(p.ctx) {
			h.event(p.name, "observed token %d of %q", info.Token, info.Value)
			o.mu.Lock()
			o.got = append(o.got, info)
			o.mu.Unlock()
		}
	}()
	return o
}

// read is Observe's strong read, which begins a poll (Observe reads again
// only once it is done with the last poll), recorded.
func (o *simObserver) read(ctx context.Context, name string) (row, error) {
	o.mu.Lock()
	if !o.pending.IsZero() && !o.failed {
		o.upTo = o.pending
	}
	o.pending, o.failed = time.Time{}, false
	o.mu.Unlock()
	r, err := o.p.conn.read(ctx, name)
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case err != nil:
		o.failed = true
	case o.first.IsZero():
		o.first, o.pending = r.Now, r.Now
	default:
		o.pending = r.Now
	}
	return r, err
}

// readAt is Observe's read of the row's history, recorded.
func (o *simObserver) readAt(ctx context.Context, name string, at time.Time) (row, error) {
	r, err := o.p.conn.readAt(ctx, name, at)
	if err != nil {
		o.mu.Lock()
		o.failed = true
		o.mu.Unlock()
	}
	return r, err
}

// stop ends Observe and waits for it.
func (o *simObserver) stop() {
	o.p.kill()
	<-o.done
}

// simTerm is a leadership term as the row's versions show it: its token,
// value and start, the Spanner time from which the row showed it held,
// and whether it was held through a session.
type simTerm struct {
	info    LeaderInfo
	from    time.Time
	session bool
}

// terms returns the terms of the lock's row, in token order, and the token
// held at Spanner time t (0 if none).
func (d *simDB) terms(name string, t time.Time) (terms []simTerm, heldAt int64) {
	for _, v := range d.rows[name] {
		if v.r.State != StateStarted {
			continue
		}
		if n := len(terms); n == 0 || terms[n-1].info.Token != v.r.Token {
			terms = append(terms, simTerm{info: termOf(v.r), from: v.ts, session: v.r.Session != ""})
		}
	}
	if r := d.at(name, t); r.State == StateStarted {
		heldAt = r.Token
	}
	return terms, heldAt
}

// checkObserved checks what o reported (inv11): the term held at its first
// read, then every term that began after it, in token order, each once,
// with the value and start the row shows; and none missing up to its last
// read whose terms it had reported. It returns how many of the terms it
// reported were held through a session. Call once o stopped.
func (h *simHarness) checkObserved(o *simObserver) (sessionTerms int) {
	h.db.mu.Lock()
	defer h.db.mu.Unlock()
	h.mu.Lock()
	defer h.mu.Unlock()
	if o.first.IsZero() {
		return 0
	}
	first, upTo := o.first, o.upTo
	terms, heldAtFirst := h.db.terms(simName, first)
	var want []simTerm
	for _, tm := range terms {
		if tm.info.Token == heldAtFirst || tm.from.After(first) {
			want = append(want, tm)
		}
	}
	missed := func(tm simTerm) {
		if !tm.from.After(upTo) {
			h.violateLocked("inv11: the observer missed the term of token %d (began at %s), read by %s", tm.info.Token, h.ts(tm.from), h.ts(upTo))
		}
	}
	i := 0
	for _, got := range o.got {
		for ; i < len(want) && want[i].info.Token < got.Token; i++ {
			missed(want[i])
		}
		if i == len(want) || want[i].info != got {
			h.violateLocked("inv11: the observer reported %+v, which is no term it should report next (%s)", got, h.wantedLocked(want, i))
			return sessionTerms
		}
		if want[i].session {
			sessionTerms++
		}
		i++
	}
	for ; i < len(want); i++ {
		missed(want[i])
	}
	return sessionTerms
}

// wantedLocked describes want[i], the term an observer should report next.
func (h *simHarness) wantedLocked(want []simTerm, i int) string {
	if i >= len(want) {
		return "none left"
	}
	return fmt.Sprintf("next: %+v from %s", want[i].info, h.ts(want[i].from))
}

// observedTokens returns the tokens o reported, for the trace.
func (o *simObserver) observedTokens() []int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	var ts []int64
	for _, g := range o.got {
		ts = append(ts, g.Token)
	}
	return ts
}
