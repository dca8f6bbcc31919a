package main

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spanmutex/spanmutex/internal/cmdline"
	"github.com/spanmutex/spanmutex/internal/defaults"
	"github.com/spanmutex/spanmutex/internal/history"
	"github.com/spanmutex/spanmutex/internal/testutil"
)

// TestTorture runs a short torture in-process, on an emulator of its own
// with every fault on, once on a database of each dialect: it exits 0 and
// reports what it did, each check, and no violation.
func TestTorture(t *testing.T) {
	for _, dialect := range []string{"googlesql", "postgresql"} {
		t.Run(dialect, func(t *testing.T) { tortureAllFaults(t, dialect) })
	}
}

func tortureAllFaults(t *testing.T, dialect string) {
	tests.NeedBinary(t)
	tortureNoLeak(t)
	t.Setenv(cmdline.EmulatorHostEnv, "")
	// 6s a dialect in go test, 10s in CI's soak.
	duration := fmt.Sprintf("%ds", testutil.Scale(6, 10))
	code, stdout, stderr := tests.Call(t, "--duration", duration, "--clients", "4", "--progress", "5s", "--dialect", dialect)
	if code != cmdline.ExitOK {
		t.Fatalf("torture exited %d; stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, want := range []string{
		"spanmutex-torture: 4 clients for " + duration + ", faults abort,unavailable,drop-commit,delay,pause,impatient,mismatched",
		"with --enable_fault_injection",
		"(" + dialect + "); opened 4 clients, each with a Spanner client and a Scope of its own",
		"Declared leases: c1 2s, c2 666.666666ms, c3 2s, c4 6s.",
		"Operations: ",
		"  acquire ",
		"  guarded-write ",
		"Faults injected: ",
		"  abort ",
		"  unavailable ",
		"  drop-commit ",
		"  delay ",
		"  pause ",
		"  impatient ",
		"  mismatched   2 ",
		"Checks:",
		"  linearizable ",
		"  holders-disjoint ",
		"  lock-errors-expected ",
		"  no-lock-left-held ",
		"  stall-bounded ",
		"  no-lease-limbo ",
		"Violations: 0\n",
		"Liveness: ",
		"Elapsed: ",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout does not contain %q:\n%s", want, stdout)
		}
	}
	if m := regexp.MustCompile(`Operations: (\d+)`).FindStringSubmatch(stdout); m == nil || m[1] == "0" {
		t.Errorf("no operations were done:\n%s", stdout)
	}
	if strings.Contains(stdout, "VIOLATION") || stderr != "" {
		t.Errorf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
	}
}

// TestTortureWithoutFaults needs no emulator of its own (it may attach to
// the tests' emulator) and reports no faults.
func TestTortureWithoutFaults(t *testing.T) {
	code, stdout, stderr := tortureOnTestsEmulator(t, "--duration", "3s", "--clients", "2", "--faults", "none", "--progress", "0")
	if code != cmdline.ExitOK || !strings.Contains(stdout, "faults none") || !strings.Contains(stdout, "Faults injected: 0\n") ||
		!strings.Contains(stdout, "Violations: 0\n") || !strings.Contains(stdout, "Using the Cloud Spanner emulator at") {
		t.Errorf("exit %d; stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}

// Impatient Lock calls give up with ErrNotObtained, within Lock's contract,
// and leave no lock held; the stalls are reported. On the tests' emulator.
func TestTortureImpatient(t *testing.T) {
	code, stdout, stderr := tortureOnTestsEmulator(t, "--duration", fmt.Sprintf("%ds", testutil.Scale(4, 6)), "--clients", "4", "--locks", "1", "--lease", "500ms",
		"--faults", "impatient", "--progress", "0")
	if code != cmdline.ExitOK || stderr != "" {
		t.Fatalf("exit %d; stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	m := regexp.MustCompile(`  impatient +(\d+) +Lock calls with a deadline of 5ms to 60ms \((\d+) gave up with ErrNotObtained\)`).FindStringSubmatch(stdout)
	if m == nil || m[1] == "0" || m[2] == "0" {
		t.Errorf("no impatient Lock call gave up:\n%s", stdout)
	}
	for _, want := range []string{
		"Violations: 0\n",
		regexp.MustCompile(`lock-errors-expected +ok +[1-9]`).FindString(stdout),
		regexp.MustCompile(`no-lock-left-held +ok +1 `).FindString(stdout),
		"Liveness: longest stall ",
		"  lock-1 ",
	} {
		if want == "" || !strings.Contains(stdout, want) {
			t.Errorf("stdout does not show %q:\n%s", want, stdout)
		}
	}
}

// Clients that declare different leases take each other over only after
// the holder's declared lease. Paused holders are taken over; on the
// tests' emulator.
func TestTortureMismatched(t *testing.T) {
	code, stdout, stderr := tortureOnTestsEmulator(t, "--duration", fmt.Sprintf("%ds", testutil.Scale(5, 8)), "--clients", "4", "--locks", "1", "--lease", "300ms",
		"--faults", "mismatched,pause", "--progress", "0")
	if code != cmdline.ExitOK || stderr != "" {
		t.Fatalf("exit %d; stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, want := range []string{
		"Declared leases: c1 300ms, c2 100ms, c3 300ms, c4 900ms.",
		"  mismatched  2 ",
		"Violations: 0\n",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout does not contain %q:\n%s", want, stdout)
		}
	}
	if m := regexp.MustCompile(`takeover-after-lease +(ok|nothing to check) +(\d+)`).FindStringSubmatch(stdout); m == nil {
		t.Errorf("no verdict on takeovers:\n%s", stdout)
	} else {
		t.Logf("takeovers checked against the holder's declared lease: %s", m[2])
	}
}

// With --sessions, half the clients hold their locks through their
// Scope's session, beside the others, pauses taking both over; the
// sessions are renewed and the history checks clean. On the tests'
// emulator, on a database of each dialect.
func TestTortureSessions(t *testing.T) {
	for _, dialect := range []string{"googlesql", "postgresql"} {
		t.Run(dialect, func(t *testing.T) { tortureSessions(t, dialect) })
	}
}

func tortureSessions(t *testing.T, dialect string) {
	code, stdout, stderr := tortureOnTestsEmulator(t, "--duration", fmt.Sprintf("%ds", testutil.Scale(3, 8)), "--clients", "4", "--locks", "1", "--lease", "300ms",
		"--faults", "mismatched,pause", "--progress", "0", "--sessions", "--dialect", dialect)
	if code != cmdline.ExitOK || stderr != "" {
		t.Fatalf("exit %d; stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"(" + dialect + "); opened 4 clients", "Scopes WithSessions: c1, c3.\n", "  session-takeover  ok  ", "Violations: 0\n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout does not contain %q:\n%s", want, stdout)
		}
	}
	m := regexp.MustCompile(`Sessions: c1, c3 held through their Scope's session: \d+ leases taken through a session, (\d+) sessions started, (\d+) session renewals`).FindStringSubmatch(stdout)
	if m == nil || m[1] == "0" || m[2] == "0" {
		t.Fatalf("no session started and renewed:\n%s", stdout)
	}
	t.Log(m[0])
}

// --sessions gives sessions to every other client, the pattern shifted
// every four, so that each lease of the mismatched fault is declared with
// and without.
func TestTortureSessionClients(t *testing.T) {
	o := &tortureOptions{}
	for i := range 9 {
		if o.sessionClient(i) {
			t.Errorf("without --sessions, client %d has sessions", i)
		}
	}
	o.sessions = true
	var got []int
	for i := range 9 {
		if o.sessionClient(i) {
			got = append(got, i+1)
		}
	}
	if want := []int{1, 3, 6, 8, 9}; !slices.Equal(got, want) {
		t.Errorf("clients with sessions: c%v, want c%v", got, want)
	}
}

// Only the mismatched fault gives clients other leases.
func TestTortureClientLease(t *testing.T) {
	o := &tortureOptions{lease: 2 * time.Second}
	for i := range 4 {
		if got := o.clientLease(i); got != 2*time.Second {
			t.Errorf("without mismatched, client %d: %v", i, got)
		}
	}
	o.faults = []string{faultMismatched}
	var got []time.Duration
	for i := range 4 {
		got = append(got, o.clientLease(i))
	}
	if want := []time.Duration{2 * time.Second, 2 * time.Second / 3, 2 * time.Second, 6 * time.Second}; !slices.Equal(got, want) {
		t.Errorf("mismatched: %v, want %v", got, want)
	}
	o.lease = 200 * time.Millisecond
	if got := o.clientLease(1); got != defaults.MinLease {
		t.Errorf("a third of 200ms: %v, want the minimum %v", got, defaults.MinLease)
	}
}

// Bad command lines exit 2 before anything starts, naming the problem.
func TestTortureUsageErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--clients", "1"}, "--clients 1: want 2 to 64"},
		{[]string{"--clients", "65"}, "--clients 65"},
		{[]string{"--duration", "0"}, "--duration 0s: must be positive"},
		{[]string{"--faults", "abort,flood"}, `unknown fault "flood"`},
		{[]string{"--fault-rate", "1.5"}, "--fault-rate 1.5"},
		{[]string{"--lease", "10ms"}, "--lease 10ms"},
		{[]string{"--locks", "0"}, "--locks 0"},
		{[]string{"--check-timeout", "0"}, "--check-timeout 0s"},
		{[]string{"--dialect", "mysql"}, `--dialect: ddl: unknown dialect "mysql"`},
		{[]string{"now"}, `unexpected argument "now"`},
		{[]string{"--frob"}, "flag provided but not defined: -frob"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, stdout, stderr := tests.Call(t, tc.args...)
			if code != cmdline.ExitUsage || stdout != "" || !strings.Contains(stderr, tc.want) ||
				!strings.Contains(stderr, "Run 'spanmutex-torture --help' for usage.") {
				t.Errorf("exit %d; stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
			}
		})
	}
}

func TestTortureHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}} {
		code, stdout, stderr := tests.Call(t, args...)
		if code != cmdline.ExitOK || stderr != "" {
			t.Errorf("%v: exit %d, stderr:\n%s", args, code, stderr)
		}
		for _, want := range []string{
			"Usage: spanmutex-torture [flags]", "--duration duration", "(default 1m0s)", "--clients int", "(default 8)",
			"--faults string", `(default "abort,unavailable,drop-commit,delay,pause,impatient,mismatched")`, "--fault-rate float", "--lease duration",
			"--locks int", "--seed uint", "--history string", "--check-timeout duration", "--progress duration",
			"drop-commit", "pause", "impatient", "mismatched", "porcupine", "Exit status:", "Examples:",
			"spanmutex.Scope", "no mutable package-level state", "lock_process_test.go", "longest declared lease + 2s",
		} {
			if !strings.Contains(stdout, want) {
				t.Errorf("%v does not contain %q:\n%s", args, want, stdout)
			}
		}
	}
}

func TestParseFaults(t *testing.T) {
	for in, want := range map[string]string{
		"none":                      "",
		"":                          "",
		"pause,abort":               "abort,pause",
		"delay, delay ,drop-commit": "drop-commit,delay",
	} {
		got, err := parseFaults(in)
		if err != nil || strings.Join(got, ",") != want {
			t.Errorf("parseFaults(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := parseFaults("abort,none"); err == nil {
		t.Error(`"abort,none" was accepted`)
	}
}

// tortureOnTestsEmulator runs the torture in-process with args on the
// tests' emulator, and checks that it leaves no goroutine behind.
func tortureOnTestsEmulator(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	tests.NeedEmulator(t)
	tortureNoLeak(t)
	t.Setenv(cmdline.EmulatorHostEnv, tests.Emu.Host())
	return tests.Call(t, args...)
}

// tortureNoLeak fails the test if goroutines of the torture are still
// running a few seconds after it ends.
func tortureNoLeak(t *testing.T) {
	t.Helper()
	testutil.NoGoroutinesOf(t, "the torture", "main.(*torture)", "main.(*freezer)")
}

// The session-takeover check passes a takeover a lease after the
// session's last write before it, and catches one that came sooner,
// whatever the acquisition's age; a takeover of a lease not held through
// a session is not its business.
func TestTortureSessionTakeoverCheck(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	sw := newSessionWrites()
	sw.holds[holdKey{"lock-1", 4}] = sessionHold{session: "s1", commit: t0}
	sw.writes["s1"] = []time.Time{t0.Add(-time.Second), t0.Add(time.Second), t0.Add(3 * time.Second)}
	tt := &torture{clients: []*tortureClient{{Client: &history.Client{ID: "c1"}, lease: 2 * time.Second, sessions: sw}}}
	takeover := func(token int64, at time.Duration) history.Op {
		return history.Op{Kind: history.Acquire, Outcome: history.OK, Takeover: true, Name: "lock-1", Token: token, Client: "c2", Commit: t0.Add(at)}
	}
	for _, tc := range []struct {
		op  history.Op
		bad int
	}{
		{takeover(5, 3*time.Second), 0},                  // 2 s after the renewal at 1 s (the one at 3 s is not before it)
		{takeover(5, 2500*time.Millisecond), 1},          // 1.5 s after the renewal at 1 s
		{takeover(5, 5*time.Second+time.Millisecond), 0}, // past the renewal at 3 s
		{takeover(5, 4*time.Second), 1},                  // 1 s after the renewal at 3 s
		{takeover(7, time.Second), 0},                    // token 6 was not held through a session
	} {
		checked, bad := tt.checkSessionTakeovers([]history.Op{tc.op})
		if len(bad) != tc.bad || checked != 1 && tc.op.Token == 5 {
			t.Errorf("takeover of token %d at %v: checked %d, violations %q; want %d", tc.op.Token-1, tc.op.Commit.Sub(t0), checked, bad, tc.bad)
		}
	}
}
