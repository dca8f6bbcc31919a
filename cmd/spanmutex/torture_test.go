package main

import (
	"regexp"
	"strings"
	"testing"
)

// TestTorture runs a short torture in-process, on an emulator of its own
// with every fault on: it exits 0 and reports what it did, each check, and
// no violation.
func TestTorture(t *testing.T) {
	needBinary(t)
	tortureNoLeak(t)
	t.Setenv(emulatorHostEnv, "")
	code, stdout, stderr := cli(t, "torture", "--duration", "10s", "--clients", "4", "--progress", "5s")
	if code != exitOK {
		t.Fatalf("torture exited %d; stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, want := range []string{
		"spanmutex torture: 4 clients for 10s, faults abort,unavailable,drop-commit,delay,pause",
		"with --enable_fault_injection",
		"Operations: ",
		"  acquire ",
		"  guarded-write ",
		"Faults injected: ",
		"  abort ",
		"  unavailable ",
		"  drop-commit ",
		"  delay ",
		"  pause ",
		"Checks:",
		"  linearizable ",
		"  holders-disjoint ",
		"Violations: 0\n",
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
	needEmulator(t)
	tortureNoLeak(t)
	t.Setenv(emulatorHostEnv, emu.Host())
	code, stdout, stderr := cli(t, "torture", "--duration", "3s", "--clients", "2", "--faults", "none", "--progress", "0")
	if code != exitOK || !strings.Contains(stdout, "faults none") || !strings.Contains(stdout, "Faults injected: 0\n") ||
		!strings.Contains(stdout, "Violations: 0\n") || !strings.Contains(stdout, "Using the Cloud Spanner emulator at") {
		t.Errorf("exit %d; stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
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
		{[]string{"--watermark", "10ms"}, "--watermark 10ms"},
		{[]string{"--locks", "0"}, "--locks 0"},
		{[]string{"--check-timeout", "0"}, "--check-timeout 0s"},
		{[]string{"now"}, `unexpected argument "now"`},
		{[]string{"--frob"}, "flag provided but not defined: -frob"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, stdout, stderr := cli(t, append([]string{"torture"}, tc.args...)...)
			if code != exitUsage || stdout != "" || !strings.Contains(stderr, tc.want) ||
				!strings.Contains(stderr, "Run 'spanmutex torture --help' for usage.") {
				t.Errorf("exit %d; stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
			}
		})
	}
}

func TestTortureHelp(t *testing.T) {
	for _, args := range [][]string{{"torture", "--help"}, {"help", "torture"}} {
		code, stdout, stderr := cli(t, args...)
		if code != exitOK || stderr != "" {
			t.Errorf("%v: exit %d, stderr:\n%s", args, code, stderr)
		}
		for _, want := range []string{
			"Usage: spanmutex torture [flags]", "--duration duration", "(default 1m0s)", "--clients int", "(default 8)",
			"--faults string", `(default "abort,unavailable,drop-commit,delay,pause")`, "--fault-rate float", "--watermark duration",
			"--locks int", "--seed uint", "--history string", "--check-timeout duration", "--progress duration",
			"drop-commit", "pause", "porcupine", "Exit status:", "Examples:",
		} {
			if !strings.Contains(stdout, want) {
				t.Errorf("%v does not contain %q:\n%s", args, want, stdout)
			}
		}
	}
	_, stdout, _ := cli(t, "--help")
	if !strings.Contains(stdout, "\n  torture ") {
		t.Errorf("the top help does not list torture:\n%s", stdout)
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

// tortureNoLeak fails the test if goroutines of the torture are still
// running a few seconds after it ends.
func tortureNoLeak(t *testing.T) {
	t.Helper()
	noGoroutinesOf(t, "the torture", "main.(*torture)", "main.(*freezer)")
}
