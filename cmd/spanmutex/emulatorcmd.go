package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/emulator"
	"github.com/spanmutex/spanmutex/internal/cmdline"
)

// emulatorHelp is the help of "spanmutex emulator".
var emulatorHelp = helpText{
	Usage: "spanmutex emulator [flags]",
	About: `Starts the Cloud Spanner emulator in the foreground, creates an instance and a
database that holds the mutex table (in the --dialect given: googlesql or
postgresql), and prints on stdout the lines that point
spanmutex (and any Spanner client) at it:

  export SPANNER_EMULATOR_HOST=127.0.0.1:PORT
  export SPANMUTEX_DATABASE=projects/P/instances/I/databases/D

It always starts an emulator of its own, even when SPANNER_EMULATOR_HOST is
set. It runs until SIGINT (Ctrl-C) or SIGTERM, then stops the emulator; all
data is lost. If the emulator process dies (killed, crashed), it says so
on stderr at once and exits 1. The emulator binary (emulator_main) is looked up in
$SPANNER_EMULATOR_BIN, $PATH and the gcloud SDK.`,
	After: `Exit status: 0 after a clean stop, 2 on a usage error, 1 if the emulator could
not be started (stderr says how to install it) or died while running
(stderr says how it ended).

Examples:
  spanmutex emulator
  spanmutex emulator --fault-injection   # commits abort at random; spanmutex retries
  spanmutex emulator --dialect postgresql # a PostgreSQL-dialect database`,
}

// cmdEmulator is "spanmutex emulator [flags]".
func cmdEmulator(ctx context.Context, s streams, args []string) int {
	fs := newFlagSet("emulator")
	faults := fs.Bool("fault-injection", false, "make the emulator abort commits at random, to exercise retries")
	table := fs.String("table", ddl.DefaultMutexTable, "the mutex table to create (the default table is always created)")
	verbose := fs.Bool("verbose", false, "copy the emulator's own log to stderr")
	dialectName := cmdline.AddDialectFlag(fs)
	if code, done := parseOnlyFlags(s, "emulator", fs, emulatorHelp, args); done {
		return code
	}
	if err := cmdline.ValidateTable(fullCommand("emulator"), *table); err != nil {
		return cmdline.ReportError(s, err, exitUsage)
	}
	d, err := cmdline.ParseDialect(fullCommand("emulator"), *dialectName)
	if err != nil {
		return cmdline.ReportError(s, err, exitUsage)
	}

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	bin, err := emulator.FindBinary()
	if err != nil {
		return cmdline.ReportError(s, err, exitError)
	}
	if host := os.Getenv(cmdline.EmulatorHostEnv); host != "" {
		fmt.Fprintf(s.Stderr, "spanmutex: %s=%s is set; starting a separate emulator anyway\n", cmdline.EmulatorHostEnv, host)
	}
	// WithBinary makes Start launch its own emulator even when
	// SPANNER_EMULATOR_HOST is set.
	opts := []emulator.Option{emulator.WithBinary(bin), emulator.WithDialect(d)}
	if *faults {
		opts = append(opts, emulator.WithFaultInjection())
	}
	if *verbose {
		opts = append(opts, emulator.WithLog(s.Stderr))
	}
	if *table != ddl.DefaultMutexTable {
		stmts, err := d.Statements(*table)
		if err != nil {
			return cmdline.ReportError(s, err, exitUsage)
		}
		opts = append(opts, emulator.WithDDL(stmts...))
	}
	emu, err := emulator.Start(ctx, opts...)
	if err != nil {
		return cmdline.ReportError(s, err, exitError)
	}
	fmt.Fprintf(s.Stdout, "export %s=%s\nexport %s=%s\n", cmdline.EmulatorHostEnv, emu.Host(), cmdline.DatabaseEnv, emu.Database())
	fmt.Fprintf(s.Stderr, "spanmutex: emulator %s running (pid %d, fault injection %v, %s database); press Ctrl-C to stop it\n",
		emu.Host(), emu.PID(), *faults, d)

	select {
	case <-ctx.Done():
	case <-emu.Exited():
		_ = emu.Close()
		return cmdline.ReportError(s, fmt.Errorf("%w; its databases are lost: start it again", emu.ExitError()), exitError)
	}
	if err := emu.Close(); err != nil {
		return cmdline.ReportError(s, fmt.Errorf("stop the emulator: %w", err), exitError)
	}
	fmt.Fprintln(s.Stderr, "spanmutex: emulator stopped")
	return exitOK
}
