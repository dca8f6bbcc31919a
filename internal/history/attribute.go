package history

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"
)

// Attributing renewals to leases.
//
// A renewal is seen on the wire (RenewalObserver) with its client and its
// commit timestamp, but no token: renewals run inside the library. It is
// fenced (its transaction checks that the row is held by the lease it
// renews), so at its commit timestamp the row was held by a lease of the
// renewing client. Check attributes each one by the row's history, the
// name's acquisitions by every client in commit order (Spanner's clock),
// and by what the local clock proves about holds that ended:
//
//   - if the latest acquisition committed before the renewal is the
//     renewing client's, and no Unlock (Complete, Fail) of it had returned
//     before the renewal was sent, the renewal renewed that token;
//   - else, if tokens that no call returned lie between that acquisition
//     and the next one (a gap: 36 between 35 and 37), or above it, with
//     none following, when the table read back after the run holds a
//     higher token or when its Unlock had returned before the renewal was
//     sent, the renewal renewed one of them: a lease handed to a call of
//     the renewing client that did not return it. The renewals in one gap,
//     in commit order, take its tokens in turn from the lowest, a new token
//     each time the renewing client changes (the row moved from one client
//     to the other, and a token never comes back). When a gap holds more
//     tokens than that, which one a renewal renewed is ambiguous: the
//     lowest that fits is taken, whose end the history then shows only if
//     it is the gap's last, so CheckLimbo may miss a lapse there but does
//     not invent one. Such renewals are kept out of the model (porcupine
//     knows no acquisition of their token) and are judged by CheckLimbo
//     (limbo.go);
//   - else the renewal fits no lease of its client that the history allows,
//     and it is attributed to its client's latest acquisition committed
//     before it (as Check did before gaps were considered), so that the
//     model and CheckDisjoint report it: a renewal of a lease its client
//     did not hold is a violation, and attributing it to a gap must never
//     hide one. A renewal whose client has no acquisition before it is
//     counted in Report.UnattributedRenewals, as before.
//
// A gap is not taken when the history proves the previous lease still held
// when the renewal committed: a guarded write of it committed later, or an
// Unlock (Complete, Fail) of it that succeeded was sent after the renewal
// returned. The renewal then committed while another client's lease held
// the row, which is a violation, reported as above.

// limboLease is a lease that no call returned and that a client renewed.
type limboLease struct {
	name     string
	token    int64
	client   string
	renewals []Op // its renewals, in commit order
	next     *Op  // the acquisition of token+1, if the history has it
}

// timeline is one name's row, as the history shows it.
type timeline struct {
	acqs    []Op                    // acknowledged acquisitions with a commit timestamp, in commit order
	ended   map[int64]time.Duration // token -> earliest return of a successful Unlock (Complete, Fail) of it
	heldTo  map[int64]time.Duration // token -> latest send of a successful Unlock (Complete, Fail) of it
	written map[int64]time.Time     // token -> latest commit of a guarded write of it
	final   int64                   // the token the table holds after the run; 0 if not read back
	runs    map[int]*gapRun         // by the index in acqs of the acquisition before the gap (-1: none)
}

// gapRun is the token of a gap that its latest renewals were attributed
// to, and their client.
type gapRun struct {
	token  int64
	client string
}

// timelines builds the timeline of each name in ops; final holds the
// tokens read back after the run, by name.
func timelines(ops []Op, final map[string]int64) map[string]*timeline {
	out := map[string]*timeline{}
	get := func(name string) *timeline {
		tl := out[name]
		if tl == nil {
			tl = &timeline{ended: map[int64]time.Duration{}, heldTo: map[int64]time.Duration{},
				written: map[int64]time.Time{}, final: final[name], runs: map[int]*gapRun{}}
			out[name] = tl
		}
		return tl
	}
	for _, o := range ops {
		if o.Name == "" || o.Outcome != OK {
			continue
		}
		tl := get(o.Name)
		switch o.Kind {
		case Acquire:
			if !o.Commit.IsZero() {
				tl.acqs = append(tl.acqs, o)
			}
		case Write:
			if o.Commit.After(tl.written[o.Token]) {
				tl.written[o.Token] = o.Commit
			}
		case Release, Complete, Fail:
			// A settled outcome may have taken effect after its return.
			if e, ok := tl.ended[o.Token]; (!ok || o.Return < e) && o.Return != Never && !o.Settled {
				tl.ended[o.Token] = o.Return
			}
			tl.heldTo[o.Token] = max(tl.heldTo[o.Token], o.Call)
		}
	}
	for _, tl := range out {
		slices.SortStableFunc(tl.acqs, func(a, b Op) int { return a.Commit.Compare(b.Commit) })
	}
	return out
}

// endedBefore reports whether the hold of token had ended, by the local
// clock, before renewal o was sent.
func (tl *timeline) endedBefore(token int64, o Op) bool {
	e, ok := tl.ended[token]
	return ok && e < o.Call
}

// heldAfter reports whether the history proves token still held when
// renewal o committed: a write of it committed later, or a successful
// Unlock of it was sent after o returned.
func (tl *timeline) heldAfter(token int64, o Op) bool {
	return tl.written[token].After(o.Commit) || (o.Return != Never && tl.heldTo[token] > o.Return)
}

// attribute returns the token renewal o renewed, and whether no call
// returned it (see above); 0 if it fits no lease and its client had no
// acquisition before it.
func (tl *timeline) attribute(o Op) (token int64, unreturned bool) {
	i, _ := slices.BinarySearchFunc(tl.acqs, o.Commit, func(a Op, t time.Time) int { return a.Commit.Compare(t) })
	i-- // the latest acquisition committed before o, or -1
	if i >= 0 && tl.acqs[i].Client == o.Client && !tl.endedBefore(tl.acqs[i].Token, o) {
		return tl.acqs[i].Token, false
	}
	if t, ok := tl.gapToken(i, o); ok {
		return t, true
	}
	// No lease fits: blame the client's latest acquisition, so that the
	// checks report the renewal.
	for ; i >= 0; i-- {
		if tl.acqs[i].Client == o.Client {
			return tl.acqs[i].Token, false
		}
	}
	return 0, false
}

// gapToken returns the token that no call returned which renewal o renewed,
// if the gap after tl.acqs[i] (i == -1: before the first acquisition) has
// one for it.
func (tl *timeline) gapToken(i int, o Op) (int64, bool) {
	lo, hi := int64(1), int64(math.MaxInt64)
	if i >= 0 {
		prev := tl.acqs[i]
		if tl.heldAfter(prev.Token, o) {
			return 0, false
		}
		lo = prev.Token + 1
	}
	switch {
	case i+1 < len(tl.acqs):
		hi = tl.acqs[i+1].Token - 1
	case tl.final > 0:
		hi = tl.final
	case i >= 0 && tl.endedBefore(tl.acqs[i].Token, o):
		// Released before the renewal, and nothing followed: the renewal,
		// fenced, found the row held by a later token.
	default:
		return 0, false
	}
	run := tl.runs[i]
	switch {
	case run == nil:
		run = &gapRun{token: lo, client: o.Client}
		tl.runs[i] = run
	case run.client != o.Client:
		run.token, run.client = run.token+1, o.Client
	}
	if run.token > hi {
		return 0, false
	}
	return run.token, true
}

// acquisitionOf returns the acquisition of token in tl, if the history
// has it.
func (tl *timeline) acquisitionOf(token int64) *Op {
	for i := range tl.acqs {
		if tl.acqs[i].Token == token {
			return &tl.acqs[i]
		}
	}
	return nil
}

// attributeRenewals gives each committed renewal in ops the token of the
// lease it renewed (see above), counts those it cannot attribute, and
// returns the leases that no call returned and that a client renewed, by
// name and token. final holds the tokens read back after the run.
func (r *Report) attributeRenewals(ops []Op, final map[string]int64) []*limboLease {
	tls := timelines(ops, final)
	var renewals []int
	for i, o := range ops {
		if o.Kind == Renew && o.Outcome == OK && !o.Commit.IsZero() {
			renewals = append(renewals, i)
		}
	}
	slices.SortStableFunc(renewals, func(a, b int) int { return ops[a].Commit.Compare(ops[b].Commit) })
	type key struct {
		name  string
		token int64
	}
	byKey := map[key]*limboLease{}
	var limbo []*limboLease
	for _, i := range renewals {
		o := &ops[i]
		tl := tls[o.Name]
		token, unreturned := tl.attribute(*o)
		switch {
		case token == 0:
			r.UnattributedRenewals++
			o.Note = joinNote(o.Note, "no acquisition of this client to attribute it to")
			continue
		case unreturned:
			o.Token = token
			r.unreturned[o.ID] = true
			o.Note = joinNote(o.Note, fmt.Sprintf("renewed token %d, which no call returned", token))
			k := key{o.Name, token}
			if byKey[k] == nil {
				byKey[k] = &limboLease{name: o.Name, token: token, client: o.Client, next: tl.acquisitionOf(token + 1)}
				limbo = append(limbo, byKey[k])
			}
			byKey[k].renewals = append(byKey[k].renewals, *o)
		}
		o.Token = token
	}
	slices.SortFunc(limbo, func(a, b *limboLease) int {
		return cmp.Or(cmp.Compare(a.name, b.name), cmp.Compare(a.token, b.token))
	})
	return limbo
}
