package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/spanmutex/spanmutex"
	"github.com/spanmutex/spanmutex/internal/cmdline"
)

// TestMissingDashKeepsEveryArgument: the suggested command line keeps all
// of COMMAND's arguments, quoted where a shell needs it, and ends where the
// pointer to the help begins.
func TestMissingDashKeepsEveryArgument(t *testing.T) {
	t.Setenv(cmdline.DatabaseEnv, "projects/test-project/instances/i1/databases/d1")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "nosep", "echo", "RAN"}, "want: spanmutex run [flags] nosep -- echo RAN (Run '"},
		{[]string{"run", "nosep", "echo", "RAN", "a b", "it's"}, `want: spanmutex run [flags] nosep -- echo RAN 'a b' 'it'\''s' (Run '`},
		{[]string{"lock", "nosep", "printf", "%s x"}, "want: spanmutex lock [flags] nosep -- printf '%s x' (Run '"},
		{[]string{"lead", "nosep", "./scheduler"}, "want: spanmutex lead [flags] nosep -- ./scheduler (Run '"},
	} {
		code, _, stderr := cli(t, tc.args...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: exit %d, stderr:\n%s\nwant exit 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
}

// TestSigtermNoteSaysSpanmutexOnce: the note that COMMAND was sent SIGTERM
// does not stutter "spanmutex: ... spanmutex:".
func TestSigtermNoteSaysSpanmutexOnce(t *testing.T) {
	lost := fmt.Errorf(`%w: "x": lease with token 3 lost: renewals failed for the lease`, spanmutex.ErrLeaseLost)
	for _, cause := range []error{lost, errors.New("plain cause")} {
		got := sigtermNote(cause)
		if strings.Count(got, "spanmutex:") != 1 || !strings.HasPrefix(got, "spanmutex: sent COMMAND SIGTERM: ") || strings.Contains(got, "\n") {
			t.Errorf("sigtermNote(%v) = %q; want one line with one \"spanmutex:\"", cause, got)
		}
	}
}

// TestRetryNote says "retries it" only while attempts remain.
func TestRetryNote(t *testing.T) {
	for _, tc := range []struct {
		a         attemptsLeft
		want, not string
	}{
		{attemptsLeft{used: 1, max: 3, known: true}, "a later run retries it (1 of 3 attempts used)", "last"},
		{attemptsLeft{used: 3, max: 3, known: true}, "last allowed attempt (3 of 3)", "retries it"},
		{attemptsLeft{max: 3}, "if attempts remain (--max-attempts 3)", "last"},
	} {
		got := tc.a.retryNote("n")
		if !strings.Contains(got, tc.want) || strings.Contains(got, tc.not) {
			t.Errorf("%+v: %q; want %q and not %q", tc.a, got, tc.want, tc.not)
		}
	}
}

// TestLastAttemptNotRetried: a COMMAND that fails on its last allowed
// attempt is not said to be retried.
func TestLastAttemptNotRetried(t *testing.T) {
	needEmulator(t)
	t.Setenv(cmdline.EmulatorHostEnv, emu.Host())
	db := newDatabase(t)
	code, _, stderr := cli(t, "run", "--database", db, "--max-attempts", "2", "fails", "--", "false")
	if code != 1 || !strings.Contains(stderr, "a later run retries it (1 of 2 attempts used)") {
		t.Errorf("first failure: exit %d, stderr:\n%s", code, stderr)
	}
	code, _, stderr = cli(t, "run", "--database", db, "--max-attempts", "2", "fails", "--", "false")
	if code != 1 || strings.Contains(stderr, "retries it") || !strings.Contains(stderr, "last allowed attempt (2 of 2)") ||
		!strings.Contains(stderr, "spanmutex reset fails") {
		t.Errorf("last failure: exit %d, stderr:\n%s", code, stderr)
	}
}
