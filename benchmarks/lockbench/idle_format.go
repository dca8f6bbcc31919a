package lockbench

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spanmutex/spanmutex/internal/bench"
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
	fmt.Fprintf(&b, "\nWaiting: one process makes W Lock calls, each on its own lock another process holds (spanmutex with and without wake-ups, each with and without sessions: NewScope(), NewScope(WithoutWakeUps()), NewScope(WithSessions()), NewScope(WithSessions(), WithoutWakeUps())). Own Commits: Commits not tagged spanmutex.session (a waiting entry's renewals, spanmutex.lock.entry-renew); reads: StreamingRead, Read, ExecuteStreamingSql and ExecuteSql calls. The first %v are counted from just before the Lock calls start (their joins and the session's start included).\n\n", rep.Arrival)
	if rep.PlainHolder {
		b.WriteString("The locks they wait on are held by a process of NewScope(), without sessions (--idle-plain-holder).\n\n")
	} else {
		b.WriteString("The locks they wait on are held by a process of the waiters' Scope options less WithoutWakeUps: through a session where theirs has WithSessions.\n\n")
	}
	first := fmt.Sprintf("first %v: ", rep.Arrival)
	writeMarkdown(&b, []string{"W waiting", "lock", "RPCs/s", "per waiter", "÷ etcd", "own Commits/s", "reads/s per waiter", first + "RPCs/s per waiter", first + "reads/s per waiter"}, waitRows(rep.Runs))
	b.WriteString("\nBy method, per second of the window (and of a waiter's first span):\n\n")
	writeMarkdown(&b, []string{"run", "by method, per second"}, methodRows(rep.Runs))
	for _, r := range rep.Runs {
		if r.Broken > 0 {
			fmt.Fprintf(&b, "\n%s: %d %s; the first: %s\n", runName(r), r.Broken, brokenNoun(r), r.FirstErr)
		}
		if len(r.Warnings) > 0 {
			fmt.Fprintf(&b, "\n%s: the library warned (by the window's end): %s\n", runName(r), warningList(r.Warnings))
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

// waitingKinds returns the locks of the waiting table, in its order.
func waitingKinds() []Kind {
	return []Kind{Spanmutex, SpanmutexPoll, SpanmutexSessions, SpanmutexSessionsPoll, Etcd}
}

// waitRows returns the waiting table's rows: one per W and lock measured.
func waitRows(runs []IdleRun) [][]string {
	var rows [][]string
	for _, w := range idleCounts(runs, true) {
		e, eok := findIdleRun(runs, Etcd, true, w)
		for _, k := range waitingKinds() {
			r, ok := findIdleRun(runs, k, true, w)
			if !ok {
				continue
			}
			row := append([]string{fmt.Sprint(w), kindLabel(k)}, rateCells(r, true)...)
			if k == Etcd {
				row = append(row, "–", "–", "–")
			} else {
				row = append(row, ratioCell(r, true, e, eok), rate(ownCommits(r.Counted()), r.Window, 1), rate(reads(r.Counted()), r.Window, r.Count))
			}
			rows = append(rows, append(row, arrivalCells(r)...))
		}
	}
	return rows
}

// arrivalCells returns a waiter run's RPCs/s and reads/s per waiter over
// its first span, "–" where not measured (reads: for etcd).
func arrivalCells(r IdleRun) []string {
	c := r.ArrivalCounted()
	if r.Arrival.Span <= 0 {
		return []string{"–", "–"}
	}
	all := rate(bench.TotalRPCs(c), r.Arrival.Span, r.Count)
	if r.Kind == Etcd {
		return []string{all, "–"}
	}
	return []string{all, rate(reads(c), r.Arrival.Span, r.Count)}
}

// rate formats n over span, per second and per each of per.
func rate(n int64, span time.Duration, per int) string {
	return perLockCell(float64(n) / span.Seconds() / float64(per))
}

// reads returns the calls of counted (by method) that read: Spanner's
// reads by key and by statement.
func reads(counted map[string]int64) int64 {
	var n int64
	for _, m := range []string{"Read", "StreamingRead", "ExecuteSql", "ExecuteStreamingSql"} {
		n += counted[m]
	}
	return n
}

// ownCommits returns the Commits of counted (by method, Commits by tag)
// that are not a session's: writes a waiting call or a lock makes for
// itself.
func ownCommits(counted map[string]int64) int64 {
	var n int64
	for m, c := range counted {
		if (m == "Commit" || strings.HasPrefix(m, "Commit (")) && m != "Commit (spanmutex.session)" {
			n += c
		}
	}
	return n
}

// kindLabel names kind as the waiting table does: by its Scope's options.
func kindLabel(kind Kind) string {
	switch kind {
	case Spanmutex:
		return "spanmutex"
	case SpanmutexPoll:
		return "spanmutex WithoutWakeUps"
	case SpanmutexSessions:
		return "spanmutex WithSessions"
	case SpanmutexSessionsPoll:
		return "spanmutex WithSessions, WithoutWakeUps"
	}
	return string(kind)
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

// methodRows returns a row per run: its counts by method, per second;
// and a row per waiter run's first span.
func methodRows(runs []IdleRun) [][]string {
	var rows [][]string
	for _, r := range runs {
		rows = append(rows, []string{runName(r), byMethod(r.Counted(), r.Window)})
		if r.Arrival.Span > 0 {
			rows = append(rows, []string{fmt.Sprintf("%s, first %v", runName(r), r.Arrival.Span.Round(100*time.Millisecond)), byMethod(r.ArrivalCounted(), r.Arrival.Span)})
		}
	}
	return rows
}

// byMethod formats counted, by method, per second of span.
func byMethod(counted map[string]int64, span time.Duration) string {
	var parts []string
	for _, m := range slices.Sorted(maps.Keys(counted)) {
		if counted[m] > 0 {
			parts = append(parts, fmt.Sprintf("%s %.2f", m, float64(counted[m])/span.Seconds()))
		}
	}
	return strings.Join(parts, ", ")
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

// warningList formats warnings counted by message, as "msg ×2; other ×1".
func warningList(warnings map[string]int) string {
	var parts []string
	for _, m := range slices.Sorted(maps.Keys(warnings)) {
		parts = append(parts, fmt.Sprintf("%q ×%d", m, warnings[m]))
	}
	return strings.Join(parts, "; ")
}

// writeMarkdown writes a markdown table.
func writeMarkdown(b *strings.Builder, header []string, rows [][]string) {
	fmt.Fprintf(b, "| %s |\n|%s\n", strings.Join(header, " | "), strings.Repeat("---|", len(header)))
	for _, r := range rows {
		fmt.Fprintf(b, "| %s |\n", strings.Join(r, " | "))
	}
}
