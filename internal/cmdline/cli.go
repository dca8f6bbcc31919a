// Package cmdline is the command-line plumbing that spanmutex, spanmutex-torture
// and spanmutex-bench share: exit statuses, usage errors, flags with help,
// the database a command connects to, and a console that many goroutines
// write whole lines to.
//
// Commands are named in full ("spanmutex run", "spanmutex-torture"): that
// name prefixes every message and says whose --help to read.
package cmdline

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"sync"
)

// Exit statuses shared by every command.
const (
	ExitOK    = 0
	ExitError = 1 // anything else, explained on stderr
	ExitUsage = 2 // bad command line: unknown command, bad flag, bad argument
)

// Streams are where a command writes. Tests pass buffers; main passes
// os.Stdout and os.Stderr.
type Streams struct {
	Stdout io.Writer
	Stderr io.Writer
}

// UsageError is a problem with the command line. It is reported on stderr
// with a pointer to the help, and the process exits with ExitUsage.
type UsageError struct {
	Cmd  string // the command, in full: "spanmutex run"
	Msg  string
	Help string // the command whose --help explains the mistake; "" for Cmd
}

// Error returns the problem, without the command.
func (e *UsageError) Error() string { return e.Msg }

// Usagef returns a UsageError of command cmd.
func Usagef(cmd, format string, args ...any) error {
	return &UsageError{Cmd: cmd, Msg: fmt.Sprintf(format, args...)}
}

// ReportUsage writes a usage error to stderr, on one line that names the
// command and points at its help, and returns ExitUsage.
func ReportUsage(s Streams, err *UsageError) int {
	fmt.Fprintln(s.Stderr, UsageLine(err))
	return ExitUsage
}

// UsageLine is the line ReportUsage writes for err: one line, however many
// lines the message had, so that a log keeps it whole.
func UsageLine(err *UsageError) string {
	help := err.Help
	if help == "" {
		help = err.Cmd
	}
	msg := strings.Join(strings.FieldsFunc(err.Msg, func(r rune) bool { return r == '\n' || r == '\r' }), " ")
	// The pointer to the help is in parentheses, apart from the message, so
	// that a command line the message suggests can be copied as it is.
	return fmt.Sprintf("%s: %s (Run '%s --help' for usage.)", err.Cmd, msg, help)
}

// ReportError writes err to stderr and returns code, or ExitUsage if err is
// a usage error.
func ReportError(s Streams, err error, code int) int {
	var ue *UsageError
	if errors.As(err, &ue) {
		return ReportUsage(s, ue)
	}
	fmt.Fprintln(s.Stderr, ErrorLine(err))
	return code
}

// ErrorLine formats err for stderr, prefixed with "spanmutex:" once (the
// library's own errors already carry that prefix).
func ErrorLine(err error) string {
	// One line per error: Spanner's descriptions can hold newlines.
	msg := strings.Join(strings.FieldsFunc(err.Error(), func(r rune) bool { return r == '\n' || r == '\r' }), " ")
	if strings.HasPrefix(msg, "spanmutex: ") {
		return msg
	}
	return "spanmutex: " + msg
}

// HelpText is what a command's --help prints around its flags.
type HelpText struct {
	Usage string // the usage line(s), without the leading "Usage: "
	About string // what the command does
	After string // exit statuses, environment, examples: printed after the flags
}

// NewFlagSet returns a flag set for command cmd that reports nothing by
// itself: ParseFlags decides where help and errors go.
func NewFlagSet(cmd string) *flag.FlagSet {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// PrintHelp writes a command's complete help: usage, description, flags
// with their defaults, then the rest.
func PrintHelp(w io.Writer, fs *flag.FlagSet, h HelpText) {
	fmt.Fprintf(w, "Usage: %s\n\n%s\n", h.Usage, strings.TrimSpace(h.About))
	hasFlags := false
	fs.VisitAll(func(*flag.Flag) { hasFlags = true })
	if hasFlags {
		fmt.Fprintf(w, "\nFlags:\n")
		printFlags(w, fs)
	}
	if h.After != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(h.After))
	}
}

// ParseFlags parses args of command cmd, letting flags and positional
// arguments mix. It returns the positional arguments, or done=true with the
// exit status when the command line asked for help (printed on stdout, exit
// 0) or was wrong (reported on stderr, exit 2).
func ParseFlags(s Streams, cmd string, fs *flag.FlagSet, h HelpText, args []string) (positional []string, code int, done bool) {
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			PrintHelp(s.Stdout, fs, h)
			return nil, ExitOK, true
		}
		if err != nil {
			return nil, ReportUsage(s, &UsageError{Cmd: cmd, Msg: err.Error() + renamedHint(fs, err)}), true
		}
		rest := fs.Args()
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			// "--" ends the flags: everything after it is positional.
			return append(positional, rest...), 0, false
		}
		args = rest
		if len(args) == 0 {
			return positional, 0, false
		}
		positional = append(positional, args[0])
		args = args[1:]
	}
}

// renamedHint names the new spelling of a flag that err says is not
// defined, when fs defines it under that name: "--watermark" is "--lease"
// since the two names for one concept became one. (The flag package names
// an undefined flag with one dash, however many were typed.)
func renamedHint(fs *flag.FlagSet, err error) string {
	old, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -")
	if !ok || old != "watermark" || fs.Lookup("lease") == nil {
		return ""
	}
	return " (--watermark was renamed --lease)"
}

// ParseOnlyFlags is ParseFlags for a command that takes no positional
// arguments: one is a usage error.
func ParseOnlyFlags(s Streams, cmd string, fs *flag.FlagSet, h HelpText, args []string) (code int, done bool) {
	positional, code, done := ParseFlags(s, cmd, fs, h, args)
	if !done && len(positional) > 0 {
		return ReportUsage(s, &UsageError{Cmd: cmd, Msg: fmt.Sprintf("unexpected argument %q", positional[0])}), true
	}
	return code, done
}

// FlagWasSet reports whether the flag called name appeared on the command line.
func FlagWasSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			set = true
		}
	})
	return set
}

// printFlags lists fs's flags as flag.PrintDefaults does, but spelt with
// two dashes, as the help texts write them.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		typ, usage := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if typ != "" {
			line += " " + typ
		}
		fmt.Fprintf(w, "%s\n    \t%s", line, strings.ReplaceAll(usage, "\n", "\n    \t"))
		switch f.DefValue {
		case "", "0", "0s", "false":
		default:
			if typ == "string" {
				fmt.Fprintf(w, " (default %q)", f.DefValue)
			} else {
				fmt.Fprintf(w, " (default %v)", f.DefValue)
			}
		}
		fmt.Fprintln(w)
	})
}

// Console is a command's progress output: whole lines, written by many
// goroutines. Set W before the first Printf.
type Console struct {
	mu sync.Mutex
	W  io.Writer
}

// Printf writes one formatted message atomically.
func (c *Console) Printf(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fmt.Fprintf(c.W, format, args...)
}
