package spanmutex

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/stretchr/testify/require"

	"github.com/spanmutex/spanmutex/emulator"
)

// unreachableClient returns a client whose endpoint, SPANNER_EMULATOR_HOST,
// is 127.0.0.1:1, where nothing listens. The variable is set for the test
// only, which therefore does not run in parallel.
func unreachableClient(t *testing.T) *spanner.Client {
	t.Helper()
	t.Setenv(emulator.HostEnv, "127.0.0.1:1")
	cfg := spanner.ClientConfig{SessionPoolConfig: spanner.DefaultSessionPoolConfig, DisableNativeMetrics: true}
	cfg.SessionPoolConfig.MinOpened = 1
	c, err := spanner.NewClientWithConfig(context.Background(), "projects/test-project/instances/i1/databases/d1", cfg)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// requireOneLine fails the test if err's message spans lines or does not
// hold every one of want.
func requireOneLine(t *testing.T, err error, want ...string) {
	t.Helper()
	require.Error(t, err)
	msg := err.Error()
	require.NotContains(t, msg, "\n", "the error spans lines")
	for _, w := range want {
		require.Contains(t, msg, w)
	}
}

func TestPingUnreachableFailsFastNamingHostAndCause(t *testing.T) {
	c := unreachableClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	began := time.Now()
	err := Ping(ctx, c)
	took := time.Since(began)
	t.Logf("Ping against 127.0.0.1:1 with a 2s deadline failed after %v: %v", took, err)
	require.Less(t, took, 3*time.Second, "Ping outlived its ctx by more than the diagnosis allows")
	require.ErrorIs(t, err, ErrUnreachable)
	var ue *unreachableError
	require.True(t, errors.As(err, &ue))
	require.Equal(t, "127.0.0.1:1", ue.Host)
	requireOneLine(t, err, "127.0.0.1:1", "connection refused", "projects/test-project/instances/i1/databases/d1")
	require.NotContains(t, err.Error(), "TrackSessionHandles")
}

func TestRunUnreachableSaysWhereAndWhy(t *testing.T) {
	c := unreachableClient(t)
	m, err := New(c, "unreachable")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	began := time.Now()
	_, err = m.Run(ctx, func(context.Context, *Lease) error { t.Error("the section ran"); return nil })
	took := time.Since(began)
	t.Logf("Run against 127.0.0.1:1 with a 2s deadline failed after %v: %v", took, err)
	require.Less(t, took, 5*time.Second)
	require.ErrorIs(t, err, ErrNotObtained)
	require.ErrorIs(t, err, ErrUnreachable)
	requireOneLine(t, err, "127.0.0.1:1", "connection refused")
}

func TestMissingDatabaseOrInstanceSaysWhichOnce(t *testing.T) {
	needEmulator(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	instance := emu.Database()[:strings.Index(emu.Database(), "/databases/")]
	for _, tc := range []struct {
		name, db, want, notWant string
		instanceMissing         bool
	}{
		{"database", instance + "/databases/no-such-db", "database " + instance + "/databases/no-such-db does not exist", "instance " + instance + " does not", false},
		{"instance", "projects/spanmutex-test/instances/no-such-inst/databases/no-such-db",
			"instance projects/spanmutex-test/instances/no-such-inst does not exist", "create it", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := emu.NewClient(ctx, tc.db)
			require.NoError(t, err)
			defer c.Close()
			check := func(err error) {
				t.Helper()
				require.ErrorIs(t, err, ErrNotFound)
				var nf *notFoundError
				require.True(t, errors.As(err, &nf))
				require.Equal(t, tc.instanceMissing, nf.Instance != "")
				requireOneLine(t, err, tc.want)
				require.NotContains(t, err.Error(), tc.notWant)
				require.NotContains(t, err.Error(), "reach", "Spanner answered: it is reachable")
				require.Equal(t, 1, strings.Count(err.Error(), "does not exist"), "said once")
			}
			check(Ping(ctx, c))
			m, err := New(c, "nodb")
			require.NoError(t, err)
			_, err = m.Run(ctx, func(context.Context, *Lease) error { return nil })
			t.Logf("Run: %v", err)
			check(err)
			l, err := NewLock(c, "nodb")
			require.NoError(t, err)
			_, err = l.Lock(ctx)
			t.Logf("Lock: %v", err)
			check(err)
		})
	}
}
