package emulator

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFindBinaryHonoursEnv(t *testing.T) {
	t.Setenv(BinaryEnv, filepath.Join(t.TempDir(), "no-such-emulator"))
	_, err := FindBinary()
	require.ErrorIs(t, err, ErrBinaryNotFound)
	assert.Contains(t, err.Error(), "apt-get install google-cloud-cli-spanner-emulator")
	assert.Contains(t, err.Error(), BinaryEnv)
}

func TestFindBinaryReportsWhereItLooked(t *testing.T) {
	t.Setenv(BinaryEnv, "")
	t.Setenv("PATH", t.TempDir())
	t.Setenv("HOME", t.TempDir())
	p, err := FindBinary()
	if err == nil {
		// The SDK is installed at a standard place on this machine.
		assert.FileExists(t, p)
		return
	}
	assert.ErrorIs(t, err, ErrBinaryNotFound)
	assert.Contains(t, err.Error(), "cloud_spanner_emulator/emulator_main")
}

func TestStartFailsClearlyWithoutBinary(t *testing.T) {
	_, err := Start(context.Background(), WithBinary(filepath.Join(t.TempDir(), "missing")))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "emulator: start")
}

func TestStartRejectsBadOptions(t *testing.T) {
	for _, opt := range []Option{WithProject("p"), WithInstance("i"), WithStartTimeout(0)} {
		_, err := Start(context.Background(), opt)
		assert.Error(t, err)
	}
}

func TestStartReportsAnEmulatorThatDiesAtOnce(t *testing.T) {
	script := filepath.Join(t.TempDir(), "fake_emulator")
	require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\necho 'cannot bind' >&2\nexit 3\n"), 0o755))
	_, err := Start(context.Background(), WithBinary(script))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "exited before it accepted connections")
	assert.Contains(t, err.Error(), "cannot bind")
}

// Start brings up the real emulator with the schema; a second Start attaches
// to it through SPANNER_EMULATOR_HOST and gets a database of its own.
func TestStartAndAttach(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: starts the emulator (skipped with -short)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	t.Setenv(HostEnv, "")
	e, err := Start(ctx, WithDDL("CREATE TABLE Extra (K STRING(10) NOT NULL) PRIMARY KEY (K)"))
	require.NoError(t, err, "the Cloud Spanner emulator is needed: %s", InstallHint)
	defer func() { assert.NoError(t, e.Close()) }()
	assert.True(t, e.Started())
	assert.NotZero(t, e.PID())

	_, err = e.Client().Apply(ctx, []*spanner.Mutation{
		spanner.Insert("Extra", []string{"K"}, []any{"k"}),
		spanner.Insert("Mutexes", []string{"Name", "State", "Token", "Attempts", "CreatedAt", "UpdatedAt"},
			[]any{"n", "NEEDED", 0, 0, spanner.CommitTimestamp, spanner.CommitTimestamp}),
	})
	require.NoError(t, err)

	t.Setenv(HostEnv, e.Host())
	attached, err := Start(ctx)
	require.NoError(t, err)
	assert.False(t, attached.Started())
	assert.Zero(t, attached.PID())
	assert.NotEqual(t, e.Database(), attached.Database())
	row, err := attached.Client().Single().ReadRow(ctx, "Mutexes", spanner.Key{"n"}, []string{"State"})
	assert.Equal(t, spanner.ErrCode(err).String(), "NotFound", "a fresh database: %v", row)
	require.NoError(t, attached.Close())

	// Closing the attached one leaves the emulator running.
	_, err = e.Client().Single().ReadRow(ctx, "Extra", spanner.Key{"k"}, []string{"K"})
	assert.NoError(t, err)
	assert.NoError(t, e.Close())
	assert.NoError(t, e.Close(), "Close twice is fine")
}

// Exited is closed when the emulator dies by itself (here: SIGKILL), and
// ExitError says how; it stays open when Close stops it, and is nil for an
// attached emulator.
func TestExitedTellsADeathFromAClose(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: starts the emulator (skipped with -short)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	bin, err := FindBinary()
	require.NoError(t, err, InstallHint)
	killed, err := Start(ctx, WithBinary(bin))
	require.NoError(t, err)
	defer killed.Close()
	assert.NoError(t, killed.ExitError(), "running")
	require.NoError(t, killed.proc.cmd.Process.Kill())
	select {
	case <-killed.Exited():
	case <-time.After(10 * time.Second):
		t.Fatal("Exited not closed 10s after SIGKILL")
	}
	assert.ErrorContains(t, killed.ExitError(), "exited unexpectedly: signal: killed")

	closed, err := Start(ctx, WithBinary(bin))
	require.NoError(t, err)
	exited := closed.Exited()
	require.NoError(t, closed.Close())
	select {
	case <-exited:
		t.Fatal("Exited closed by Close")
	default:
	}
	assert.Nil(t, (&Emulator{}).Exited(), "not started here")
}
