package history

import (
	"cmp"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// The checks Check runs, as they are named in violations.
const (
	// CheckLinearizable: porcupine finds an order of each name's operations
	// that agrees with their real-time order (local clock) and with the
	// model of what Spanner committed (lockState).
	CheckLinearizable = "linearizable"
	// CheckTokens: acknowledged acquisitions of a name, in commit-timestamp
	// order, carry strictly increasing tokens.
	CheckTokens = "tokens-increase"
	// CheckDisjoint: every guarded write and renewal of a holder committed
	// after its acquisition and before the next acquisition of the name, by
	// commit timestamps: holders' intervals, as Spanner committed them, do
	// not overlap.
	CheckDisjoint = "holders-disjoint"
	// CheckResourceTokens: the guarded writes of a resource, in
	// commit-timestamp order, carry tokens that never decrease, all of one
	// name.
	CheckResourceTokens = "resource-tokens"
	// CheckRunOnce: a run-once section records DONE at most once.
	CheckRunOnce = "run-once"
	// CheckTakeover: a takeover commits at least the lease the previous
	// holder declared (Op.Lease, not the taker's lease) after the last
	// commit that proved that holder alive.
	CheckTakeover = "takeover-after-lease"
	// CheckTable: what clients were told agrees with what the table holds
	// after the run.
	CheckTable = "history-matches-table"
	// CheckLockErrors: every Lock call that returned no lease returned an
	// error of its contract: ErrNotObtained, an *OutageError, or (from
	// TryLock) a *HeldError.
	CheckLockErrors = "lock-errors-expected"
	// CheckLeftHeld: once every client has stopped, no lock is held by a
	// token that no Lock call returned: a caller that gave up (with
	// ErrNotObtained, say) handed on or gave back whatever it was handed.
	CheckLeftHeld = "no-lock-left-held"
	// CheckLiveness: no lock stays free (or held by a token no caller
	// received) for longer than StallBound while a Lock call waits for it.
	CheckLiveness = "stall-bounded"
	// CheckLimbo: a lease that a call was handed and its client renewed,
	// but that no call returned, was neither left to lapse into a takeover
	// nor held past its lease before it was handed on, while the call
	// waited (limbo.go).
	CheckLimbo = "no-lease-limbo"
)

// checkOrder is the order in which the report lists the checks.
var checkOrder = []string{CheckLinearizable, CheckTokens, CheckDisjoint, CheckResourceTokens, CheckRunOnce, CheckTakeover,
	CheckTable, CheckLockErrors, CheckLeftHeld, CheckLiveness, CheckLimbo}

// DefaultTimeout bounds porcupine's search on each name.
const DefaultTimeout = 2 * time.Minute

// clockTolerance is how far apart two Spanner timestamps may be compared
// with CURRENT_TIMESTAMP(), which a takeover decides on, and commit
// timestamps, which the history holds (CORRECTNESS_DISCLAIMER.md, F5).
const clockTolerance = 10 * time.Millisecond

// maxSubHistory bounds how many operations a violation prints.
const maxSubHistory = 40

// Config says how to check a history.
type Config struct {
	// Lease is the lease of holders whose acquisitions were recorded
	// without one (Op.Lease 0); 0 skips CheckTakeover for them.
	Lease time.Duration
	// Timeout bounds porcupine's search on each name (default
	// DefaultTimeout). A name whose search times out is listed in
	// Report.TimedOut, not as a violation.
	Timeout time.Duration
	// VisualizeDir is where porcupine's HTML visualization of a name that
	// is not linearizable is written ("": os.TempDir()).
	VisualizeDir string
	// Readback is what Spanner held after the run; nil skips CheckTable
	// and leaves writes of unknown outcome unknown.
	Readback *Readback
}

// Readback is what Spanner holds after the run, read once every client has
// stopped.
type Readback struct {
	// Writes are the rows the guarded writes wrote, by WriteID.
	Writes map[string]WrittenRow
	// Rows are the mutex rows of run-once sections, by name.
	Rows map[string]FinalRow
	// Locks are the rows of the Locks, by name; nil skips CheckLeftHeld.
	Locks map[string]FinalRow
}

// WrittenRow is one row a guarded write wrote.
type WrittenRow struct {
	Resource string
	Token    int64
	Commit   time.Time // its commit timestamp
}

// FinalRow is a run-once section's row after the run.
type FinalRow struct {
	State string
	Token int64
	Owner string
}

// Violation is one broken property, with the sub-history that shows it.
type Violation struct {
	Check   string
	Name    string // the lock or section, or the resource
	Message string
	Ops     []Op     // the offending sub-history
	Detail  []string // more lines: the model's states, why nothing fits
}

// Report is what Check found.
type Report struct {
	Ops   int                      // operations checked
	Kinds map[Kind]map[Outcome]int // operations by kind and outcome
	Names int                      // lock and section names
	// Linearizability is porcupine's overall verdict: Ok, Illegal, or
	// Unknown if a name's search timed out (see TimedOut).
	Linearizability porcupine.CheckResult
	TimedOut        []string
	Checked         map[string]int // how many items each check looked at
	Violations      []Violation
	Visualizations  []string // HTML files written for names that are not linearizable

	// What the run went through; none of these is a violation.
	Takeovers            int // acquisitions that took over a silent holder
	StaleWritesRefused   int // guarded writes Guard refused: the holder had lost its lease
	BeliefOverlaps       int // times a holder believed it held a name while another did too
	RanTwice             int // run-once sections whose body started more than once (a retry, or a takeover)
	Settled              int // operations of unknown outcome settled by the read-back
	UnattributedRenewals int // renewals seen on the wire with no acquisition to attribute them to
	GaveUp               int // Lock calls that returned ErrNotObtained
	UnseenTakeovers      int // takeovers of a token no Lock call returned (handed to a caller that then gave up, or frozen)

	// Liveness: the longest stall of each Lock name, and the bound
	// CheckLiveness holds them to (see liveness.go).
	Stalls     map[string]Stall
	StallBound time.Duration

	// Limbo lists the leases that a call was handed and its client renewed,
	// but that no call returned, in order of name and token; those that
	// CheckLimbo found left to lapse are marked (see limbo.go).
	Limbo []LimboLease

	unreturned map[int]bool // IDs of renewals attributed to a token no call returned
}

// OK reports whether no check found a violation.
func (r *Report) OK() bool { return len(r.Violations) == 0 }

// Check checks a history: the linearizability of each name's operations
// against the model (porcupine), and direct invariants on Spanner's commit
// timestamps. It does not modify ops.
func Check(ops []Op, cfg Config) *Report {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	ops = slices.Clone(ops)
	r := &Report{Ops: len(ops), Kinds: map[Kind]map[Outcome]int{}, Checked: map[string]int{}, Linearizability: porcupine.Ok,
		unreturned: map[int]bool{}}
	if cfg.Readback != nil {
		r.settle(ops, cfg.Readback)
	}
	limbo := r.attributeRenewals(ops, finalTokens(cfg.Readback))
	for _, o := range ops {
		if r.Kinds[o.Kind] == nil {
			r.Kinds[o.Kind] = map[Outcome]int{}
		}
		r.Kinds[o.Kind][o.Outcome]++
		switch {
		case o.Kind == Acquire && o.Outcome == OK && o.Takeover:
			r.Takeovers++
		case o.Kind == Write && o.Outcome == LeaseLost:
			r.StaleWritesRefused++
		case o.Kind == Acquire && o.Refusal == RefusedNotObtained:
			r.GaveUp++
		}
	}
	byName := map[string][]Op{}
	for _, o := range ops {
		if o.Name != "" {
			byName[o.Name] = append(byName[o.Name], o)
		}
	}
	names := sortedKeys(byName)
	r.Names = len(names)
	bounds := latestEffects(ops)
	r.StallBound = StallBound(longestLease(ops, cfg.Lease))
	end := historyEnd(ops)
	for _, name := range names {
		r.checkLinearizable(name, byName[name], bounds, cfg)
		r.checkTimeline(name, byName[name], cfg)
		r.countBeliefs(byName[name])
		r.checkLockErrors(name, byName[name])
		r.checkLiveness(name, byName[name], cfg, end)
	}
	if cfg.Readback != nil && cfg.Readback.Locks != nil {
		r.checkLeftHeld(byName, cfg.Readback.Locks)
	}
	r.checkResources(ops)
	r.checkLimbo(ops, limbo, cfg)
	return r
}

// finalTokens returns the tokens the rows held after the run, by name, as
// rb read them back; nil if the history was not read back.
func finalTokens(rb *Readback) map[string]int64 {
	if rb == nil {
		return nil
	}
	out := map[string]int64{}
	for _, rows := range []map[string]FinalRow{rb.Rows, rb.Locks} {
		for name, fr := range rows {
			out[name] = fr.Token
		}
	}
	return out
}

// declaredLease is the lease the holder of acquisition a declared, or
// fallback if the history does not say.
func declaredLease(a Op, fallback time.Duration) time.Duration {
	if a.Lease > 0 {
		return a.Lease
	}
	return fallback
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

func (r *Report) violate(v Violation) {
	if len(v.Ops) > maxSubHistory {
		v.Detail = append(v.Detail, fmt.Sprintf("(%d more operations not shown)", len(v.Ops)-maxSubHistory))
		v.Ops = v.Ops[:maxSubHistory]
	}
	r.Violations = append(r.Violations, v)
}

// settle completes the history with what the table holds: writes and
// completions of unknown outcome become OK or NoEffect, and anything the
// clients were told that the table contradicts is a violation.
func (r *Report) settle(ops []Op, rb *Readback) {
	seen := map[string]bool{}
	for i := range ops {
		o := &ops[i]
		switch o.Kind {
		case Write:
			seen[o.WriteID] = true
			r.settleWrite(o, rb.Writes)
		case Complete:
			r.settleCompletion(o, rb.Rows)
		}
	}
	for _, id := range sortedKeys(rb.Writes) {
		if !seen[id] {
			row := rb.Writes[id]
			r.Checked[CheckTable]++
			r.violate(Violation{Check: CheckTable, Name: row.Resource,
				Message: fmt.Sprintf("the table holds a write %s (resource %q, token %d) that no recorded operation made", id, row.Resource, row.Token)})
		}
	}
	for _, name := range sortedKeys(rb.Rows) {
		fr := rb.Rows[name]
		if fr.State != "DONE" {
			continue
		}
		found := slices.ContainsFunc(ops, func(o Op) bool { return o.Kind == Complete && o.Name == name && o.Token == fr.Token })
		if !found {
			r.violate(Violation{Check: CheckTable, Name: name,
				Message: fmt.Sprintf("the row is DONE with token %d, but no recorded Run completed with that token", fr.Token)})
		}
	}
}

// settleWrite settles guarded write o by the rows the table holds, by
// WriteID: its outcome if unknown, its commit timestamp if it committed,
// and a violation if the table contradicts what the client was told.
func (r *Report) settleWrite(o *Op, writes map[string]WrittenRow) {
	r.Checked[CheckTable]++
	row, present := writes[o.WriteID]
	switch {
	case present && (row.Resource != o.Resource || row.Token != o.Token):
		r.violate(Violation{Check: CheckTable, Name: o.Name, Ops: []Op{*o},
			Message: fmt.Sprintf("the table holds write %s as resource %q token %d, not what the client wrote", o.WriteID, row.Resource, row.Token)})
	case present && o.Outcome == Unknown:
		o.Outcome, o.Commit, o.Settled = OK, row.Commit, true
		r.Settled++
	case present && o.Outcome == OK:
		o.Commit = row.Commit
	case present:
		r.violate(Violation{Check: CheckTable, Name: o.Name, Ops: []Op{*o},
			Message: fmt.Sprintf("the client was told its guarded write had no effect (%s), but the table holds it", o.Outcome)})
	case o.Outcome == Unknown:
		o.Outcome, o.Settled = NoEffect, true
		r.Settled++
	case o.Outcome == OK:
		r.violate(Violation{Check: CheckTable, Name: o.Name, Ops: []Op{*o},
			Message: "the client was told its guarded write committed, but the table does not hold it"})
	}
}

// settleCompletion settles completion o of a run-once section by the
// section's row after the run, by name: its outcome if unknown, and a
// violation if the row contradicts what Run reported. Other completions
// are left alone.
func (r *Report) settleCompletion(o *Op, rows map[string]FinalRow) {
	fr, ok := rows[o.Name]
	if !ok || !o.RunOnce {
		return
	}
	r.Checked[CheckTable]++
	doneHere := fr.State == "DONE" && fr.Token == o.Token
	switch {
	case o.Outcome == Unknown:
		o.Outcome = NoEffect
		if doneHere {
			o.Outcome = OK
		}
		o.Settled = true
		r.Settled++
	case o.Outcome == OK && !doneHere:
		r.violate(Violation{Check: CheckTable, Name: o.Name, Ops: []Op{*o},
			Message: fmt.Sprintf("Run reported the section done with token %d, but the row is %s with token %d", o.Token, fr.State, fr.Token)})
	case o.Outcome != OK && doneHere:
		r.violate(Violation{Check: CheckTable, Name: o.Name, Ops: []Op{*o},
			Message: fmt.Sprintf("Run reported %s for token %d, but the row is DONE under that token", o.Outcome, o.Token)})
	}
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// latestEffects bounds when operations whose outcome the client did not
// learn (settled by the read-back, or never returned) can have taken
// effect, by local time, from their commit timestamps: by the return of
// the first operation that returned an acknowledged commit with a later
// commit timestamp. A commit timestamp lies within the real time of its
// commit (TrueTime, F1 and F3 in CORRECTNESS_DISCLAIMER.md), so the
// earlier commit took effect before the later one was acknowledged. This
// orders the two clocks' events only through Spanner's own guarantee; it
// never compares their readings.
//
// Without the bound such an operation could take effect at any time up
// to the end of the history, and each one doubles the orders porcupine
// has to consider.
func latestEffects(ops []Op) map[int]time.Duration {
	type anchor struct {
		commit time.Time
		ret    time.Duration
	}
	var anchors []anchor
	for _, o := range ops {
		if o.Outcome == OK && !o.Settled && !o.Commit.IsZero() && o.Return != Never {
			anchors = append(anchors, anchor{o.Commit, o.Return})
		}
	}
	slices.SortFunc(anchors, func(a, b anchor) int { return a.commit.Compare(b.commit) })
	// soonest[i] is the earliest return among anchors[i:].
	soonest := make([]time.Duration, len(anchors)+1)
	soonest[len(anchors)] = -1
	for i := len(anchors) - 1; i >= 0; i-- {
		soonest[i] = anchors[i].ret
		if next := soonest[i+1]; next >= 0 && next < soonest[i] {
			soonest[i] = next
		}
	}
	bounds := map[int]time.Duration{}
	for _, o := range ops {
		if o.Commit.IsZero() || !(o.Settled || o.Outcome == Unknown || o.Return == Never) {
			continue
		}
		i, found := slices.BinarySearchFunc(anchors, o.Commit, func(a anchor, t time.Time) int { return a.commit.Compare(t) })
		for found && i < len(anchors) && !anchors[i].commit.After(o.Commit) {
			i++
		}
		if soonest[i] >= 0 {
			bounds[o.ID] = max(soonest[i], o.Call)
		}
	}
	return bounds
}

// checkLinearizable runs porcupine on one name's operations; bounds are
// the latest times some operations of unknown outcome can have taken
// effect (latestEffects).
func (r *Report) checkLinearizable(name string, ops []Op, bounds map[int]time.Duration, cfg Config) {
	var (
		in   []*Op
		pops []porcupine.Operation
	)
	end := time.Duration(0)
	for _, o := range ops {
		end = max(end, o.Call, o.Return)
	}
	end++
	clients := map[string]int{}
	for i := range ops {
		o := &ops[i]
		if !inModel(o) || r.unreturned[o.ID] {
			// A renewal of a token no call returned: the model knows no
			// acquisition of it, and CheckLimbo judges it.
			continue
		}
		// An operation of unknown outcome, even one settled later, may
		// take effect after its call returned: its commit may still land.
		ret := o.Return
		if ret == Never || o.Outcome == Unknown || o.Settled {
			ret = end
			if b, ok := bounds[o.ID]; ok {
				ret = b
			}
		}
		if _, ok := clients[o.Client]; !ok {
			clients[o.Client] = len(clients)
		}
		in = append(in, o)
		pops = append(pops, porcupine.Operation{ClientId: clients[o.Client], Input: o, Call: int64(o.Call), Output: o.Outcome, Return: int64(ret)})
	}
	r.Checked[CheckLinearizable] += len(pops)
	if len(pops) == 0 {
		return
	}
	model := lockModel()
	res, info := porcupine.CheckOperationsVerbose(model, pops, cfg.Timeout)
	switch res {
	case porcupine.Unknown:
		r.TimedOut = append(r.TimedOut, name)
		if r.Linearizability == porcupine.Ok {
			r.Linearizability = porcupine.Unknown
		}
		return
	case porcupine.Ok:
		return
	}
	r.Linearizability = porcupine.Illegal
	v := explainIllegal(model, name, in, info)
	if path, err := visualize(model, info, name, cfg.VisualizeDir); err == nil {
		r.Visualizations = append(r.Visualizations, path)
		v.Detail = append(v.Detail, "porcupine's visualization of "+name+": "+path)
	} else {
		v.Detail = append(v.Detail, "could not write porcupine's visualization: "+err.Error())
	}
	r.violate(v)
}

// explainIllegal turns porcupine's longest partial linearization into the
// offending sub-history: the last operations it could order, the states
// they left the model in, and the operations it could not place, with why.
func explainIllegal(model porcupine.Model, name string, in []*Op, info porcupine.LinearizationInfo) Violation {
	var longest []int
	for _, p := range info.PartialLinearizations() {
		for _, l := range p {
			if len(l) > len(longest) {
				longest = l
			}
		}
	}
	placed := map[int]bool{}
	for _, id := range longest {
		placed[id] = true
	}
	// The frontier: operations left out that had to be placed before the
	// earliest return among them.
	frontier := time.Duration(1<<63 - 1)
	for id, o := range in {
		if !placed[id] {
			frontier = min(frontier, retOrEnd(o))
		}
	}
	var stuck []*Op
	for id, o := range in {
		if !placed[id] && o.Call <= frontier {
			stuck = append(stuck, o)
		}
	}
	// Replay the linearization to show the states it went through.
	const shown = 8
	state := model.Init()
	v := Violation{Check: CheckLinearizable, Name: name}
	var lines []string
	for i, id := range longest {
		_, state = model.Step(state, in[id], in[id].Outcome)
		if i >= len(longest)-shown {
			v.Ops = append(v.Ops, *in[id])
			lines = append(lines, fmt.Sprintf("after #%d: %s", in[id].ID, model.DescribeState(state)))
		}
	}
	v.Detail = append([]string{fmt.Sprintf("the longest order found places %d of %d operations; the last %d, with the model's states after each:", len(longest), len(in), min(shown, len(longest)))}, lines...)
	v.Detail = append(v.Detail, "none of these fits after them:")
	states, _ := state.([]any)
	var why string
	for _, o := range stuck {
		v.Ops = append(v.Ops, *o)
		reasons := map[string]bool{}
		for _, s := range states {
			if _, reason := effect(s.(lockState), o); reason != "" {
				reasons[reason] = true
			}
		}
		rs := sortedKeys(reasons)
		if len(rs) == 0 {
			rs = []string{"it fits here, but then a later operation does not: the order is forced by real time"}
		}
		if why == "" {
			why = rs[0]
		}
		v.Detail = append(v.Detail, fmt.Sprintf("  #%d: %s", o.ID, strings.Join(rs, "; ")))
	}
	v.Message = "no order of the operations agrees with real time and with what Spanner can commit: " + why
	return v
}

func retOrEnd(o *Op) time.Duration {
	if o.Return == Never {
		return time.Duration(1<<63 - 1)
	}
	return o.Return
}

var unsafeFileChars = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// visualize writes porcupine's HTML visualization of one name's check.
func visualize(model porcupine.Model, info porcupine.LinearizationInfo, name, dir string) (string, error) {
	f, err := os.CreateTemp(dir, "spanmutex-history-"+unsafeFileChars.ReplaceAllString(name, "_")+"-*.html")
	if err != nil {
		return "", err
	}
	if err := porcupine.Visualize(model, info, f); err != nil {
		f.Close()
		return "", err
	}
	return f.Name(), f.Close()
}

// checkTimeline runs the direct checks of one name on Spanner's commit
// timestamps only.
func (r *Report) checkTimeline(name string, ops []Op, cfg Config) {
	var acqs []Op
	for _, o := range ops {
		if o.Kind == Acquire && o.Outcome == OK && !o.Commit.IsZero() {
			acqs = append(acqs, o)
		}
	}
	slices.SortStableFunc(acqs, func(a, b Op) int { return a.Commit.Compare(b.Commit) })
	r.Checked[CheckTokens] += len(acqs)
	for i := 1; i < len(acqs); i++ {
		if acqs[i].Token <= acqs[i-1].Token {
			r.violate(Violation{Check: CheckTokens, Name: name, Ops: []Op{acqs[i-1], acqs[i]},
				Message: fmt.Sprintf("token %d was acquired after token %d (by commit timestamp): tokens must strictly increase", acqs[i].Token, acqs[i-1].Token)})
		}
	}
	index := map[int64]int{} // token -> its acquisition in acqs
	for i, a := range acqs {
		if _, dup := index[a.Token]; !dup {
			index[a.Token] = i
		}
	}
	lastAlive := r.checkDisjoint(name, ops, acqs, index)
	r.checkTakeovers(name, acqs, index, lastAlive, cfg)
	r.checkRunOnce(name, ops)
}

// checkDisjoint checks holders' intervals by commit timestamps: each
// committed guarded write and renewal of a token in acqs (the name's
// acquisitions in commit order, index their positions by token) came after
// its acquisition and before the next. It returns, by token, the last
// commit that proved the holder alive: its acquisition or latest renewal.
func (r *Report) checkDisjoint(name string, ops, acqs []Op, index map[int64]int) map[int64]time.Time {
	lastAlive := map[int64]time.Time{} // token -> last commit that proved the holder alive
	for _, a := range acqs {
		lastAlive[a.Token] = a.Commit
	}
	for _, o := range ops {
		if (o.Kind != Write && o.Kind != Renew) || o.Outcome != OK || o.Commit.IsZero() || o.Token == 0 {
			continue
		}
		i, ok := index[o.Token]
		if !ok {
			continue
		}
		r.Checked[CheckDisjoint]++
		a := acqs[i]
		if o.Kind == Renew && o.Commit.After(lastAlive[o.Token]) {
			lastAlive[o.Token] = o.Commit
		}
		if !o.Commit.After(a.Commit) {
			r.violate(Violation{Check: CheckDisjoint, Name: name, Ops: []Op{a, o},
				Message: fmt.Sprintf("a %s of token %d committed at %s, not after its own acquisition at %s", o.Kind, o.Token, ts(o.Commit), ts(a.Commit))})
		}
		if i+1 < len(acqs) && !o.Commit.Before(acqs[i+1].Commit) {
			next := acqs[i+1]
			r.violate(Violation{Check: CheckDisjoint, Name: name, Ops: window(ops, a, o, next),
				Message: fmt.Sprintf("two holders at once: a %s of token %d committed at %s, after token %d was acquired at %s", o.Kind, o.Token, ts(o.Commit), next.Token, ts(next.Commit))})
		}
	}
	return lastAlive
}

// checkTakeovers checks that each takeover in acqs (as for checkDisjoint)
// committed only after the lease the previous holder declared had passed
// since lastAlive, by Spanner's clock: the taker's own lease does not
// matter.
func (r *Report) checkTakeovers(name string, acqs []Op, index map[int64]int, lastAlive map[int64]time.Time, cfg Config) {
	for _, a := range acqs {
		if !a.Takeover {
			continue
		}
		i, ok := index[a.Token-1]
		if !ok {
			r.UnseenTakeovers++ // the previous holder's Lock call returned no lease
			continue
		}
		prev := acqs[i]
		lease := declaredLease(prev, cfg.Lease)
		if lease <= 0 {
			continue
		}
		r.Checked[CheckTakeover]++
		if silent := a.Commit.Sub(lastAlive[prev.Token]); silent < lease-clockTolerance {
			r.violate(Violation{Check: CheckTakeover, Name: name, Ops: []Op{prev, a},
				Message: fmt.Sprintf("token %d (lease %v) took over from token %d after %v of silence by commit timestamps, less than the lease %v that token %d declared",
					a.Token, declaredLease(a, cfg.Lease), prev.Token, silent, lease, prev.Token)})
		}
	}
}

// checkRunOnce checks that a run-once section recorded DONE at most once,
// and counts it in RanTwice if its body started under more than one token.
func (r *Report) checkRunOnce(name string, ops []Op) {
	var completions []Op
	starts := map[int64]bool{}
	for _, o := range ops {
		switch {
		case o.Kind == Complete && o.Outcome == OK:
			completions = append(completions, o)
		case o.Kind == SectionStart && o.RunOnce:
			starts[o.Token] = true
		}
	}
	if len(starts) > 1 {
		r.RanTwice++
	}
	if len(completions) > 0 || len(starts) > 0 {
		r.Checked[CheckRunOnce]++
	}
	if len(completions) > 1 {
		r.violate(Violation{Check: CheckRunOnce, Name: name, Ops: completions,
			Message: fmt.Sprintf("the run-once section was completed %d times", len(completions))})
	}
}

// window returns the operations of ops that the local clock places between
// the first and the last of the given ones (which are included), in order
// of invocation: the context of a violation.
func window(ops []Op, involved ...Op) []Op {
	lo, hi := time.Duration(1<<63-1), time.Duration(0)
	ids := map[int]bool{}
	for _, o := range involved {
		lo, hi = min(lo, o.Call), max(hi, retOrEnd(&o))
		ids[o.ID] = true
	}
	var out []Op
	for _, o := range ops {
		if ids[o.ID] || (o.Call >= lo && o.Call <= hi && o.Kind != Renew) {
			out = append(out, o)
		}
	}
	slices.SortFunc(out, func(a, b Op) int { return cmp.Compare(a.Call, b.Call) })
	if len(out) > maxSubHistory {
		// Keep the involved operations and as much context as fits.
		var kept []Op
		for _, o := range out {
			if ids[o.ID] || len(kept) < maxSubHistory-len(involved) {
				kept = append(kept, o)
			}
		}
		out = kept
	}
	return out
}

func ts(t time.Time) string { return t.UTC().Format("15:04:05.000000") }

// checkResources checks, per resource, that committed guarded writes in
// commit-timestamp order carry tokens that never decrease, all of one name.
func (r *Report) checkResources(ops []Op) {
	byRes := map[string][]Op{}
	for _, o := range ops {
		if o.Kind == Write && o.Outcome == OK && !o.Commit.IsZero() {
			byRes[o.Resource] = append(byRes[o.Resource], o)
		}
	}
	for _, res := range sortedKeys(byRes) {
		ws := byRes[res]
		slices.SortStableFunc(ws, func(a, b Op) int { return a.Commit.Compare(b.Commit) })
		r.Checked[CheckResourceTokens] += len(ws)
		for i := 1; i < len(ws); i++ {
			prev, w := ws[i-1], ws[i]
			switch {
			case w.Name != prev.Name:
				r.violate(Violation{Check: CheckResourceTokens, Name: res, Ops: []Op{prev, w},
					Message: fmt.Sprintf("resource %q was written under two names, %q and %q: their tokens are not comparable", res, prev.Name, w.Name)})
			case w.Token < prev.Token:
				r.violate(Violation{Check: CheckResourceTokens, Name: res, Ops: []Op{prev, w},
					Message: fmt.Sprintf("stale write: token %d wrote %q at %s, after token %d had written it at %s", w.Token, res, ts(w.Commit), prev.Token, ts(prev.Commit))})
			}
		}
	}
}

// countBeliefs counts how often a holder believed it held a name (between
// its SectionStart and SectionEnd, local clock) while another did too.
// That is allowed: a holder that lost its lease cannot be stopped, only
// fenced; the checks above show whether the fencing held.
func (r *Report) countBeliefs(ops []Op) {
	type span struct {
		token      int64
		start, end time.Duration
	}
	type key struct {
		client string
		token  int64
	}
	open := map[key]time.Duration{}
	var spans []span
	end := time.Duration(0)
	for _, o := range ops {
		end = max(end, o.Call, o.Return)
	}
	for _, o := range ops {
		switch o.Kind {
		case SectionStart:
			open[key{o.Client, o.Token}] = o.Call
		case SectionEnd:
			k := key{o.Client, o.Token}
			if s, ok := open[k]; ok {
				spans = append(spans, span{o.Token, s, o.Call})
				delete(open, k)
			}
		}
	}
	for k, s := range open {
		spans = append(spans, span{k.token, s, end})
	}
	slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(a.start, b.start) })
	reach, reachToken := time.Duration(-1), int64(0)
	for _, s := range spans {
		if s.start < reach && s.token != reachToken {
			r.BeliefOverlaps++
		}
		if s.end > reach {
			reach, reachToken = s.end, s.token
		}
	}
}
