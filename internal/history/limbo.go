package history

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// Lease limbo (CheckLimbo).
//
// A lease in limbo is one that the library acquired for a call and that no
// call returned, although the library knew it held it: a client renewed it
// (its renewals are attributed to it by the row's history, attribute.go),
// so a call of that client had been handed it (Lock's hand-off, or its own
// acquisition) and found it its own. Lock's contract is that such a lease
// either reaches the caller or is given back at once (handed on, or
// released), never left to lapse.
//
// The rule, on what the history can show:
//
//   - a lease in limbo that was taken over (the next token is a takeover of
//     it: it lapsed) while the call it was handed to was still under way
//     (the takeover's acquisition returned before the call did, or the
//     call never returned) is a violation: the call neither returned it
//     nor gave it back for a whole lease;
//   - unless a pause of the renewing client (Pause, recorded by the
//     torture's pause fault) overlaps the stretch from its last renewal to
//     the takeover: a frozen process can neither grant nor give back, and
//     its lease lapses through no fault of the library;
//   - so is a lease in limbo held past its lease and then handed on: the
//     next token is a hand-off (its commit is the one that ended the
//     lease), committed more than the lease its client declared after its
//     last renewal, while the call it was handed to went on to return a
//     lease or never returned, with no recorded pause of the client;
//   - a lease in limbo given back in time, or late by a call that returned
//     no lease (its ctx ended, or Spanner kept failing: it gives back on
//     its way out, late if it must), or taken over only after its call had
//     returned, or whose end the history does not show (the next token is
//     not in it, or followed a release of unknown time), is listed in
//     Report.Limbo, not a violation.
//
// What the history cannot show: a give-back that Spanner refused again and
// again for a whole lease, while the call went on waiting, looks like a
// lapse in limbo and is reported; the commits of a give-back are not
// recorded. A history recorded without pauses (before Pause existed)
// excuses none. The takeover of a lease in limbo is also held to
// CheckTakeover, against the lease its client declared on its other
// acquisitions (or Config.Lease).

// LimboLease is a lease that a call was handed and whose client renewed it,
// but that no call returned.
type LimboLease struct {
	Name        string
	Token       int64
	Client      string    // the client that renewed it, whose call it was handed to
	Renewals    int       // its renewals seen on the wire
	LastRenewal time.Time // the commit timestamp of the last one
	End         string    // how it ended, as far as the history shows
	Violation   bool      // reported by CheckLimbo
}

// checkLimbo judges the leases in limbo (see above) of ops.
func (r *Report) checkLimbo(ops []Op, limbo []*limboLease, cfg Config) {
	for _, l := range limbo {
		r.Checked[CheckLimbo]++
		call := limboCall(ops, l)
		last := l.renewals[len(l.renewals)-1]
		lease := clientLease(ops, l.client, cfg.Lease)
		ll := LimboLease{Name: l.name, Token: l.token, Client: l.client, Renewals: len(l.renewals), LastRenewal: last.Commit}
		switch {
		case l.next == nil:
			ll.End = "the history does not show its end (the next token is not in it)"
		case l.next.Takeover:
			r.checkLimboTakeover(l, last, lease)
			ll.End, ll.Violation = r.judgeLapse(ops, l, call, last)
		default:
			ll.End, ll.Violation = r.judgeGiveBack(ops, l, call, last, lease)
		}
		if call != nil {
			ll.End += "; " + describeCall(*call)
		}
		r.Limbo = append(r.Limbo, ll)
	}
}

// judgeLapse judges lease l in limbo, taken over by l.next after its last
// renewal last; call is the call it was handed to, if the history shows
// it. It reports the violation, if it is one, and returns how the lease
// ended and whether it was a violation.
func (r *Report) judgeLapse(ops []Op, l *limboLease, call *Op, last Op) (string, bool) {
	next := *l.next
	silence := next.Commit.Sub(last.Commit).Round(time.Millisecond)
	end := fmt.Sprintf("lapsed: token %d took it over at %s, after %v of silence", next.Token, ts(next.Commit), silence)
	underWay := call == nil || call.Return == Never || next.Return < call.Return
	if call != nil && call.Return != Never && call.Return < next.Call {
		return end + ", after its call had returned", false
	}
	if !underWay {
		return end + ", as its call returned", false
	}
	if p := pauseOf(ops, l.client, last.Call, next.Return); p != nil {
		return end + fmt.Sprintf(", while its call waited, excused: %s was paused [%s, %s]", l.client, fmtDur(p.Call), fmtDur(retOrEnd(p))), false
	}
	r.violateLimbo(ops, l, call, fmt.Sprintf("neither returned nor given back, it was taken over by token %d at %s after %v of silence, while the call was still under way",
		next.Token, ts(next.Commit), silence))
	return end + ", while its call waited", true
}

// judgeGiveBack judges lease l in limbo, followed by l.next without a
// takeover: given back. Handed on (l.next is a hand-off, whose commit
// ended l) more than the lease its client declared after its last
// renewal last, it sat in limbo past its lease: a violation, unless the
// call it was handed to returned no lease (its ctx ended, or Spanner kept
// failing: it gives back on its way out, late if it must) or a pause of
// its client was recorded meanwhile.
func (r *Report) judgeGiveBack(ops []Op, l *limboLease, call *Op, last Op, lease time.Duration) (string, bool) {
	next := *l.next
	silence := next.Commit.Sub(last.Commit)
	end := fmt.Sprintf("given back: token %d followed at %s (%s), %v after its last renewal", next.Token, ts(next.Commit), acquisitionNote(next), silence.Round(time.Millisecond))
	switch {
	case !next.HandedOff || lease <= 0 || silence <= lease+clockTolerance:
		return end, false
	case call != nil && call.Return != Never && call.Outcome != OK:
		return end + ", past its lease, by a call that returned no lease", false
	}
	if p := pauseOf(ops, l.client, last.Call, next.Return); p != nil {
		return end + fmt.Sprintf(", past its lease, excused: %s was paused [%s, %s]", l.client, fmtDur(p.Call), fmtDur(retOrEnd(p))), false
	}
	r.violateLimbo(ops, l, call, fmt.Sprintf("neither returned nor given back for %v, past the lease %v %s declared, it was handed on to token %d only at %s, while the call went on waiting",
		silence.Round(time.Millisecond), lease, l.client, next.Token, ts(next.Commit)))
	return end + ", past its lease, while its call waited", true
}

// violateLimbo reports lease l in limbo, handed to call (nil if the
// history shows none under way), as a violation; what says how it ended.
func (r *Report) violateLimbo(ops []Op, l *limboLease, call *Op, what string) {
	last := l.renewals[len(l.renewals)-1]
	callText := "no call of " + l.client + " on it was under way"
	if call != nil {
		callText = fmt.Sprintf("%s's %s call #%d [%s, %s] (%s)", l.client, callNote(*call), call.ID, fmtDur(call.Call), fmtRet(call.Return), describeCall(*call))
	}
	r.violate(Violation{Check: CheckLimbo, Name: l.name, Ops: limboOps(ops, l, call),
		Message: fmt.Sprintf("lease limbo: token %d, which no call returned, was handed to %s; %s renewed it (%s, the last at %s); %s",
			l.token, callText, l.client, count(len(l.renewals), "renewal"), ts(last.Commit), what),
		Detail: []string{fmt.Sprintf("no pause of %s was recorded from its last renewal to the end of the lease; a lease the library acquired for a call must reach the caller or be given back at once, never left to lapse", l.client)}})
}

// checkLimboTakeover holds the takeover of lease l in limbo to the lease
// its client declared, from its last renewal last (Spanner's clock).
func (r *Report) checkLimboTakeover(l *limboLease, last Op, lease time.Duration) {
	if lease <= 0 {
		return
	}
	r.Checked[CheckTakeover]++
	if silent := l.next.Commit.Sub(last.Commit); silent < lease-clockTolerance {
		r.violate(Violation{Check: CheckTakeover, Name: l.name, Ops: []Op{last, *l.next},
			Message: fmt.Sprintf("token %d took over from token %d (which no call returned, renewed by %s) after %v of silence by commit timestamps, less than the lease %v that %s declared",
				l.next.Token, l.token, l.client, silent, lease, l.client)})
	}
}

// limboCall returns the call of l's client on l's name under way at its
// first renewal: the call it was handed to.
func limboCall(ops []Op, l *limboLease) *Op {
	first := l.renewals[0]
	var call *Op
	for i := range ops {
		o := &ops[i]
		if o.Kind != Acquire || o.Client != l.client || o.Name != l.name || o.Call > first.Call {
			continue
		}
		if o.Return != Never && o.Return < first.Return {
			continue
		}
		if call == nil || o.Call > call.Call {
			call = o
		}
	}
	return call
}

// pauseOf returns a recorded pause of client that overlaps [from, to] on
// the local clock, or nil.
func pauseOf(ops []Op, client string, from, to time.Duration) *Op {
	for i := range ops {
		p := &ops[i]
		if p.Kind == Pause && p.Client == client && p.Call <= to && retOrEnd(p) >= from {
			return p
		}
	}
	return nil
}

// clientLease is the lease client declared on its acquisitions, or
// fallback if the history does not say.
func clientLease(ops []Op, client string, fallback time.Duration) time.Duration {
	for _, o := range ops {
		if o.Kind == Acquire && o.Client == client && o.Lease > 0 {
			return o.Lease
		}
	}
	return fallback
}

// limboOps is the sub-history of lease l in limbo: the acquisition before
// it and that one's end, the call it was handed to, its renewals, and the
// acquisition after it.
func limboOps(ops []Op, l *limboLease, call *Op) []Op {
	var out []Op
	for _, o := range ops {
		switch {
		case o.Name != l.name:
		case o.Kind == Acquire && o.Outcome == OK && o.Token == l.token-1,
			(o.Kind == Release || o.Kind == Complete || o.Kind == Fail) && o.Token == l.token-1:
			out = append(out, o)
		}
	}
	if call != nil {
		out = append(out, *call)
	}
	out = append(out, l.renewals...)
	if l.next != nil {
		out = append(out, *l.next)
	}
	slices.SortStableFunc(out, func(a, b Op) int { return cmp.Compare(a.Call, b.Call) })
	return out
}

// describeCall says how a call that was handed a lease in limbo ended.
func describeCall(call Op) string {
	switch {
	case call.Return == Never:
		return "the call had not returned when the history was taken"
	case call.Outcome == OK && call.Token != 0:
		return fmt.Sprintf("the call returned token %d at %s", call.Token, fmtDur(call.Return))
	case call.Refusal != "":
		return fmt.Sprintf("the call returned no lease (%s) at %s", call.Refusal, fmtDur(call.Return))
	}
	return fmt.Sprintf("the call returned %s at %s", call.Outcome, fmtDur(call.Return))
}

// callNote names the kind of call: Lock, TryLock, Run.
func callNote(call Op) string {
	switch {
	case call.RunOnce:
		return "Run"
	case call.Try:
		return "TryLock"
	}
	return "Lock"
}

// count says "1 renewal", "2 renewals".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func fmtRet(ret time.Duration) string {
	if ret == Never {
		return "never"
	}
	return fmtDur(ret)
}
