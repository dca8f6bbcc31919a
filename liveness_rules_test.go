package spanmutex

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/spanmutex/spanmutex/ddl"
)

// The liveness rules are written twice: in Go (takes, holderLive with
// silentFor) and in SQL (liveEntry, sameScopeAsSilent), which lockSQL
// reads with. This table holds both forms to the same cases, in both
// dialects: entries renewed within and past their time to live, and
// holders renewed within and past their lease, one of them with no
// RenewedAt (judged by StartedAt), and entries past their time to live
// that name a session renewed within it or past it. Times are seconds from
// the boundary, so that the time the statement takes does not matter.
func TestLivenessRulesAgree(t *testing.T) {
	needEmulator(t)
	eachDialect(t, func(t *testing.T, db string) {
		ctx := context.Background()
		c := newClient(t, db)
		const lease = 10 * time.Second
		for _, h := range []struct {
			name       string
			renewedAgo time.Duration // 0: RenewedAt NULL, StartedAt this long ago
			startedAgo time.Duration
		}{
			{"live holder", lease - 3*time.Second, 0},
			{"silent holder", lease + 3*time.Second, 0},
			{"silent holder, no RenewedAt", 0, lease + 3*time.Second},
			{"live holder, no RenewedAt", 0, lease - 3*time.Second},
		} {
			t.Run(h.name, func(t *testing.T) { checkLiveness(ctx, t, c, h.name, lease, h.renewedAgo, h.startedAgo) })
		}
	})
}

// checkLiveness writes lock name's row, held by a lease of scope
// "aaaaaaaaaaaa", and entries of that Scope and another, then compares
// what the SQL forms and the Go forms say of each entry.
func checkLiveness(ctx context.Context, t *testing.T, c *spanner.Client, name string, lease, renewedAgo, startedAgo time.Duration) {
	now := time.Now()
	holderID := "00000000-0000-7000-8000-aaaaaaaaaaaa"
	started := now.Add(-renewedAgo)
	var renewed any = started
	if renewedAgo == 0 {
		started, renewed = now.Add(-startedAgo), nil
	}
	ms := []*spanner.Mutation{spanner.Insert(defaultTable,
		[]string{"Name", "State", "Owner", "LeaseID", "Token", "Attempts", "CreatedAt", "StartedAt", "RenewedAt", "UpdatedAt", "LeaseMicros"},
		[]any{name, string(StateStarted), "h", holderID, int64(1), int64(0), started, started, renewed, started, lease.Microseconds()})}
	ttl := waiterTTLFactor * lease
	for i, ago := range []time.Duration{ttl - 3*time.Second, ttl + 3*time.Second} {
		for j, scope := range []string{"aaaaaaaaaaaa", "bbbbbbbbbbbb"} {
			id := fmt.Sprintf("0000000%d-0000-7000-8000-%s", 2*i+j, scope)
			ms = append(ms, spanner.Insert(defaultTable+"Queue", []string{"Name", "EnqueuedAt", "WaiterID", "Owner", "RenewedAt", "LeaseMicros"},
				[]any{name, now.Add(-ago), id, "w", now.Add(-ago), lease.Microseconds()}))
		}
		// An entry silent past its time to live, whose session was renewed
		// ago: the session's renewal counts as the entry's.
		session, id := fmt.Sprintf("%.28s-%d", name, i), fmt.Sprintf("0000000%d-0000-7000-8000-bbbbbbbbbbbb", 4+i)
		ms = append(ms, spanner.Insert(defaultTable+"Sessions", []string{"SessionID", "Owner", "CreatedAt", "RenewedAt", "LeaseMicros"},
			[]any{session, "w", now.Add(-ago), now.Add(-ago), lease.Microseconds()}),
			spanner.Insert(defaultTable+"Queue", []string{"Name", "EnqueuedAt", "WaiterID", "Owner", "RenewedAt", "LeaseMicros", "Session"},
				[]any{name, now.Add(-ttl - 3*time.Second), id, "w", now.Add(-ttl - 3*time.Second), lease.Microseconds(), session}))
	}
	_, err := c.Apply(ctx, ms)
	require.NoError(t, err)
	stmt := statementFor(t, c, func(d ddl.Dialect) string {
		return "SELECT CURRENT_TIMESTAMP(), q.`WaiterID`, q.`RenewedAt`, (SELECT qs.`RenewedAt` FROM `" + defaultTable + "Sessions` AS qs WHERE qs.`SessionID` = q.`Session`), " +
			liveEntry(d, defaultTable+"Sessions") + ", COALESCE(" + sameScopeAsSilent(d, false) + ", FALSE) " +
			"FROM `" + defaultTable + "Queue` AS q JOIN `" + defaultTable + "` AS m ON m.`Name` = q.`Name` WHERE q.`Name` = @name ORDER BY q.`WaiterID`"
	}, map[string]any{"name": name, "lease": lease.Microseconds()})
	st := &spannerStore{lease: lease}
	err = c.Single().Query(ctx, stmt).Do(func(r *spanner.Row) error {
		var (
			at          time.Time
			id          string
			entryAt     time.Time
			sessionAt   spanner.NullTime
			live, quiet bool
		)
		require.NoError(t, r.Columns(&at, &id, &entryAt, &sessionAt, &live, &quiet))
		holder := row{Exists: true, State: StateStarted, LeaseID: holderID, StartedAt: started, UpdatedAt: started, Lease: lease, Now: at}
		if renewed != nil {
			holder.RenewedAt = started
		}
		e := &queueEntry{WaiterID: id, RenewedAt: entryAt, LeaseMicros: spanner.NullInt64{Int64: lease.Microseconds(), Valid: true}, SessionRenewedAt: sessionAt.Time}
		assert.Equal(t, st.takes(holder, e, "", ""), live, "%s: entry %s: liveEntry against takes", name, id)
		if sessionAt.Valid {
			assert.Equal(t, strings.HasPrefix(id, "00000004"), live, "%s: entry %s: live exactly while its session is", name, id)
		}
		goQuiet := !holderLive(holder, lease) && scopeOf(id) == silentScope(holder, "")
		assert.Equal(t, goQuiet, quiet, "%s: entry %s: sameScopeAsSilent against holderLive", name, id)
		return nil
	})
	require.NoError(t, err)
}
