package history

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/anishathalye/porcupine"
)

// kindOrder is the order in which operations are listed by kind.
var kindOrder = []Kind{Acquire, Renew, Write, Release, SectionStart, SectionEnd, Complete, Fail, SeeDone, Pause}

// outcomeOrder is the order in which outcomes are listed.
var outcomeOrder = []Outcome{OK, LeaseLost, NoEffect, Unknown}

// WriteOperations writes how many operations were checked, by kind and
// outcome.
func (r *Report) WriteOperations(w io.Writer) {
	fmt.Fprintf(w, "Operations: %d\n", r.Ops)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, k := range kindOrder {
		byOutcome := r.Kinds[k]
		if len(byOutcome) == 0 {
			continue
		}
		total := 0
		var parts []string
		for _, o := range outcomeOrder {
			if n := byOutcome[o]; n > 0 {
				total += n
				parts = append(parts, fmt.Sprintf("%s %d", o, n))
			}
		}
		fmt.Fprintf(tw, "  %s\t%d\t%s\n", k, total, strings.Join(parts, ", "))
	}
	_ = tw.Flush()
}

// checkDescriptions say what each check looked at, for the report.
var checkDescriptions = map[string]string{
	CheckLinearizable:   "operations, per name, against the model (porcupine)",
	CheckTokens:         "acquisitions, in commit order",
	CheckDisjoint:       "guarded writes and renewals, within their holder's interval",
	CheckResourceTokens: "guarded writes, per resource in commit order",
	CheckRunOnce:        "run-once sections",
	CheckTakeover:       "takeovers, against the lease the previous holder declared",
	CheckTable:          "operations, against the table read back",
	CheckLockErrors:     "Lock calls that returned no lease, against Lock's contract",
	CheckLeftHeld:       "locks, read back after the run",
	CheckLiveness:       "free stretches of locks while a Lock call waited, against the stall bound",
	CheckLimbo:          "leases a call was handed and renewed but no call returned, against lapsing, or being held past their lease, while the call waited",
}

// WriteChecks writes each check's verdict, what the run went through, and
// the number of violations.
func (r *Report) WriteChecks(w io.Writer) {
	failed := map[string]int{}
	for _, v := range r.Violations {
		failed[v.Check]++
	}
	fmt.Fprintln(w, "Checks:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, c := range checkOrder {
		verdict := "ok"
		switch {
		case failed[c] > 0:
			verdict = fmt.Sprintf("VIOLATED (%d)", failed[c])
		case c == CheckLinearizable && r.Linearizability == porcupine.Unknown:
			verdict = "timed out on " + strings.Join(r.TimedOut, ", ")
		case r.Checked[c] == 0:
			verdict = "nothing to check"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%d %s\n", c, verdict, r.Checked[c], checkDescriptions[c])
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "Seen, not violations: %d takeovers, %d stale guarded writes refused by Guard, %d times two holders believed they held a name at once, %d run-once sections started more than once (retries and takeovers), %d outcomes settled by read-back",
		r.Takeovers, r.StaleWritesRefused, r.BeliefOverlaps, r.RanTwice, r.Settled)
	fmt.Fprintf(w, ", %d Lock calls that gave up (ErrNotObtained), %d takeovers of a token no Lock call returned", r.GaveUp, r.UnseenTakeovers)
	if r.UnattributedRenewals > 0 {
		fmt.Fprintf(w, ", %d renewals not attributed", r.UnattributedRenewals)
	}
	fmt.Fprintln(w)
	r.writeLimbo(w)
	fmt.Fprintf(w, "Violations: %d\n", len(r.Violations))
}

// writeLimbo lists the leases in limbo, if any.
func (r *Report) writeLimbo(w io.Writer) {
	if len(r.Limbo) == 0 {
		return
	}
	lapsed := 0
	for _, l := range r.Limbo {
		if l.Violation {
			lapsed++
		}
	}
	fmt.Fprintf(w, "Leases in limbo: %d (a call was handed them and their client renewed them, but no call returned them); %d violations of %s (left to lapse, or held past their lease, while the call waited)\n",
		len(r.Limbo), lapsed, CheckLimbo)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, l := range r.Limbo {
		fmt.Fprintf(tw, "  %s\ttoken %d\t%s\t%s, the last at %s: %s\n", l.Name, l.Token, l.Client, count(l.Renewals, "renewal"), ts(l.LastRenewal), l.End)
	}
	_ = tw.Flush()
}

// WriteViolations writes each violation with its offending sub-history.
func (r *Report) WriteViolations(w io.Writer) {
	for i, v := range r.Violations {
		fmt.Fprintf(w, "\nVIOLATION %d [%s] %s: %s\n", i+1, v.Check, v.Name, v.Message)
		if len(v.Ops) > 0 {
			fmt.Fprintln(w, "  sub-history ([call, return] local seconds since start; commit = Spanner commit timestamp, UTC):")
			for _, o := range v.Ops {
				fmt.Fprintf(w, "    %s\n", o)
			}
		}
		for _, d := range v.Detail {
			fmt.Fprintf(w, "  %s\n", d)
		}
	}
}

// Write writes the whole report: operations, checks, liveness, violations.
func (r *Report) Write(w io.Writer) {
	r.WriteOperations(w)
	r.WriteChecks(w)
	r.WriteLiveness(w)
	r.WriteViolations(w)
}

// ChecksViolated returns the names of the checks that found a violation.
func (r *Report) ChecksViolated() []string {
	var out []string
	for _, v := range r.Violations {
		if !slices.Contains(out, v.Check) {
			out = append(out, v.Check)
		}
	}
	slices.Sort(out)
	return out
}
