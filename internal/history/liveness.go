package history

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"
)

// Liveness, and the checks of Lock calls that returned no lease.
//
// A stall is a stretch of the recorder's (local) clock during which a lock
// was free, or held by a token that no Lock call returned, while at least
// one Lock call on it was waiting (invoked before, returned after). Free
// begins when the previous hold has certainly ended: when its Unlock
// returned, if that released it, or else its last sign of life (the return
// of its acquisition or of its last renewal) plus the lease it declared,
// by which time the lease had expired by Spanner's clock too, since each of
// those commits came before its return. A hand-off (the next acquisition
// is Lease.HandedOff, with the next token) leaves no free moment. A stall
// ends when the next holder's Lock returned. Both ends are therefore late
// rather than early, and a stall includes the next holder's own latency:
// the figure is an upper bound, printed, and held only to the generous
// StallBound.

// Stall is the longest stall of one lock between two of its holds.
type Stall struct {
	Name     string
	From, To time.Duration // on the recorder's clock
	After    string        // what freed the lock
	Until    string        // what ended the stall
	Ops      []Op          // the holds on either side
}

// Length is how long the stall lasted.
func (s Stall) Length() time.Duration { return s.To - s.From }

// StallBound is the longest stall CheckLiveness lets pass: four times the
// longest lease a holder declared, plus 2 s. A takeover is due a lease and
// its jitter after the holder fell silent, and a waiter's poll is at most a
// quarter lease; the rest is room for a loaded machine and injected faults,
// so that only a lock stuck for no reason is reported.
func StallBound(longestLease time.Duration) time.Duration { return 4*longestLease + 2*time.Second }

// longestLease is the longest lease declared in ops, and at least fallback.
func longestLease(ops []Op, fallback time.Duration) time.Duration {
	longest := fallback
	for _, o := range ops {
		if o.Kind == Acquire && o.Outcome == OK {
			longest = max(longest, o.Lease)
		}
	}
	return longest
}

// historyEnd is the latest local time in ops.
func historyEnd(ops []Op) time.Duration {
	end := time.Duration(0)
	for _, o := range ops {
		end = max(end, o.Call, o.Return)
	}
	return end
}

// checkLockErrors reports Lock calls of name that returned an error outside
// Lock's contract.
func (r *Report) checkLockErrors(name string, ops []Op) {
	for _, o := range ops {
		if o.Kind != Acquire || o.RunOnce || o.Refusal == "" {
			continue
		}
		r.Checked[CheckLockErrors]++
		if o.Refusal == RefusedUnexpected {
			r.violate(Violation{Check: CheckLockErrors, Name: name, Ops: []Op{o},
				Message: "a Lock call returned no lease and an error that is neither ErrNotObtained, an *OutageError, nor (TryLock) a *HeldError"})
		}
	}
}

// checkLeftHeld reports the locks that the table, read after every client
// stopped, shows held by a token that no Lock call returned, or by one
// whose Unlock said it was released (or lost).
func (r *Report) checkLeftHeld(byName map[string][]Op, locks map[string]FinalRow) {
	for _, name := range sortedKeys(locks) {
		fr := locks[name]
		r.Checked[CheckLeftHeld]++
		if fr.State != "STARTED" {
			continue
		}
		ops := byName[name]
		acq := slices.IndexFunc(ops, func(o Op) bool { return o.Kind == Acquire && o.Outcome == OK && o.Token == fr.Token })
		if acq < 0 {
			// A call still under way when the history was taken may hold it.
			if slices.ContainsFunc(ops, func(o Op) bool { return o.Kind == Acquire && o.Client == fr.Owner && o.Return == Never }) {
				continue
			}
			r.violate(Violation{Check: CheckLeftHeld, Name: name, Ops: callsOf(ops, fr.Owner),
				Message: fmt.Sprintf("after the run the lock is held by token %d (owner %q), which no Lock call returned: a caller that returned without the lease left it held, and every waiter waits for its lease to expire", fr.Token, fr.Owner)})
			continue
		}
		rel := slices.IndexFunc(ops, func(o Op) bool { return o.Kind == Release && o.Token == fr.Token })
		if rel >= 0 && (ops[rel].Outcome == OK || ops[rel].Outcome == LeaseLost) {
			r.violate(Violation{Check: CheckLeftHeld, Name: name, Ops: []Op{ops[acq], ops[rel]},
				Message: fmt.Sprintf("after the run the lock is still held by token %d, whose Unlock returned %s", fr.Token, ops[rel].Outcome)})
		}
	}
}

// callsOf returns the Lock calls of client in ops.
func callsOf(ops []Op, client string) []Op {
	var out []Op
	for _, o := range ops {
		if o.Kind == Acquire && o.Client == client {
			out = append(out, o)
		}
	}
	return out
}

// span is a stretch of the recorder's clock.
type span struct{ from, to time.Duration }

// checkLiveness measures the stalls of the Lock name (ops are its
// operations; end is the end of the whole history), keeps the longest in
// r.Stalls, and reports those longer than r.StallBound.
func (r *Report) checkLiveness(name string, ops []Op, cfg Config, end time.Duration) {
	if slices.ContainsFunc(ops, func(o Op) bool { return o.RunOnce }) {
		return
	}
	waits := waitingCalls(ops, end)
	if len(waits) == 0 {
		return
	}
	holds := newHolds(ops, cfg.Lease)
	for i := 0; i <= len(holds.acqs); i++ {
		gap, ok := holds.gap(i, end)
		if !ok {
			continue
		}
		r.Checked[CheckLiveness]++
		from, to := longestCovered(waits, gap.From, gap.To)
		if to <= from {
			continue
		}
		gap.Name, gap.From, gap.To = name, from, to
		if gap.Length() > r.Stalls[name].Length() {
			if r.Stalls == nil {
				r.Stalls = map[string]Stall{}
			}
			r.Stalls[name] = gap
		}
		if gap.Length() > r.StallBound {
			r.violate(Violation{Check: CheckLiveness, Name: name, Ops: gap.Ops,
				Message: fmt.Sprintf("the lock stayed free for %v [%s, %s] while a Lock call waited, longer than the bound %v: after %s, until %s",
					gap.Length().Round(time.Millisecond), fmtDur(from), fmtDur(to), r.StallBound, gap.After, gap.Until)})
		}
	}
}

// waitingCalls returns the stretches during which Lock (not TryLock) calls
// of ops were under way, ordered by their start; a call that never returned
// waits until end.
func waitingCalls(ops []Op, end time.Duration) []span {
	var out []span
	for _, o := range ops {
		if o.Kind != Acquire || o.Try || o.RunOnce {
			continue
		}
		to := o.Return
		if to == Never {
			to = end
		}
		out = append(out, span{o.Call, to})
	}
	slices.SortFunc(out, func(a, b span) int { return int(a.from - b.from) })
	return out
}

// longestCovered returns the longest stretch of [from, to] that waits (in
// order of their start) cover without a break.
func longestCovered(waits []span, from, to time.Duration) (time.Duration, time.Duration) {
	var best, cur span
	open := false
	for _, w := range waits {
		if w.from >= to {
			break
		}
		a, b := max(w.from, from), min(w.to, to)
		if a >= b {
			continue
		}
		if open && a <= cur.to {
			cur.to = max(cur.to, b)
			continue
		}
		if open && cur.to-cur.from > best.to-best.from {
			best = cur
		}
		cur, open = span{a, b}, true
	}
	if open && cur.to-cur.from > best.to-best.from {
		best = cur
	}
	return best.from, best.to
}

// holds are the acknowledged acquisitions of one lock, in commit order,
// with what ended each.
type holds struct {
	acqs     []Op
	released map[int64]Op            // token -> its Unlock, if that released it
	alive    map[int64]time.Duration // token -> the return of its last sign of life
	fallback time.Duration           // the lease of acquisitions recorded without one
}

func newHolds(ops []Op, fallback time.Duration) *holds {
	h := &holds{released: map[int64]Op{}, alive: map[int64]time.Duration{}, fallback: fallback}
	owner := map[int64]string{}
	for _, o := range ops {
		if o.Kind == Acquire && o.Outcome == OK && !o.Commit.IsZero() {
			h.acqs = append(h.acqs, o)
			h.alive[o.Token], owner[o.Token] = o.Return, o.Client
		}
	}
	slices.SortStableFunc(h.acqs, func(a, b Op) int { return a.Commit.Compare(b.Commit) })
	for _, o := range ops {
		switch {
		case o.Kind == Release && o.Outcome == OK && o.Return != Never:
			h.released[o.Token] = o
		case o.Kind == Renew && o.Outcome == OK && o.Return != Never && owner[o.Token] == o.Client:
			h.alive[o.Token] = max(h.alive[o.Token], o.Return)
		}
	}
	return h
}

// heldUntil returns the local time by which the hold of a had certainly
// ended, and how.
func (h *holds) heldUntil(a Op) (time.Duration, string) {
	if rel, ok := h.released[a.Token]; ok {
		return rel.Return, fmt.Sprintf("token %d's Unlock returned", a.Token)
	}
	lease := declaredLease(a, h.fallback)
	return h.alive[a.Token] + lease, fmt.Sprintf("token %d's lease (%v) expired past its last renewal", a.Token, lease)
}

// gap returns the free stretch before the i-th acquisition (or, for i ==
// len(acqs), after the last one, until end); false if a hand-off left none.
func (h *holds) gap(i int, end time.Duration) (Stall, bool) {
	var g Stall
	var next *Op
	if i < len(h.acqs) {
		next = &h.acqs[i]
	}
	if i == 0 {
		g.After = "the start"
	} else {
		prev := h.acqs[i-1]
		if next != nil && next.HandedOff && next.Token == prev.Token+1 {
			return g, false
		}
		g.From, g.After = h.heldUntil(prev)
		g.Ops = append(g.Ops, prev)
		if next != nil && next.Token > prev.Token+1 {
			g.After += fmt.Sprintf(", and tokens %d to %d, which no Lock call returned, were acquired", prev.Token+1, next.Token-1)
		}
	}
	g.To, g.Until = end, "the end of the history"
	if next != nil {
		g.To, g.Until = next.Return, fmt.Sprintf("token %d's %s returned", next.Token, acquisitionNote(*next))
		g.Ops = append(g.Ops, *next)
	}
	return g, true
}

func acquisitionNote(a Op) string {
	switch {
	case a.Takeover:
		return "takeover"
	case a.HandedOff:
		return "hand-off"
	case a.Try:
		return "TryLock"
	}
	return "Lock"
}

// WriteLiveness writes the longest stall of each lock, and overall, with
// the bound CheckLiveness holds them to.
func (r *Report) WriteLiveness(w io.Writer) {
	if len(r.Stalls) == 0 {
		fmt.Fprintf(w, "Liveness: no lock stayed free while a Lock call waited (bound %v, check %s)\n", r.StallBound, CheckLiveness)
		return
	}
	var longest Stall
	for _, name := range sortedKeys(r.Stalls) {
		if s := r.Stalls[name]; s.Length() > longest.Length() {
			longest = s
		}
	}
	fmt.Fprintf(w, "Liveness: longest stall %v on %s [%s, %s] (a lock free, or held by a token no Lock call returned, while a Lock call waited; recorder's clock)\n",
		longest.Length().Round(time.Millisecond), longest.Name, fmtDur(longest.From), fmtDur(longest.To))
	fmt.Fprintf(w, "  bounded by check %s: at most %v (4 × the longest declared lease + 2s)\n", CheckLiveness, r.StallBound)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, name := range sortedKeys(r.Stalls) {
		s := r.Stalls[name]
		fmt.Fprintf(tw, "  %s\t%v\t[%s, %s] after %s, until %s\n", name, s.Length().Round(time.Millisecond),
			fmtDur(s.From), fmtDur(s.To), s.After, s.Until)
	}
	_ = tw.Flush()
}
