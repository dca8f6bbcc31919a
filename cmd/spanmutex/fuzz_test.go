package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/spanmutex/spanmutex/internal/cmdline"
)

// FuzzCLI feeds random argument vectors (NUL-separated, as in a process's
// argv) to the in-process entry point: it must never panic, and must exit 0
// (help, ddl), 2 with a usage message on stderr, or 1 having failed to
// start an emulator.
//
// It must never connect anywhere nor run COMMAND, whatever the subcommand
// (and subcommands are added): the environment leaves nothing to connect to
// (no $SPANMUTEX_DATABASE, no $SPANNER_EMULATOR_HOST, no credentials, and
// an emulator binary that does not exist, so that every embedded emulator
// fails to start), and vectors that name --database are not run. "run"
// needs a database before it runs COMMAND, so it never gets that far.
//
// `go test` runs the seed corpus; `go test -short -run FuzzCLI -fuzz FuzzCLI`
// searches for more (-short: every fuzz worker would otherwise start the
// emulator that this package's TestMain starts for the other tests).
func FuzzCLI(f *testing.F) {
	f.Setenv(cmdline.DatabaseEnv, "")
	f.Setenv(cmdline.EmulatorHostEnv, "")
	f.Setenv("SPANNER_EMULATOR_BIN", "/nonexistent/spanmutex-fuzz/emulator_main")
	f.Setenv("GOOGLE_APPLICATION_CREDENTIALS", "/nonexistent/spanmutex-fuzz/credentials.json")
	for _, args := range [][]string{
		{},
		{""},
		{"run"},
		{"run", "x", "--", "true"},
		{"run", "--lease", "2s", "x", "--", "sh", "-c", "echo hi"},
		{"run", "--lease", "-1s", "x", "--", "true"},
		{"run", "--lease", "2562047h", "x", "--", "true"},
		{"run", "--max-attempts", "0", "x", "--", "true"},
		{"run", "--staleness", "1s", "x", "--", "true"},
		{"run", "--table", "bad-name", "x", "--", "true"},
		{"run", "--owner", "a\nb", "x", "--", "true"},
		{"run", "\xff", "--", "true"},
		{"run", strings.Repeat("é", 257), "--", "true"},
		{"run", "x", "y", "--", "true"},
		{"run", "x", "--"},
		{"run", "x", "--", ""},
		{"run", "-h"},
		{"run", "--help", "x", "--", "true"},
		{"run", "--verbose=maybe", "x", "--", "true"},
		{"status"},
		{"status", "a", "b"},
		{"status", "--table", "1x", "x"},
		{"ddl"},
		{"ddl", "--table", "JobLocks"},
		{"ddl", "--table", "x y"},
		{"ddl", "extra"},
		{"emulator"},
		{"emulator", "--fault-injection"},
		{"emulator", "now"},
		{"demo"},
		{"demo", "--instances", "2"},
		{"demo", "--work", "5s"},
		{"help"},
		{"help", "run"},
		{"help", "frobnicate"},
		{"help", "run", "status"},
		{"--help"},
		{"-x"},
		{"frobnicate"},
	} {
		f.Add(strings.Join(args, "\x00"))
	}
	f.Fuzz(func(t *testing.T, argv string) {
		var args []string
		if argv != "" {
			args = strings.Split(argv, "\x00")
		}
		for _, a := range args {
			if strings.Contains(a, "database") {
				t.Skip("names --database: it could connect")
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		var stdout, stderr bytes.Buffer
		began := time.Now()
		code := run(ctx, args, &stdout, &stderr)
		if took := time.Since(began); took > 10*time.Second {
			t.Errorf("run(%q) took %v: it must fail or answer before connecting", args, took)
		}
		out, errOut := stdout.String(), stderr.String()
		switch code {
		case exitOK:
			if out == "" {
				t.Errorf("run(%q) exited 0 with nothing on stdout; stderr: %q", args, errOut)
			}
		case exitUsage:
			if !strings.HasPrefix(errOut, "spanmutex") || !strings.Contains(errOut, "Run 'spanmutex") {
				t.Errorf("run(%q) exited 2 without a usage message on stderr: %q", args, errOut)
			}
			if out != "" {
				t.Errorf("run(%q) exited 2 and wrote on stdout: %q", args, out)
			}
		case exitError:
			// Only the emulator that could not start, by design of the
			// environment above: anything else got further than it should.
			if !strings.Contains(errOut, "SPANNER_EMULATOR_BIN") {
				t.Errorf("run(%q) exited 1 for another reason than the missing emulator: stdout %q, stderr %q", args, out, errOut)
			}
		default:
			t.Errorf("run(%q) exited %d; want 0, 1 or 2; stderr: %q", args, code, errOut)
		}
		if code != exitOK && errOut == "" {
			t.Errorf("run(%q) exited %d with nothing on stderr", args, code)
		}
		if utf8.ValidString(strings.Join(args, "")) && !utf8.ValidString(errOut) {
			t.Errorf("run(%q): valid UTF-8 arguments gave invalid UTF-8 on stderr: %q", args, errOut)
		}
	})
}
