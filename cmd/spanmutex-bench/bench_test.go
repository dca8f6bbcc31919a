package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/spanmutex/spanmutex/internal/cmdline"
	"github.com/spanmutex/spanmutex/internal/testutil"
)

// noBenchLeak fails the test if, within a few seconds of its end, goroutines
// of the benchmark are still running.
func noBenchLeak(t *testing.T) {
	t.Helper()
	testutil.NoGoroutinesOf(t, "the benchmark", "internal/bench.")
}

// TestBench runs a short benchmark in-process, against a database of the
// test emulator and on an embedded emulator of its own, and checks that it
// prints progress and the tables.
func TestBench(t *testing.T) {
	tests.NeedEmulator(t)
	tests.RunOnBothBackends(t, tests.NewDatabase(t), noBenchLeak, []string{"--contenders", "1", "--duration", "1s"}, func(t *testing.T, stdout, stderr string) {
		for _, want := range []string{
			"[1/2] spanmutex, 1 contender(s) on 1 client(s), for 1s ...",
			"[2/2] naive, 1 contender(s): ",
			"LOCK       N  CLIENTS  ACQUISITIONS  ACQ/S",
			"COMMITS/ACQ  READS/ACQ  RPCS/ACQ",
			"\nspanmutex  1  1 ",
			"\nnaive      1  1 ",
			"N  COMMITS/ACQ NAIVE÷OURS  RPCS/ACQ NAIVE÷OURS  ACQ/S OURS÷NAIVE",
			"Cloud Spanner emulator",
			"Completed 2 runs",
		} {
			if !strings.Contains(stdout, want) {
				t.Errorf("stdout does not contain %q:\n%s", want, stdout)
			}
		}
		if stderr != "" {
			t.Errorf("stderr is not empty:\n%s", stderr)
		}
	})
}

// TestBenchWithoutSchema points the benchmark at a table that does not
// exist: it says so once, with how to create it, and exits 1 before any run.
func TestBenchWithoutSchema(t *testing.T) {
	tests.NeedEmulator(t)
	noBenchLeak(t)
	t.Setenv(cmdline.EmulatorHostEnv, tests.Emu.Host())
	code, stdout, stderr := tests.Call(t, "--database", tests.NewDatabase(t), "--table", "NoSuchTable", "--contenders", "1", "--duration", "1s")
	if code != cmdline.ExitError || strings.Count(stderr, "does not exist") != 1 || !strings.Contains(stderr, "spanmutex ddl --table NoSuchTable") {
		t.Errorf("exit %d; stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if strings.Contains(stdout, "[1/2]") {
		t.Errorf("a run started without a schema:\n%s", stdout)
	}
}

// TestBenchUsage checks bench's usage errors (exit 2, nothing on stdout,
// the problem named on stderr) and its help.
func TestBenchUsage(t *testing.T) {
	const db = "projects/spanmutex-test/instances/spanmutex/databases/exists"
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"zero contenders", []string{"--contenders", "0"}, `invalid value "0" for flag -contenders`},
		{"not a number", []string{"--contenders", "1,x"}, `"x": want whole numbers from 1 to 10000`},
		{"too many contenders", []string{"--contenders", "10001"}, "10001"},
		{"empty list", []string{"--contenders", ""}, "invalid value"},
		{"zero duration", []string{"--duration", "0s"}, "--duration 0s: must be positive"},
		{"zero clients", []string{"--clients", "0"}, "--clients 0: want 1 to 100"},
		{"too many clients", []string{"--clients", "101"}, "--clients 101"},
		{"bad table", []string{"--table", "x y"}, "invalid table name"},
		{"malformed database", []string{"--database", "x"}, `--database "x" is malformed`},
		{"an argument", []string{"now"}, `unexpected argument "now"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(cmdline.DatabaseEnv, db)
			code, stdout, stderr := tests.Call(t, tc.args...)
			if code != cmdline.ExitUsage || stdout != "" || !strings.Contains(stderr, tc.want) ||
				!strings.Contains(stderr, "spanmutex-bench --help' for usage") {
				t.Errorf("exit %d, want %d; stdout:\n%s\nstderr:\n%s", code, cmdline.ExitUsage, stdout, stderr)
			}
		})
	}

	for _, args := range [][]string{{"--help"}, {"-h"}} {
		code, stdout, stderr := tests.Call(t, args...)
		if code != cmdline.ExitOK || stderr != "" {
			t.Errorf("%v: exit %d, stderr:\n%s", args, code, stderr)
		}
		for _, want := range []string{"Usage: spanmutex-bench [flags]", "--contenders list", "(default 1,10,100,1000)",
			"--duration duration", "(default 20s)", "--clients int", "(default 8)", "--database string", "--table string",
			"FIFO violations", "emulator", "Exit status:", "Examples:"} {
			if !strings.Contains(stdout, want) {
				t.Errorf("%v does not contain %q:\n%s", args, want, stdout)
			}
		}
	}
}

// TestContenderList parses --contenders.
func TestContenderList(t *testing.T) {
	var l contenderList
	if err := l.Set("1, 10,1000"); err != nil || !slices.Equal(l, contenderList{1, 10, 1000}) || l.String() != "1,10,1000" {
		t.Errorf("Set: %v, %v (%q)", l, err, l.String())
	}
	for _, bad := range []string{"", "1,,2", "-1", "1.5", "10001"} {
		if err := l.Set(bad); err == nil {
			t.Errorf("Set(%q) accepted", bad)
		}
	}
}
