//go:build go1.25

package spanmutex

import (
	"context"
	"time"
)

// inv10, limbo, in every schedule: a lease the library knows it holds for
// a Lock call (an answer to one of that call's own Spanner calls showed
// the row held under the call's id, or an Unlock of its process answered
// that it handed the lock to that id) is either granted (the call returns
// it) or given back (the call's leave or its Unlock moves the row on)
// without the library waiting in between: while such a lease is in
// limbo, its process always has a Spanner call in flight. A process that
// waits instead (a backoff, a poll) leaves the lease unrenewed, and the
// lock stalls behind it until it is handed on late or lapses into a
// takeover. Excused: the process paused or crashed while the lease was in
// limbo (nothing can act then), or a give-back of it failed (its retries
// back off, as every retry does).

// limboGap is the longest a process may go with no Spanner call in flight
// while a lease it knows of is in limbo: a moment of computation, which
// takes no virtual time, never a timer.
const limboGap = time.Millisecond

// limboKey names one lease: the lock call's id and the token.
type limboKey struct {
	id    string
	token int64
}

// simLimbo is one lease from the commit that made it until it is granted
// or the row moves on.
type simLimbo struct {
	p       *simProc // the process of the call the lease went to
	known   time.Time
	granted bool
	excused string // why a wait is excused ("" if it is not)
}

// simCall is one Lock or TryLock call, carried in its ctx so that the
// simulated store can tell which call a Spanner call serves.
type simCall struct {
	id string // the call's waiter id, once a Spanner call has shown it
}

type simCallKey struct{}

// withSimCall returns ctx carrying a new simCall.
func withSimCall(ctx context.Context) context.Context {
	return context.WithValue(ctx, simCallKey{}, &simCall{})
}

type simWhoKey struct{}

// withSimWho returns ctx naming who calls (a contender, a Run call): the
// scheduler's keys of its Spanner calls (spannerCall) tell it so from the
// calls of the process's other callers.
func withSimWho(ctx context.Context, who string) context.Context {
	return context.WithValue(ctx, simWhoKey{}, who)
}

// simWhoOf returns who ctx serves ("" if it does not say).
func simWhoOf(ctx context.Context) string {
	w, _ := ctx.Value(simWhoKey{}).(string)
	return w
}

// callOf returns the call ctx serves, binding it to id if id is given and
// it has none yet; nil if ctx serves no Lock call.
func callOf(ctx context.Context, id string) *simCall {
	c, _ := ctx.Value(simCallKey{}).(*simCall)
	if c != nil && c.id == "" && id != "" {
		c.id = id
	}
	return c
}

// busy notes that a Spanner call of p starts (+1) or ends (-1); a start
// after a wait checks the wait against every lease of p in limbo.
func (h *simHarness) busy(p *simProc, delta int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	if delta > 0 && p.inflight == 0 {
		h.checkLimboLocked(p, now, "its next Spanner call")
	}
	p.inflight += delta
	if p.inflight == 0 {
		p.idleSince = now
	}
}

// checkLimboLocked reports a lease of p in limbo whose process went
// without a Spanner call in flight for longer than limboGap up to now.
func (h *simHarness) checkLimboLocked(p *simProc, now time.Time, until string) {
	if p.inflight > 0 {
		return
	}
	for k, lb := range h.limbo {
		if lb.p != p || lb.known.IsZero() || lb.granted || lb.excused != "" {
			continue
		}
		idle := now.Sub(latest(p.idleSince, lb.known))
		if idle > limboGap {
			h.violateLocked("inv10: %s knew since %v that it held token %d (id %v) for a Lock call, neither granted nor given back, and waited %v with no Spanner call in flight until %s",
				p.name, h.ts(lb.known), k.token, simID(k.id), idle, until)
			lb.excused = "reported"
		}
	}
}

// saw notes that an answer to a Spanner call of p showed the lease id,
// token to be p's, known to the call it serves: ctx's call if it is that
// call's id, or any call if forCall is false (an Unlock's answer names the
// waiter it handed the lock to).
func (h *simHarness) saw(ctx context.Context, p *simProc, id string, token int64, forCall bool) {
	if id == "" {
		return
	}
	if forCall {
		if c := callOf(ctx, ""); c == nil || c.id != id {
			return
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if lb := h.limbo[limboKey{id, token}]; lb != nil && lb.p == p && lb.known.IsZero() {
		lb.known = time.Now()
	}
}

// limboWritten notes, with h.mu held, that the row changed from prev to r
// at ts: prev's lease left limbo (checked), and r's entered it.
func (h *simHarness) limboWrittenLocked(prev, r row, ts time.Time) {
	if prev.State == StateStarted && (r.LeaseID != prev.LeaseID || r.Token != prev.Token || r.State != StateStarted) {
		k := limboKey{prev.LeaseID, prev.Token}
		if lb := h.limbo[k]; lb != nil {
			h.checkLimboLocked(lb.p, ts, "the row moved on")
			delete(h.limbo, k)
		}
	}
	if r.State == StateStarted && (r.LeaseID != prev.LeaseID || r.Token != prev.Token || prev.State != StateStarted) {
		if p := h.scopes[scopeOf(r.LeaseID)]; p != nil {
			h.limbo[limboKey{r.LeaseID, r.Token}] = &simLimbo{p: p, excused: h.givingBack[r.LeaseID]}
		}
	}
}

// excuseLimboLocked excuses the waits of p's leases in limbo (id "": all
// of them; else those of id), with h.mu held.
func (h *simHarness) excuseLimboLocked(p *simProc, id, why string) {
	for k, lb := range h.limbo {
		if lb.p == p && (id == "" || k.id == id) && lb.excused == "" {
			lb.excused = why
		}
	}
}

// excuseLimbo is excuseLimboLocked for callers without h.mu.
func (h *simHarness) excuseLimbo(p *simProc, id, why string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.excuseLimboLocked(p, id, why)
}

// givingBackFailed notes that a give-back by waiter id failed: its call
// backs off before the next try, excused for the leases it holds and
// any handed to it meanwhile.
func (h *simHarness) givingBackFailed(p *simProc, id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.givingBack[id] = "a give-back failed"
	h.excuseLimboLocked(p, id, "a give-back failed")
}

// grantedLimboLocked notes that a Lock call returned lease, with h.mu held.
func (h *simHarness) grantedLimboLocked(lease *Lease) {
	if lb := h.limbo[limboKey{lease.id, lease.token}]; lb != nil {
		lb.granted = true
	}
}

// limboAtEnd checks, once every contender has returned, the leases still
// in limbo of processes alive.
func (h *simHarness) limboAtEnd() {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	for _, lb := range h.limbo {
		if !lb.p.gone {
			h.checkLimboLocked(lb.p, now, "every call had returned")
		}
	}
}
