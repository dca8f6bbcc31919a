package lockbench

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// FormatIdle writes rep as markdown tables: holding, waiting, and what was
// sent by method; then the runs whose locks did not stay idle.
func FormatIdle(w io.Writer, rep IdleReport) error {
	var b strings.Builder
	dialect := rep.Dialect.String()
	fmt.Fprintf(&b, "### Idle cost, %s: lease %v, window %v (opening %v after the last acquisition or Lock call)\n\n", dialect, rep.Lease, rep.Window, rep.Warmup)
	b.WriteString("spanmutex: RPCs started by the process (unary calls and streams opened); etcd: messages the process's client sent (unary requests, plus every message sent on its LeaseKeepAlive and Watch streams, counted by wrapping the streams' SendMsg).\n\n")
	fmt.Fprintf(&b, "Holding: one process holds N locks (spanmutex: one Scope, N Locks, each renewing itself (NewScope()) or all kept alive by the Scope's session (NewScope(WithSessions())); etcd: one session, N Mutexes).\n\n")
	writeMarkdown(&b, []string{"N held", "spanmutex RPCs/s", "per lock", "WithSessions RPCs/s", "per lock", "etcd messages/s", "per lock", "spanmutex ÷ etcd", "WithSessions ÷ etcd"}, holdRows(rep.Runs))
	fmt.Fprintf(&b, "\nWaiting: one process makes W Lock calls, each on its own lock another process holds (spanmutex with and without wake-ups: NewScope() and NewScope(WithoutWakeUps())).\n\n")
	writeMarkdown(&b, []string{"W waiting", "spanmutex RPCs/s", "per waiter", "WithoutWakeUps RPCs/s", "per waiter", "etcd messages/s", "per waiter", "spanmutex ÷ etcd", "WithoutWakeUps ÷ etcd"}, waitRows(rep.Runs))
	b.WriteString("\nBy method, per second of the window:\n\n")
	writeMarkdown(&b, []string{"run", "by method, per second"}, methodRows(rep.Runs))
	for _, r := range rep.Runs {
		if r.Broken > 0 {
			fmt.Fprintf(&b, "\n%s: %d %s; the first: %s\n", runName(r), r.Broken, brokenNoun(r), r.FirstErr)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// findIdleRun returns the run of kind, waiting or not, on count locks.
func findIdleRun(runs []IdleRun, kind Kind, waiting bool, count int) (IdleRun, bool) {
	for _, r := range runs {
		if r.Kind == kind && r.Waiting == waiting && r.Count == count {
			return r, true
		}
	}
	return IdleRun{}, false
}

// idleCounts returns the distinct counts of the runs waiting (or not), in
// order of first appearance.
func idleCounts(runs []IdleRun, waiting bool) []int {
	var out []int
	for _, r := range runs {
		if r.Waiting == waiting && !slices.Contains(out, r.Count) {
			out = append(out, r.Count)
		}
	}
	return out
}

// holdRows returns the holding table's rows.
func holdRows(runs []IdleRun) [][]string {
	var rows [][]string
	for _, n := range idleCounts(runs, false) {
		s, sok := findIdleRun(runs, Spanmutex, false, n)
		ss, ssok := findIdleRun(runs, SpanmutexSessions, false, n)
		e, eok := findIdleRun(runs, Etcd, false, n)
		row := []string{fmt.Sprint(n)}
		row = append(row, rateCells(s, sok)...)
		row = append(row, rateCells(ss, ssok)...)
		row = append(row, rateCells(e, eok)...)
		rows = append(rows, append(row, ratioCell(s, sok, e, eok), ratioCell(ss, ssok, e, eok)))
	}
	return rows
}

// waitRows returns the waiting table's rows.
func waitRows(runs []IdleRun) [][]string {
	var rows [][]string
	for _, w := range idleCounts(runs, true) {
		s, sok := findIdleRun(runs, Spanmutex, true, w)
		p, pok := findIdleRun(runs, SpanmutexPoll, true, w)
		e, eok := findIdleRun(runs, Etcd, true, w)
		row := []string{fmt.Sprint(w)}
		row = append(row, rateCells(s, sok)...)
		row = append(row, rateCells(p, pok)...)
		row = append(row, rateCells(e, eok)...)
		rows = append(rows, append(row, ratioCell(s, sok, e, eok), ratioCell(p, pok, e, eok)))
	}
	return rows
}

// rateCells returns a run's per-second and per-lock cells, "–" if absent.
func rateCells(r IdleRun, ok bool) []string {
	if !ok {
		return []string{"–", "–"}
	}
	return []string{fmt.Sprintf("%.2f", r.PerSecond()), perLockCell(r.PerLock())}
}

// perLockCell formats a per-lock rate: three decimals, four below 0.01
// (etcd's one keepalive shared by a thousand locks).
func perLockCell(v float64) string {
	if v > 0 && v < 0.01 {
		return fmt.Sprintf("%.4f", v)
	}
	return fmt.Sprintf("%.3f", v)
}

// ratioCell returns a's rate over b's, "–" if either is absent or b sent
// nothing.
func ratioCell(a IdleRun, aok bool, b IdleRun, bok bool) string {
	if !aok || !bok || b.PerSecond() == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f×", a.PerSecond()/b.PerSecond())
}

// methodRows returns a row per run: its counts by method, per second.
func methodRows(runs []IdleRun) [][]string {
	var rows [][]string
	for _, r := range runs {
		counted := r.Counted()
		var parts []string
		for _, m := range slices.Sorted(maps.Keys(counted)) {
			if counted[m] > 0 {
				parts = append(parts, fmt.Sprintf("%s %.2f", m, float64(counted[m])/r.Window.Seconds()))
			}
		}
		rows = append(rows, []string{runName(r), strings.Join(parts, ", ")})
	}
	return rows
}

// runName names a run, as "spanmutex holding 10" or "etcd waiting 1".
func runName(r IdleRun) string {
	if r.Waiting {
		return fmt.Sprintf("%s waiting %d", r.Kind, r.Count)
	}
	return fmt.Sprintf("%s holding %d", r.Kind, r.Count)
}

// brokenNoun says what Broken counts for r.
func brokenNoun(r IdleRun) string {
	if r.Waiting {
		return "Lock calls returned before the window ended"
	}
	return "leases lost by the window's end"
}

// writeMarkdown writes a markdown table.
func writeMarkdown(b *strings.Builder, header []string, rows [][]string) {
	fmt.Fprintf(b, "| %s |\n|%s\n", strings.Join(header, " | "), strings.Repeat("---|", len(header)))
	for _, r := range rows {
		fmt.Fprintf(b, "| %s |\n", strings.Join(r, " | "))
	}
}
