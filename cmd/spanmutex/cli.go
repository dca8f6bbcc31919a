package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// Exit statuses shared by every subcommand. "run" also exits with COMMAND's
// own status when COMMAND fails.
const (
	exitOK        = 0
	exitError     = 1  // anything else, explained on stderr
	exitUsage     = 2  // bad command line: unknown command, bad flag, bad argument
	exitExhausted = 75 // EX_TEMPFAIL: gave up after the attempt limit
)

// streams are where a subcommand writes. Tests pass buffers; main passes
// os.Stdout and os.Stderr.
type streams struct {
	stdout io.Writer
	stderr io.Writer
}

// usageError is a problem with the command line. It is reported on stderr
// with a pointer to the help, and the process exits with exitUsage.
type usageError struct {
	cmd string // the subcommand, "" for the top level
	msg string
}

// Error returns the problem, without the subcommand.
func (e *usageError) Error() string { return e.msg }

// usagef returns a usageError for subcommand cmd.
func usagef(cmd, format string, args ...any) error {
	return &usageError{cmd: cmd, msg: fmt.Sprintf(format, args...)}
}

// reportUsage writes a usage error to stderr and returns exitUsage.
func reportUsage(s streams, err *usageError) int {
	prefix, helpCmd := "spanmutex", "spanmutex --help"
	switch err.cmd {
	case "":
	case "help": // its errors are about subcommands: point at the list
		prefix = "spanmutex help"
	default:
		prefix, helpCmd = "spanmutex "+err.cmd, "spanmutex "+err.cmd+" --help"
	}
	fmt.Fprintf(s.stderr, "%s: %s\nRun '%s' for usage.\n", prefix, err.msg, helpCmd)
	return exitUsage
}

// reportError writes err to stderr and returns code, or exitUsage if err is
// a usage error.
func reportError(s streams, err error, code int) int {
	var ue *usageError
	if errors.As(err, &ue) {
		return reportUsage(s, ue)
	}
	fmt.Fprintln(s.stderr, errorLine(err))
	return code
}

// errorLine formats err for stderr, prefixed with "spanmutex:" once (the
// library's own errors already carry that prefix).
func errorLine(err error) string {
	// One line per error: Spanner's descriptions can hold newlines.
	msg := strings.Join(strings.FieldsFunc(err.Error(), func(r rune) bool { return r == '\n' || r == '\r' }), " ")
	if strings.HasPrefix(msg, "spanmutex: ") {
		return msg
	}
	return "spanmutex: " + msg
}

// helpText is what a subcommand's --help prints around its flags.
type helpText struct {
	usage string // the usage line(s), without the leading "Usage: "
	about string // what the subcommand does
	after string // exit statuses, environment, examples: printed after the flags
}

// newFlagSet returns a flag set for subcommand name that reports nothing by
// itself: parseFlags decides where help and errors go.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("spanmutex "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// printHelp writes a subcommand's complete help: usage, description, flags
// with their defaults, then the rest.
func printHelp(w io.Writer, fs *flag.FlagSet, h helpText) {
	fmt.Fprintf(w, "Usage: %s\n\n%s\n", h.usage, strings.TrimSpace(h.about))
	hasFlags := false
	fs.VisitAll(func(*flag.Flag) { hasFlags = true })
	if hasFlags {
		fmt.Fprintf(w, "\nFlags:\n")
		printFlags(w, fs)
	}
	if h.after != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(h.after))
	}
}

// parseFlags parses args, letting flags and positional arguments mix. It
// returns the positional arguments, or done=true with the exit status when
// the command line asked for help (printed on stdout, exit 0) or was wrong
// (reported on stderr, exit 2).
func parseFlags(s streams, cmd string, fs *flag.FlagSet, h helpText, args []string) (positional []string, code int, done bool) {
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			printHelp(s.stdout, fs, h)
			return nil, exitOK, true
		}
		if err != nil {
			return nil, reportUsage(s, &usageError{cmd: cmd, msg: err.Error()}), true
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

// flagWasSet reports whether the flag called name appeared on the command line.
func flagWasSet(fs *flag.FlagSet, name string) bool {
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
