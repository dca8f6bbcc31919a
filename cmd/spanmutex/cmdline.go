package main

import (
	"context"
	"flag"
	"regexp"
	"strings"
	"time"

	"cloud.google.com/go/spanner"

	"github.com/spanmutex/spanmutex"
	"github.com/spanmutex/spanmutex/internal/cmdline"
	"github.com/spanmutex/spanmutex/internal/defaults"
)

// The command-line plumbing spanmutex shares with spanmutex-torture and
// spanmutex-bench (internal/cmdline), under the names its subcommands use.
type (
	streams    = cmdline.Streams
	usageError = cmdline.UsageError
	helpText   = cmdline.HelpText
)

// Exit statuses shared by every subcommand. "run" also exits with COMMAND's
// own status when COMMAND fails.
const (
	exitOK        = cmdline.ExitOK
	exitError     = cmdline.ExitError
	exitUsage     = cmdline.ExitUsage
	exitExhausted = 75 // EX_TEMPFAIL: gave up after the attempt limit
)

// fullCommand returns the full name of subcommand sub ("" for spanmutex itself),
// as usage errors and flag sets name it.
func fullCommand(sub string) string {
	if sub == "" {
		return "spanmutex"
	}
	return "spanmutex " + sub
}

// usagef returns a usage error of subcommand sub.
func usagef(sub, format string, args ...any) error {
	return cmdline.Usagef(fullCommand(sub), format, args...)
}

// usage returns the usage error msg of subcommand sub, to report. The
// mistakes of "spanmutex help" are about subcommands: they point at the list.
func usage(sub, msg string) *usageError {
	ue := &usageError{Cmd: fullCommand(sub), Msg: msg}
	if sub == "help" {
		ue.Help = fullCommand("")
	}
	return ue
}

// newFlagSet returns a flag set for subcommand sub.
func newFlagSet(sub string) *flag.FlagSet { return cmdline.NewFlagSet(fullCommand(sub)) }

// parseFlags parses the arguments of subcommand sub (see cmdline.ParseFlags).
func parseFlags(s streams, sub string, fs *flag.FlagSet, h helpText, args []string) (positional []string, code int, done bool) {
	return cmdline.ParseFlags(s, fullCommand(sub), fs, h, args)
}

// parseOnlyFlags parses the arguments of subcommand sub, which takes no
// positional arguments (see cmdline.ParseOnlyFlags).
func parseOnlyFlags(s streams, sub string, fs *flag.FlagSet, h helpText, args []string) (code int, done bool) {
	return cmdline.ParseOnlyFlags(s, fullCommand(sub), fs, h, args)
}

// badName is the usage error of sub for a NAME that names.Name refused
// with err.
func badName(sub string, err error) *usageError {
	return usage(sub, "bad NAME: "+err.Error())
}

// libraryOption matches a library option as the library's errors name it,
// with its value: "WithLease(1ns)".
var libraryOption = regexp.MustCompile(`\bWith([A-Za-z]+)\(([^()]*)\)`)

// optionFlags are the flags that set library options, by option name.
var optionFlags = map[string]string{
	"Lease":       "--lease",
	"Staleness":   "--staleness",
	"MaxAttempts": "--max-attempts",
	"Owner":       "--owner",
	"Version":     "--version",
	"Table":       "--table",
}

// configUsage is the usage error of sub for options that the library
// refused with err (spanmutex.ErrInvalidConfig): without the library's
// prefix, and naming the flag ("--lease 1ns") where the library names its
// option ("WithLease(1ns)").
func configUsage(sub string, err error) *usageError {
	msg := strings.TrimPrefix(err.Error(), spanmutex.ErrInvalidConfig.Error()+": ")
	msg = libraryOption.ReplaceAllStringFunc(msg, func(opt string) string {
		m := libraryOption.FindStringSubmatch(opt)
		if flag, ok := optionFlags[m[1]]; ok {
			return flag + " " + m[2]
		}
		return opt
	})
	return usage(sub, msg)
}

// checkLease checks the --lease of sub against the library's bound before
// anything connects, naming the flag.
func checkLease(sub string, lease time.Duration) error {
	switch {
	case lease <= 0:
		return usagef(sub, "--lease %v: must be positive", lease)
	case lease < defaults.MinLease || lease > defaults.MaxLease:
		return usagef(sub, "--lease %v: must be %v to %v: the holder renews it every third of it, and one that dies blocks NAME that long ('spanmutex reset --force NAME' breaks it)",
			lease, defaults.MinLease, defaults.MaxLease)
	}
	return nil
}

// connectFor resolves the database of sub (from --database or
// $SPANMUTEX_DATABASE), checks --table and --connect-timeout, and opens a
// client that has had a first answer within connect.
func connectFor(ctx context.Context, sub string, fs *flag.FlagSet, database, table string, connect time.Duration) (*spanner.Client, error) {
	db, err := cmdline.ResolveDatabase(fullCommand(sub), fs, database)
	if err == nil {
		err = cmdline.ValidateTable(fullCommand(sub), table)
	}
	if err == nil {
		err = cmdline.CheckConnectTimeout(fullCommand(sub), connect)
	}
	if err != nil {
		return nil, err
	}
	return cmdline.OpenClientWithin(ctx, db, connect)
}
