package main

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"time"

	"cloud.google.com/go/spanner"

	"github.com/spanmutex/spanmutex"
	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/internal/cmdline"
	"github.com/spanmutex/spanmutex/internal/defaults"
)

// holdFlags are the flags "run", "lock" and "lead" share: where the row is, who
// holds it and for how long, how COMMAND is stopped, and how to connect.
type holdFlags struct {
	database string
	table    string
	owner    string
	lease    time.Duration
	grace    time.Duration
	verbose  bool
	listen   listenFlags
	connect  time.Duration
}

// register defines the shared flags on fs; graceUsage and verboseUsage say
// what --grace and --verbose do for this command.
func (h *holdFlags) register(fs *flag.FlagSet, graceUsage, verboseUsage string) {
	h.listen.register(fs)
	fs.StringVar(&h.database, "database", "", cmdline.DatabaseFlagUsage)
	fs.StringVar(&h.table, "table", ddl.DefaultMutexTable, "the mutex table")
	fs.DurationVar(&h.lease, "lease", defaults.Lease,
		"the lease this process declares when it holds NAME (100ms to 1h): it renews within it, and no other process takes over before it has passed unrenewed, by Spanner's clock")
	fs.DurationVar(&h.grace, "grace", defaultGrace, graceUsage)
	fs.BoolVar(&h.verbose, "verbose", false, verboseUsage)
	fs.DurationVar(&h.connect, "connect-timeout", cmdline.DefaultConnectTimeout, cmdline.ConnectTimeoutFlagUsage)
}

// registerOwner defines --owner, which "run" and "lock" take; a candidate
// of "lead" is recorded under its --value.
func (h *holdFlags) registerOwner(fs *flag.FlagSet) {
	fs.StringVar(&h.owner, "owner", "", "the owner identity recorded in the row (default host:pid:random)")
}

// validate checks the shared flags of cmd before anything connects.
func (h *holdFlags) validate(cmd string) error {
	if err := cmdline.ValidateTable(fullCommand(cmd), h.table); err != nil {
		return err
	}
	if err := checkLease(cmd, h.lease); err != nil {
		return err
	}
	if err := cmdline.CheckConnectTimeout(fullCommand(cmd), h.connect); err != nil {
		return err
	}
	if h.grace < 0 {
		return usagef(cmd, "--grace %v: must be 0 or positive", h.grace)
	}
	if h.owner != "" {
		if err := validateOwner(h.owner); err != nil {
			return usagef(cmd, "--owner: %v", err)
		}
	}
	return nil
}

// open opens the client of a run, lock or lead (sub) and the Scope of --listen;
// closeAll releases both. A bad --listen is a usage error of sub.
func (h *holdFlags) open(ctx context.Context, sub string) (client *spanner.Client, scopeOpts []spanmutex.ElectionOption, closeAll func(), err error) {
	client, err = cmdline.OpenClientWithin(ctx, h.database, h.connect)
	if err != nil {
		return nil, nil, nil, err
	}
	scopeOpts, closeScope, err := h.listen.scope()
	if err != nil {
		client.Close()
		return nil, nil, nil, usage(sub, err.Error())
	}
	return client, scopeOpts, func() { closeScope(); client.Close() }, nil
}

// parseHoldArgs parses the command line of "run", "lock" or "lead" (sub):
// flags on fs, NAME, "--" and COMMAND; it checks them, and what check adds
// (nil: nothing). done is true when the command is over (help, or an error
// reported) and code is then its exit status.
func parseHoldArgs(s streams, sub string, fs *flag.FlagSet, help helpText, h *holdFlags, args []string,
	check func() error) (name string, command []string, code int, done bool) {
	flagArgs, command, hasDash := splitCommand(args)
	positional, code, done := parseFlags(s, sub, fs, help, flagArgs)
	if done {
		return "", nil, code, true
	}
	name, err := checkHoldArgs(sub, positional, command, hasDash)
	if err == nil {
		h.database, err = cmdline.ResolveDatabase(fullCommand(sub), fs, h.database)
	}
	if err == nil {
		err = h.validate(sub)
	}
	if err == nil && check != nil {
		err = check()
	}
	if err != nil {
		return "", nil, cmdline.ReportError(s, err, exitError), true
	}
	return name, command, 0, false
}

// libraryOptions returns the options of the shared flags and of --listen
// (scopeOpts): the table and the lease; with --verbose the Mutex, Lock
// or Election logs its decisions to stderr.
func (h *holdFlags) libraryOptions(stderr io.Writer, scopeOpts []spanmutex.ElectionOption) []spanmutex.ElectionOption {
	opts := []spanmutex.ElectionOption{spanmutex.WithTable(h.table), spanmutex.WithLease(h.lease)}
	if h.verbose {
		opts = append(opts, spanmutex.WithLogger(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	}
	return append(opts, scopeOpts...)
}

// lockOptions is libraryOptions and --owner, if given, for "run" and
// "lock".
func (h *holdFlags) lockOptions(stderr io.Writer, scopeOpts []spanmutex.ElectionOption) []spanmutex.LockOption {
	var opts []spanmutex.LockOption
	for _, o := range h.libraryOptions(stderr, scopeOpts) {
		opts = append(opts, o)
	}
	if h.owner != "" {
		opts = append(opts, spanmutex.WithOwner(h.owner))
	}
	return opts
}
