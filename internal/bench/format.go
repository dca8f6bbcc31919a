package bench

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Format writes results as a table, one row per run, followed by the
// ratios of the naive lock to spanmutex (Ratios), the RPCs by method, what
// went wrong if anything did, and how to read the figures.
func Format(w io.Writer, results []Result) error {
	var b strings.Builder
	if len(results) > 0 {
		fmt.Fprintf(&b, "Each run: N contenders spread over CLIENTS Spanner clients, each acquiring and at once releasing one lock, for %v.\n\n",
			results[0].Duration)
	}
	writeRuns(&b, results)
	writeRatios(&b, results)
	if len(results) > 0 {
		writeTotals(&b, results)
		writeByMethod(&b, results)
	}
	writeProblems(&b, results)
	b.WriteString(howToRead)
	_, err := io.WriteString(w, b.String())
	return err
}

// writeRuns appends the main table to b: one row per run, its costs per
// acquisition and its latencies.
func writeRuns(b *strings.Builder, results []Result) {
	writeTable(b, []string{"LOCK", "N", "CLIENTS", "ACQUISITIONS", "ACQ/S", "COMMITS/ACQ", "READS/ACQ", "RPCS/ACQ",
		"WAIT P50", "WAIT P99", "FIFO VIOLATIONS", "HAND-OFFS", "HAND-OFF P50", "HAND-OFF P99", "CANCELLED", "ERRORS"},
		func(row func(cells ...any)) {
			for _, r := range results {
				some := r.Acquisitions > 0
				row(r.Kind, r.Contenders, r.Clients, r.Acquisitions, fmt.Sprintf("%.1f", r.PerSecond()),
					formatFloat(r.PerAcquisition(r.Commits())), formatFloat(r.PerAcquisition(r.Reads())),
					formatFloat(r.PerAcquisition(r.RPCs)),
					formatDuration(r.WaitP50, some), formatDuration(r.WaitP99, some), r.FIFOViolations,
					r.HandOffs, formatDuration(r.HandOffP50, r.HandOffs > 0), formatDuration(r.HandOffP99, r.HandOffs > 0),
					r.Cancelled, r.Errors)
			}
		})
}

// writeRatios appends to b the table of the naive lock's costs and
// throughput against spanmutex's, if the results hold both for some N.
func writeRatios(b *strings.Builder, results []Result) {
	ratios := Ratios(results)
	if len(ratios) == 0 {
		return
	}
	b.WriteString("\nNaive lock compared with spanmutex, measured in the same run:\n\n")
	writeTable(b, []string{"N", "COMMITS/ACQ NAIVE÷OURS", "RPCS/ACQ NAIVE÷OURS", "ACQ/S OURS÷NAIVE"},
		func(row func(cells ...any)) {
			for _, q := range ratios {
				row(q.Contenders, formatRatio(q.Commits), formatRatio(q.RPCs), formatRatio(q.Throughput))
			}
		})
}

// writeTotals appends to b the table of each run's totals, its longest
// overtaking, its commit timestamps' lead and how long it took to stop.
func writeTotals(b *strings.Builder, results []Result) {
	b.WriteString("\nTotals per run; the longest head start of a contender overtaken in a FIFO violation; how far Spanner's\n" +
		"commit timestamps ran ahead of the local clock; how long after the window every contender had stopped:\n\n")
	writeTable(b, []string{"LOCK", "N", "COMMITS", "READS", "RPCS", "MAX OVERTAKEN", "COMMIT TS AHEAD P50", "MAX", "STOPPED AFTER"},
		func(row func(cells ...any)) {
			for _, r := range results {
				commits := r.Commits() > 0
				row(r.Kind, r.Contenders, r.Commits(), r.Reads(), r.RPCs,
					formatDuration(r.MaxOvertaken, r.FIFOViolations > 0), formatDuration(r.CommitLeadP50, commits), formatDuration(r.CommitLeadMax, commits), formatDuration(r.Stopped, true))
			}
		})
}

// writeByMethod appends to b the table of each run's RPCs by method.
func writeByMethod(b *strings.Builder, results []Result) {
	b.WriteString("\nRPCs by method, per acquisition (in total when nothing was acquired):\n\n")
	writeTable(b, []string{"LOCK", "N", "RPCS BY METHOD"}, func(row func(cells ...any)) {
		for _, r := range results {
			row(r.Kind, r.Contenders, byMethod(r))
		}
	})
}

// writeProblems appends to b, per run, its first Lock/Unlock error and the
// warnings the locks logged, if any.
func writeProblems(b *strings.Builder, results []Result) {
	for _, r := range results {
		if r.Errors > 0 {
			fmt.Fprintf(b, "\n%s, N=%d: %d Lock/Unlock errors; the first: %s\n", r.Kind, r.Contenders, r.Errors, r.FirstError)
		}
		if len(r.Warnings) > 0 {
			fmt.Fprintf(b, "\n%s, N=%d: the locks logged warnings:\n", r.Kind, r.Contenders)
			for _, msg := range slices.Sorted(maps.Keys(r.Warnings)) {
				fmt.Fprintf(b, "  %d× %s\n", r.Warnings[msg], msg)
			}
		}
	}
}

// howToRead ends Format's output: what the columns mean.
const howToRead = `
How to read this:
  - Figures are from the Cloud Spanner emulator, which runs one read-write
    transaction at a time and aborts the others: abort rates, and so commits
    and RPCs per acquisition, exceed production Spanner's, most for the naive
    lock. Compare the two locks within a run rather than the absolute numbers.
  - ACQUISITIONS: Lock calls that returned holding the lock, including those
    that completed in the drain after the window; ACQ/S counts only those
    completed within the window. CANCELLED: Lock calls still waiting at the
    end of the drain.
  - Costs per acquisition cover the whole run, the drain and the clean-up of
    cancelled waiters included, counted by gRPC method on the run's clients.
    COMMITS: Commit RPCs, one per read-write transaction attempt that got as
    far as committing (aborted at commit included; spanmutex's joins,
    renewals and leaves of the queue included). A naive attempt that finds the
    lock held rolls back and sends no Commit: its cost is in READS and RPCS.
    READS: StreamingRead, Read and ExecuteStreamingSql RPCs, snapshot reads
    and the reads inside read-write transactions alike. RPCS: every gRPC call
    the run's clients started, background session-pool calls included.
  - WAIT: from calling Lock to holding the lock.
  - FIFO VIOLATIONS: acquisitions made while another contender that had
    called Lock at least 100ms earlier was still waiting.
  - HAND-OFF: from the previous holder calling its release to the next
    holder's Lock returning, on the local clock (one process): it includes
    the release's own transaction. spanmutex: acquisitions handed over in the
    previous holder's Unlock (a lock taken free gives no sample); naive:
    every acquisition after a release.
`

// writeTable appends a table with header to b, the rows given by fill.
func writeTable(b *strings.Builder, header []string, fill func(row func(cells ...any))) {
	var t strings.Builder
	tw := tabwriter.NewWriter(&t, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	fill(func(cells ...any) {
		s := make([]string, len(cells))
		for i, c := range cells {
			s[i] = fmt.Sprint(c)
		}
		fmt.Fprintln(tw, strings.Join(s, "\t"))
	})
	_ = tw.Flush() // it writes to a strings.Builder, which does not fail
	for _, l := range strings.SplitAfter(t.String(), "\n") {
		if l != "" {
			b.WriteString(strings.TrimRight(l, " \n") + "\n")
		}
	}
}

// byMethod lists a run's RPCs by method, most first: per acquisition, or
// in total if there was none.
func byMethod(r Result) string {
	methods := slices.SortedFunc(maps.Keys(r.RPCsByMethod), func(a, b string) int {
		return cmp.Or(cmp.Compare(r.RPCsByMethod[b], r.RPCsByMethod[a]), cmp.Compare(a, b))
	})
	parts := make([]string, 0, len(methods))
	for _, m := range methods {
		if r.Acquisitions == 0 {
			parts = append(parts, fmt.Sprintf("%s %d", m, r.RPCsByMethod[m]))
		} else {
			parts = append(parts, fmt.Sprintf("%s %s", m, formatFloat(r.PerAcquisition(r.RPCsByMethod[m]))))
		}
	}
	if r.Acquisitions == 0 {
		return "in total: " + strings.Join(parts, ", ")
	}
	return strings.Join(parts, ", ")
}

// formatFloat formats a per-acquisition figure: "-" when undefined.
func formatFloat(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	return fmt.Sprintf("%.2f", v)
}

// formatRatio formats a Ratio field: "-" when undefined, "inf" when the
// denominator is zero.
func formatRatio(v float64) string {
	switch {
	case math.IsNaN(v):
		return "-"
	case math.IsInf(v, 1):
		return "inf"
	}
	return fmt.Sprintf("%.2fx", v)
}

// formatDuration formats a latency for the table, "-" if there is none.
func formatDuration(d time.Duration, ok bool) string {
	switch {
	case !ok:
		return "-"
	case d >= 10*time.Second || d <= -10*time.Second:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d >= time.Second || d <= -time.Second:
		return fmt.Sprintf("%.2fs", d.Seconds())
	}
	return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
}
