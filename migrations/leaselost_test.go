package migrations

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/spanmutex/spanmutex"
	"github.com/spanmutex/spanmutex/internal/cutoff"
)

// cutOnLog is a slog handler that cuts a client off from Spanner when a log
// message starts with on, and heals it after heal: the replica froze, or
// lost its network, in the middle of its migrations.
type cutOnLog struct {
	on   string
	cut  *cutoff.Switch
	heal time.Duration
	once chan struct{}
}

func (h *cutOnLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *cutOnLog) Handle(_ context.Context, r slog.Record) error {
	if !strings.HasPrefix(r.Message, h.on) {
		return nil
	}
	select {
	case <-h.once:
		return nil
	default:
		close(h.once)
	}
	h.cut.Store(true)
	time.AfterFunc(h.heal, func() { h.cut.Store(false) }) // the length of the outage
	return nil
}
func (h *cutOnLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *cutOnLog) WithGroup(string) slog.Handler      { return h }

// A replica that loses its lease in the middle of the migrations (cut off
// from Spanner past the lease, right after migration 1) stops there:
// Up reports the lost lease, the version stays clean at 1, and the next
// replica applies the rest.
func TestLostLeaseStopsTheMigrations(t *testing.T) {
	db := freshDatabase(t)
	r := newReplica(t, db)
	cut := &cutoff.Switch{Reason: "test: cut off"}
	cutClient, err := emu.NewClient(context.Background(), db, cut.ClientOptions()...)
	require.NoError(t, err)
	t.Cleanup(cutClient.Close)
	const lease = time.Second
	h := &cutOnLog{on: "golang-migrate: 1/u", cut: cut, heal: 4 * lease, once: make(chan struct{})}
	m, err := New(cutClient, release(t, "release1"), WithAdminClient(r.admin), WithLogger(slog.New(h)),
		WithLockOptions(spanmutex.WithLease(lease)))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := m.Up(ctx)
	require.ErrorIs(t, err, spanmutex.ErrLeaseLost)
	assert.Contains(t, err.Error(), "migrations: stopped at version 1")
	assert.Equal(t, []int{1}, res.Applied)
	version, dirty := readVersion(t, r.client)
	assert.Equal(t, int64(1), version)
	assert.False(t, dirty, "the version was never marked for migration 2")

	next, err := New(r.client, release(t, "release1"), WithAdminClient(r.admin))
	require.NoError(t, err)
	res, err = next.Up(ctx)
	require.NoError(t, err)
	assert.Equal(t, []int{2, 3, 4}, res.Applied)
	assert.Greater(t, res.Token, int64(1), "the next replica took the lock over with a higher token")
	v, dirty, runs := state(t, r.client)
	assert.Equal(t, int64(4), v)
	assert.False(t, dirty)
	assert.Equal(t, int64(1), runs["status"])
}
