package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/spanmutex/spanmutex"
	"github.com/spanmutex/spanmutex/internal/cmdline"
)

// TestLeaseBelowMinimum: a --lease under defaults.MinLease is a usage
// error of the command, on one line naming the flag and the bound, not the
// library's option, and nothing connects (the database does not exist).
func TestLeaseBelowMinimum(t *testing.T) {
	const db = "projects/spanmutex-test/instances/spanmutex/databases/exists"
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"run", "--lease", "1ns", "x", "--", "true"}, "spanmutex run: --lease 1ns: must be 100ms to 1h0m0s"},
		{[]string{"run", "--lease", "99ms", "x", "--", "true"}, "spanmutex run: --lease 99ms: must be 100ms to 1h0m0s"},
		{[]string{"lock", "--lease", "1ns", "x", "--", "true"}, "spanmutex lock: --lease 1ns: must be 100ms to 1h0m0s"},
		{[]string{"lead", "--lease", "1ns", "x", "--", "true"}, "spanmutex lead: --lease 1ns: must be 100ms to 1h0m0s"},
		{[]string{"reset", "--lease", "1ns", "x"}, "spanmutex reset: --lease 1ns: must be 100ms to 1h0m0s"},
		{[]string{"reset", "--lease", "0s", "x"}, "spanmutex reset: --lease 0s: must be positive"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Setenv(cmdline.DatabaseEnv, db)
			t.Setenv(cmdline.EmulatorHostEnv, "127.0.0.1:1") // nothing listens: connecting would fail otherwise
			code, stdout, stderr := cli(t, tc.args...)
			if code != exitUsage || stdout != "" {
				t.Errorf("exit %d, stdout %q; want %d and nothing", code, stdout, exitUsage)
			}
			if !strings.HasPrefix(stderr, tc.want) || strings.Count(stderr, "\n") != 1 {
				t.Errorf("stderr is not one line starting %q:\n%s", tc.want, stderr)
			}
			for _, bad := range []string{"WithLease", "invalid configuration", "spanmutex: "} {
				if strings.Contains(stderr, bad) {
					t.Errorf("stderr says %q:\n%s", bad, stderr)
				}
			}
		})
	}
}

// TestConfigUsage: what the library refuses (spanmutex.ErrInvalidConfig)
// is reported once, without its prefix, naming the flag that set the
// option.
func TestConfigUsage(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{wrapConfig("WithLease(1ns): the lease must be at least 100ms"), "--lease 1ns: the lease must be at least 100ms"},
		{wrapConfig("WithStaleness(1s): staleness must be 0 (never) or above the lease (15s)"), "--staleness 1s: staleness must be 0 (never) or above the lease (15s)"},
		{wrapConfig("WithMaxAttempts(0): at least 1 attempt is needed"), "--max-attempts 0: at least 1 attempt is needed"},
		{wrapConfig("WithJitter(2): the jitter fraction must be in [0, 1)"), "WithJitter(2): the jitter fraction must be in [0, 1)"}, // no flag sets it
	}
	for _, tc := range cases {
		ue := configUsage("run", tc.err)
		if ue.Msg != tc.want {
			t.Errorf("configUsage(%q).Msg = %q, want %q", tc.err, ue.Msg, tc.want)
		}
		if line := cmdline.UsageLine(ue); strings.Count(line, "spanmutex") != 2 || strings.Contains(line, "\n") {
			t.Errorf("usage line %q: want one line naming spanmutex once, and its help", line)
		}
	}
}

// wrapConfig is an error as the library's option validation returns it.
func wrapConfig(msg string) error {
	return fmt.Errorf("%w: %s", spanmutex.ErrInvalidConfig, msg)
}

// TestUsageLine: a usage error is one line, naming the command and its
// help, even when its message had several lines.
func TestUsageLine(t *testing.T) {
	cases := []struct {
		ue   *usageError
		want string
	}{
		{usage("run", "missing NAME"), "spanmutex run: missing NAME (Run 'spanmutex run --help' for usage.)"},
		{usage("run", "two\nlines"), "spanmutex run: two lines (Run 'spanmutex run --help' for usage.)"},
		{usage("help", "unknown subcommand \"x\""), "spanmutex help: unknown subcommand \"x\" (Run 'spanmutex --help' for usage.)"},
	}
	for _, tc := range cases {
		var stderr bytes.Buffer
		if code := cmdline.ReportUsage(streams{Stderr: &stderr}, tc.ue); code != exitUsage || stderr.String() != tc.want+"\n" {
			t.Errorf("ReportUsage(%q) wrote %q (exit %d); want %q", tc.ue.Msg, stderr.String(), code, tc.want+"\n")
		}
	}
}

// TestStatusShown: status shows as they are the names, owners and errors
// that read as themselves, and quotes and escapes the others.
func TestStatusShown(t *testing.T) {
	cases := []struct {
		in, want string
	}{
		{"migrate-v42", "migrate-v42"},
		{"café/日本", "café/日本"},
		{"with space", "with space"},
		{"evil\u202eexe.txt", `"evil\u202eexe.txt"`}, // right-to-left override
		{"admin\u200b", `"admin\u200b"`},             // zero-width space
		{"a\u2066b\u2069", `"a\u2066b\u2069"`},       // bidi isolates
		{"bell\a", `"bell\a"`},                       // control character
		{"tab\tcell", `"tab\tcell"`},                 // would split the column
		{"nbsp\u00a0", `"nbsp\u00a0"`},               // looks like a space
		{"\xff", `"\xff"`},                           // invalid UTF-8
		{`"quoted"`, `"\"quoted\""`},                 // not to be read as a quoted cell
	}
	for _, tc := range cases {
		if got := shown(tc.in); got != tc.want {
			t.Errorf("shown(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
	var out bytes.Buffer
	writeStatus(&out, []spanmutex.Record{{Name: "a\u202eb", State: spanmutex.StateDone, Owner: "o\u200b", LastError: "x\u202ey"}}, false)
	for _, want := range []string{`"a\u202eb"`, `"o\u200b"`, `"x\u202ey"`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status does not show %s:\n%s", want, out.String())
		}
	}
	if strings.ContainsAny(out.String(), "\u202e\u200b") {
		t.Errorf("status shows U+202E or U+200B raw:\n%q", out.String())
	}
}
