package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spanmutex/spanmutex"
	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/internal/cmdline"
	"github.com/spanmutex/spanmutex/internal/names"
	"github.com/spanmutex/spanmutex/internal/textcut"
)

// statusHelp is the help of "spanmutex status".
var statusHelp = helpText{
	Usage: "spanmutex status [flags] [NAME]",
	About: `Shows the rows of the mutex table, or only NAME's: state (NEEDED, STARTED,
DONE, FAILED), the owner that holds or last held it, the fencing token,
how many attempts were made since the row was last reset, how long ago the row
last changed (by Spanner's clock), and the last error, truncated. Names and
owners longer than 48 characters are cut with "…" unless --wide is given or
NAME is. Names, owners, versions and errors holding characters that do not
show as themselves (control characters, bidirectional overrides such as
U+202E, zero-width characters such as U+200B, invalid UTF-8) are shown
quoted and escaped, as Go writes strings ("a\u202eb"). It reads one
consistent snapshot and takes no locks.

A semaphore or reader-writer lock ('spanmutex lock --permits', '--shared',
'--rw') shows as state SHARED, with the owners of its live holders and
the last token issued; it counts no attempts ("-"). Below the table,
each one's size, the permits held and the number of live waiters follow
(and, for a reader-writer lock, whether a writer waits: new readers then
queue behind it), then its holders: owner, permits (shared or exclusive
for a reader-writer lock), fencing token, and the lease left by Spanner's
clock ("lapsed" once its permits count free); then its live waiters in
queue order: owner, the permits it asks for (shared or exclusive), and how
long it has waited.`,
	After: `Exit status: 0 on success (also when there are no rows), 2 on a usage error,
1 on any other error.

Examples:
  spanmutex status
  spanmutex status --database projects/my-project/instances/my-instance/databases/my-db migrate-v42`,
}

// maxLastError is how much of a row's last error status shows.
const maxLastError = 60

// maxColumn is how much of a name or owner status shows without --wide, so
// that one long name does not widen every row.
const maxColumn = 48

// cmdStatus is "spanmutex status [flags] [NAME]".
func cmdStatus(ctx context.Context, s streams, args []string) int {
	fs := newFlagSet("status")
	database := cmdline.AddDatabaseFlag(fs)
	table := fs.String("table", ddl.DefaultMutexTable, "the mutex table")
	connect := cmdline.AddConnectTimeoutFlag(fs)
	wide := fs.Bool("wide", false, "show names and owners in full, however long")
	positional, code, done := parseFlags(s, "status", fs, statusHelp, args)
	if done {
		return code
	}
	var name string
	switch len(positional) {
	case 0:
	case 1:
		name = positional[0]
		if err := names.Name(name); err != nil {
			return cmdline.ReportUsage(s, badName("status", err))
		}
	default:
		return cmdline.ReportUsage(s, usage("status", fmt.Sprintf("too many arguments %q; want at most one NAME", positional)))
	}
	client, err := connectFor(ctx, "status", fs, *database, *table, *connect)
	if err != nil {
		return cmdline.ReportError(s, err, exitError)
	}
	defer client.Close()
	rows, err := spanmutex.Inspect(ctx, client, name, spanmutex.WithTable(*table))
	if err != nil {
		return cmdline.ReportError(s, cmdline.ExplainConnection(err), exitError)
	}
	if len(rows) == 0 {
		if name != "" {
			fmt.Fprintf(s.Stderr, "spanmutex: no row for %q in table %s: it has never been started\n", name, *table)
		} else {
			fmt.Fprintf(s.Stderr, "spanmutex: table %s has no rows\n", *table)
		}
	}
	writeStatus(s.Stdout, rows, *wide || name != "")
	if !slices.ContainsFunc(rows, func(r spanmutex.Record) bool { return r.State == spanmutex.StateShared }) {
		return exitOK
	}
	writeShared(s.Stdout, sharedRows(rows), *wide || name != "")
	return exitOK
}

// writeStatus writes rows as an aligned table; unless wide, names and
// owners are cut to maxColumn characters. Text that would not show as
// itself is quoted (shown).
func writeStatus(w io.Writer, rows []spanmutex.Record, wide bool) {
	cell := cellOf(wide)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	versions := slices.ContainsFunc(rows, func(r spanmutex.Record) bool { return r.Version != "" })
	if versions {
		fmt.Fprintln(tw, "NAME\tSTATE\tVERSION\tOWNER\tTOKEN\tATTEMPTS\tAGE\tLAST ERROR")
	} else {
		fmt.Fprintln(tw, "NAME\tSTATE\tOWNER\tTOKEN\tATTEMPTS\tAGE\tLAST ERROR")
	}
	for _, r := range rows {
		version := ""
		if versions {
			version = dash(cell(r.Version)) + "\t"
		}
		owner, attempts := dash(cell(r.Owner)), strconv.FormatInt(r.Attempts, 10)
		if r.State == spanmutex.StateShared {
			owner, attempts = sharedOwners(r, wide), "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s%s\t%d\t%s\t%s\t%s\n",
			cell(r.Name), r.State, version, owner, r.Token, attempts, formatAge(r.Age), dash(shown(oneLine(r.LastError, maxLastError))))
	}
	_ = tw.Flush()
}

// sharedOwners is the OWNER cell of a SHARED row: the owners of its live
// holders, oldest first, each shown as itself or quoted (shown), joined
// with ", " and, unless wide, cut to maxColumn characters; "-" if none
// holds it. (The row's own Owner column is not written for a semaphore or
// RWLock, and its attempts are not counted: status shows "-".)
func sharedOwners(r spanmutex.Record, wide bool) string {
	owners := sharedRows([]spanmutex.Record{r})[0].owners()
	for i, o := range owners {
		owners[i] = shown(o)
	}
	s := strings.Join(owners, ", ")
	if !wide {
		s = textcut.Runes(s, maxColumn)
	}
	return dash(s)
}

// writeShared writes, below the table, what each semaphore and RWLock is,
// what is held of it and how many wait (summary), then its holders as an
// aligned table: owner, permits (an RWLock's: shared or exclusive), token
// and the lease left by Spanner's clock at the read ("lapsed": its permits
// count free). Unless wide, names and owners are cut as in the table.
func writeShared(w io.Writer, rows []sharedRow, wide bool) {
	cell := cellOf(wide)
	for _, r := range rows {
		fmt.Fprintf(w, "\n%s\n", r.summary(cell(r.name)))
		if len(r.holders) > 0 {
			column := "PERMITS"
			if r.rwLock() {
				column = "HOLDS"
			}
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintf(tw, "  OWNER\t%s\tTOKEN\tLEASE LEFT\n", column)
			for _, h := range r.holders {
				left := "lapsed"
				if h.left > 0 {
					left = formatAge(h.left)
				}
				fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\n", dash(cell(h.owner)), r.holds(h), h.token, left)
			}
			_ = tw.Flush()
		}
		if len(r.waiting) > 0 {
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintf(tw, "  WAITER\tWANTS\tWAITED\n")
			for _, q := range r.waiting {
				fmt.Fprintf(tw, "  %s\t%s\t%s\n", dash(cell(q.owner)), r.holds(q), formatAge(q.waited))
			}
			_ = tw.Flush()
		}
	}
}

// summary says what r (named name) is, what is held of it and how many
// live waiters are queued: "semaphore x: size 4, 3 held, 1 waiter".
func (r sharedRow) summary(name string) string {
	waiters := plural(r.waiters, "waiter")
	if !r.rwLock() {
		return fmt.Sprintf("semaphore %s: size %d, %d held, %s", name, r.size, r.held(), waiters)
	}
	held := plural(r.held(), "reader") // a reader holds 1 permit
	if r.held() >= rwLockSize {
		held = "1 writer"
	}
	if r.writerWaits() {
		return fmt.Sprintf("reader-writer lock %s: %s, %s; a writer waits, so new readers queue behind it", name, held, waiters)
	}
	return fmt.Sprintf("reader-writer lock %s: %s, %s", name, held, waiters)
}

// holds says what holder h of r holds, or waiter h asks for: its permits,
// or an RWLock's side.
func (r sharedRow) holds(h sharedHolder) string {
	switch {
	case !r.rwLock():
		return strconv.FormatInt(h.permits, 10)
	case h.permits == rwLockSize:
		return "exclusive"
	}
	return "shared"
}

// plural returns "1 waiter" or "n waiters".
func plural(n int64, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// cellOf returns how a name or owner shows in a cell: quoted if it would
// not show as itself (shown), and unless wide, cut to maxColumn characters.
func cellOf(wide bool) func(string) string {
	return func(s string) string {
		if wide {
			return shown(s)
		}
		return shown(textcut.Runes(s, maxColumn))
	}
}

// formatAge rounds an age for reading: tenths of a second under a minute,
// whole seconds above.
func formatAge(d time.Duration) string {
	if d < time.Minute {
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
	}
	return d.Round(time.Second).String()
}

// oneLine flattens text onto one line and cuts it to at most n characters.
func oneLine(text string, n int) string {
	return textcut.Runes(strings.Join(strings.Fields(text), " "), n)
}

// shown returns s as it is if every character of it shows as itself on a
// terminal, and else quoted and escaped as a Go string ("\u202e"): a
// right-to-left override (U+202E) would make a name read backwards, a
// zero-width space (U+200B) make two names read alike, a control character
// rewrite the screen, and invalid UTF-8 show as something else. Text that
// starts with a quote is quoted too, so that no cell reads as another.
func shown(s string) string {
	if strings.HasPrefix(s, `"`) || !utf8.ValidString(s) || strings.ContainsFunc(s, func(r rune) bool { return !strconv.IsPrint(r) }) {
		return strconv.Quote(s)
	}
	return s
}

// dash stands in for an empty cell.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
