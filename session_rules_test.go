package spanmutex

import (
	"context"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/spanmutex/spanmutex/ddl"
)

// The session rule is written twice too: in Go (row.withSession, then
// holderLive) and in SQL (sameScopeAsSilent with the session joined),
// which lockSQL reads with. This table holds both to the same rows held
// through a session, in both dialects: the session renewed within and
// past its lease, or gone, with the row's own RenewedAt old or fresh.
func TestSessionRulesAgree(t *testing.T) {
	needEmulator(t)
	eachDialect(t, func(t *testing.T, db string) {
		c := newClient(t, db)
		const lease = 10 * time.Second
		for _, tc := range []struct {
			name       string
			session    time.Duration // how long ago the session was renewed; 0: no session row
			renewedAgo time.Duration // the row's own RenewedAt
			silent     bool          // what both forms must say
		}{
			{"live session, old row", lease - 3*time.Second, 5 * lease, false},
			{"lapsed session, old row", lease + 3*time.Second, 5 * lease, true},
			{"lapsed session, fresh row", lease + 3*time.Second, lease - 3*time.Second, false},
			{"no session, old row", 0, lease + 3*time.Second, true},
			{"no session, fresh row", 0, lease - 3*time.Second, false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				silent := checkSessionRule(t, c, tc.name, lease, tc.session, tc.renewedAgo)
				assert.Equal(t, tc.silent, silent)
			})
		}
	})
}

// checkSessionRule writes lock name's row held through a session renewed
// sessionAgo ago (none if 0), its own RenewedAt renewedAgo ago, and an
// entry of the holder's Scope; it requires the SQL and Go forms to agree
// on whether the holder is silent, and returns what they say.
func checkSessionRule(t *testing.T, c *spanner.Client, name string, lease, sessionAgo, renewedAgo time.Duration) bool {
	ctx := context.Background()
	now := time.Now()
	holderID, sid := "00000000-0000-7000-8000-aaaaaaaaaaaa", "session-"+name
	renewed := now.Add(-renewedAgo)
	ms := []*spanner.Mutation{spanner.Insert(defaultTable,
		[]string{"Name", "State", "Owner", "LeaseID", "Token", "Attempts", "CreatedAt", "StartedAt", "RenewedAt", "UpdatedAt", "LeaseMicros", "Session"},
		[]any{name, string(StateStarted), "h", holderID, int64(1), int64(0), renewed, renewed, renewed, renewed, sessionHeldLease.Microseconds(), sid}),
		spanner.Insert(defaultTable+"Queue", []string{"Name", "EnqueuedAt", "WaiterID", "Owner", "RenewedAt", "LeaseMicros"},
			[]any{name, now, "00000001-0000-7000-8000-aaaaaaaaaaaa", "w", now, lease.Microseconds()})}
	if sessionAgo > 0 {
		at := now.Add(-sessionAgo)
		ms = append(ms, spanner.Insert(defaultTable+ddl.SessionsSuffix, []string{"SessionID", "Owner", "CreatedAt", "RenewedAt", "LeaseMicros"},
			[]any{sid, "h", at, at, lease.Microseconds()}))
	}
	_, err := c.Apply(ctx, ms)
	require.NoError(t, err)
	stmt := statementFor(t, c, func(d ddl.Dialect) string {
		return "SELECT CURRENT_TIMESTAMP(), m.`RenewedAt`, se.`RenewedAt`, se.`LeaseMicros`, COALESCE(" + sameScopeAsSilent(d, true) + ", FALSE) " +
			"FROM `" + defaultTable + "Queue` AS q JOIN `" + defaultTable + "` AS m ON m.`Name` = q.`Name` " +
			"LEFT JOIN `" + defaultTable + ddl.SessionsSuffix + "` AS se ON se.`SessionID` = m.`Session` WHERE q.`Name` = @name"
	}, map[string]any{"name": name, "lease": lease.Microseconds()})
	var sqlSilent, goSilent bool
	rows := 0
	err = c.Single().Query(ctx, stmt).Do(func(r *spanner.Row) error {
		var (
			at, rowAt time.Time
			seAt      spanner.NullTime
			seMicros  spanner.NullInt64
		)
		require.NoError(t, r.Columns(&at, &rowAt, &seAt, &seMicros, &sqlSilent))
		held := row{Exists: true, State: StateStarted, LeaseID: holderID, StartedAt: rowAt, RenewedAt: rowAt, UpdatedAt: rowAt,
			Lease: sessionHeldLease, Session: sid, Now: at}
		held = held.withSession(seAt.Time, time.Duration(seMicros.Int64)*time.Microsecond, seAt.Valid)
		goSilent = !holderLive(held, lease)
		rows++
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, 1, rows)
	require.Equal(t, goSilent, sqlSilent, "%s: sameScopeAsSilent against withSession and holderLive", name)
	return sqlSilent
}
