package spanmutex

import (
	"context"
	"testing"

	"cloud.google.com/go/spanner"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/spanmutex/spanmutex/internal/sqldialect"
)

// TestGuardSQLAgreesWithGuard holds GuardSQL's condition and Guard's read to
// the same cases, in both dialects, on a name that needs its quotes and
// backslash escaped: the lease holding its lock, leases that differ from it
// in token or id, a lease of a name with no row, and a released lease.
func TestGuardSQLAgreesWithGuard(t *testing.T) {
	needEmulator(t)
	eachDialect(t, func(t *testing.T, db string) {
		ctx := context.Background()
		client := newClient(t, db)
		d, err := sqldialect.Detect(ctx, client)
		require.NoError(t, err)
		const name = `guard's "name" \ here`
		lock, err := NewLock(client, name)
		require.NoError(t, err)
		held, err := lock.Lock(ctx)
		require.NoError(t, err)
		table := held.table
		cases := []struct {
			what  string
			lease *Lease
			holds bool
		}{
			{"the holder's lease", held, true},
			{"a later token", newLease(name, held.owner, held.id, held.token+1, false, table), false},
			{"another lease id", newLease(name, held.owner, "another-id", held.token, false, table), false},
			{"a name with no row", newLease("no such lock", held.owner, held.id, held.token, false, table), false},
		}
		check := func(what string, l *Lease, holds bool) {
			_, err := client.ReadWriteTransaction(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
				row, err := txn.Query(ctx, spanner.Statement{SQL: "SELECT " + l.GuardSQL(d)}).Next()
				if err != nil {
					return err
				}
				var got bool
				require.NoError(t, row.Columns(&got))
				assert.Equal(t, holds, got, "%s: GuardSQL", what)
				guardErr := l.Guard(ctx, txn)
				assert.Equal(t, holds, guardErr == nil, "%s: Guard returned %v", what, guardErr)
				return nil
			})
			require.NoError(t, err, what)
		}
		for _, c := range cases {
			check(c.what, c.lease, c.holds)
		}
		stale := newLease(name, held.owner, held.id, held.token, false, table)
		require.NoError(t, lock.Unlock(ctx))
		check("a lease whose holder unlocked, not told", stale, false)
		check("the released lease", held, false)
		assert.Equal(t, "FALSE", held.GuardSQL(d), "a released lease needs no read")

		// A Semaphore's lease is held by its queue entry.
		sem, err := NewRWLock(client, name+" rw")
		require.NoError(t, err)
		w, err := sem.Lock(ctx)
		require.NoError(t, err)
		entryLease := func(token int64, id string) *Lease {
			l := newLease(w.name, w.owner, id, token, false, table)
			l.queuedAt, l.shared = w.queuedAt, true
			return l
		}
		check("a writer's lease", w, true)
		check("a writer's lease, a later token", entryLease(w.token+1, w.id), false)
		check("a writer's lease, another id", entryLease(w.token, "another-id"), false)
		staleW := entryLease(w.token, w.id)
		require.NoError(t, sem.Unlock(ctx))
		check("a writer's lease whose holder unlocked, not told", staleW, false)
	})
}
