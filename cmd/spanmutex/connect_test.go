package main

import (
	"strings"
	"testing"
	"time"

	"github.com/spanmutex/spanmutex/internal/cmdline"
)

// TestConnectTimeoutUnreachable points every subcommand that connects at
// 127.0.0.1:1, where nothing listens: each fails within --connect-timeout
// and a little more, on one line that names the host and the cause.
func TestConnectTimeoutUnreachable(t *testing.T) {
	t.Setenv(cmdline.EmulatorHostEnv, "127.0.0.1:1")
	t.Setenv(cmdline.DatabaseEnv, "projects/test-project/instances/i1/databases/d1")
	for _, args := range [][]string{
		{"status", "--connect-timeout", "300ms"},
		{"reset", "--connect-timeout", "300ms", "name"},
		{"run", "--connect-timeout", "300ms", "name", "--", "true"},
		{"lock", "--connect-timeout", "300ms", "name", "--", "true"},
	} {
		t.Run(args[0], func(t *testing.T) {
			began := time.Now()
			code, _, stderr := cli(t, args...)
			took := time.Since(began)
			t.Logf("%s: exit %d after %v: %s", strings.Join(args, " "), code, took, stderr)
			if code != exitError {
				t.Errorf("exit %d, want %d", code, exitError)
			}
			if took > 2*time.Second {
				t.Errorf("took %v with --connect-timeout 300ms", took)
			}
			if lines := strings.Count(stderr, "\n"); lines != 1 {
				t.Errorf("stderr has %d lines, want 1:\n%s", lines, stderr)
			}
			for _, want := range []string{"127.0.0.1:1", "connection refused", "--connect-timeout 300ms"} {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr does not say %q:\n%s", want, stderr)
				}
			}
		})
	}
}

// TestConnectTimeoutDefault: the default is a few seconds, and a timeout
// that is not positive is a usage error.
func TestConnectTimeoutDefault(t *testing.T) {
	if cmdline.DefaultConnectTimeout > 10*time.Second {
		t.Errorf("cmdline.DefaultConnectTimeout = %v; want a few seconds", cmdline.DefaultConnectTimeout)
	}
	t.Setenv(cmdline.DatabaseEnv, "projects/test-project/instances/i1/databases/d1")
	code, _, stderr := cli(t, "status", "--connect-timeout", "0s")
	if code != exitUsage || !strings.Contains(stderr, "--connect-timeout 0s: must be positive") {
		t.Errorf("exit %d, stderr %q; want a usage error about --connect-timeout", code, stderr)
	}
}

// TestMissingDatabaseOrInstance: a database or instance that does not exist
// is reported once, saying which, on one line, without suggesting that
// Spanner is unreachable.
func TestMissingDatabaseOrInstance(t *testing.T) {
	needEmulator(t)
	t.Setenv(cmdline.EmulatorHostEnv, emu.Host())
	instance := emu.Database()[:strings.Index(emu.Database(), "/databases/")]
	for _, tc := range []struct{ name, db, want string }{
		{"database", instance + "/databases/no-such-db", "database " + instance + "/databases/no-such-db does not exist (its instance does)"},
		{"instance", "projects/spanmutex-test/instances/no-such-inst/databases/no-such-db", "instance projects/spanmutex-test/instances/no-such-inst does not exist"},
	} {
		for _, args := range [][]string{{"status"}, {"run", "name", "--", "true"}} {
			t.Run(tc.name+"/"+args[0], func(t *testing.T) {
				code, _, stderr := cli(t, append([]string{args[0], "--database", tc.db}, args[1:]...)...)
				if code != exitError || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tc.want) ||
					strings.Count(stderr, "does not exist") != 1 || strings.Contains(stderr, "reach") {
					t.Errorf("exit %d, stderr:\n%s\nwant exit 1 and one line saying %q once, and nothing about reaching Spanner", code, stderr, tc.want)
				}
			})
		}
	}
}
