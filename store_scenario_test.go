//go:build go1.25

package spanmutex

// One table of store scenarios, run on the real emulator (spannerStore, both
// dialects) and on the simulation's store (simConn), so that the
// simulation cannot drift from what Spanner does: each scenario drives the
// lockStore interface the Lock's code uses and asserts what Spanner answers.

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// scenarioEnv is where a store scenario runs.
type scenarioEnv struct {
	// conn returns a new process's connection to the database.
	conn func() lockStore
	// elapse lets d pass on Spanner's clock, as st reads it.
	elapse func(t *testing.T, st lockStore, name string, d time.Duration)
}

// storeScenario is one scenario of the table.
type storeScenario struct {
	name string
	run  func(t *testing.T, env scenarioEnv, name string)
}

// storeScenarios is the table.
var storeScenarios = []storeScenario{
	{"HandOffInEntryOrder", scenarioHandOffInEntryOrder},
	{"OwnEntriesAreNeverAhead", scenarioOwnEntriesNeverAhead},
	{"TakeOverDeletesTheSilentScope", scenarioTakeOverDeletesSilentScope},
	{"HandOffPagesPastDeadEntries", scenarioHandOffPagesPastDeadEntries},
	{"LeaveHandsOn", scenarioLeaveHandsOn},
	{"ReadAtShowsThePast", scenarioReadAtShowsThePast},
	{"RenewRecordsItsCommit", scenarioRenewRecordsItsCommit},
	{"PassOnToTheHead", scenarioPassOnToTheHead},
}

// runStoreScenarios runs the table in env, each scenario on a lock of its
// own.
func runStoreScenarios(t *testing.T, env scenarioEnv) {
	for _, sc := range storeScenarios {
		t.Run(sc.name, func(t *testing.T) { sc.run(t, env, "scenario-"+sc.name) })
	}
}

// scenarioCtx bounds one store call of a scenario.
func scenarioCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// scenarioPolicy is the policy of a contender declaring lease, no jitter.
func scenarioPolicy(lease time.Duration) policy { return policy{lease: lease} }

// contenderIn is a contender of Scope scope: its owner name and waiter id.
func contenderIn(scope *Scope, owner string) claim {
	return claim{owner: owner, leaseID: scope.newWaiterID()}
}

// mustAcquire makes c take the free (or silent) lock and returns its lease.
func mustAcquire(t *testing.T, st lockStore, name string, c claim, lease time.Duration, key queueKey) *Lease {
	t.Helper()
	res, err := st.acquireLock(scenarioCtx(t), name, key, scenarioPolicy(lease), c, true)
	require.NoError(t, err)
	require.NotNil(t, res.lease, "%s should take the lock: %+v", c.owner, res.decision)
	return res.lease
}

// mustQueue makes c arrive at the held lock and returns its entry's key.
func mustQueue(t *testing.T, st lockStore, name string, c claim, lease time.Duration) queueKey {
	t.Helper()
	res, err := st.acquireLock(scenarioCtx(t), name, endOfQueue, scenarioPolicy(lease), c, true)
	require.NoError(t, err)
	require.Nil(t, res.lease, "%s should queue", c.owner)
	require.Equal(t, lockWait, res.decision.action)
	require.NotEqual(t, endOfQueue, res.key)
	return res.key
}

// The holder's Unlock hands the lock to the oldest entry, with the next
// token, and so on down the queue; the last Unlock frees it.
func scenarioHandOffInEntryOrder(t *testing.T, env scenarioEnv, name string) {
	st, s := env.conn(), NewScope()
	a, b, c := contenderIn(s, "a"), contenderIn(s, "b"), contenderIn(s, "c")
	la := mustAcquire(t, st, name, a, 10*time.Second, endOfQueue)
	assert.Equal(t, int64(1), la.Token())
	kb := mustQueue(t, st, name, b, 10*time.Second)
	kc := mustQueue(t, st, name, c, 10*time.Second)
	for key, ahead := range map[queueKey]int{kb: 0, kc: 1} {
		v, err := st.readLock(scenarioCtx(t), name, key)
		require.NoError(t, err)
		assert.Equal(t, ahead, v.ahead, "entries before %s", key.id)
		assert.True(t, v.queued)
	}
	to, err := st.unlock(scenarioCtx(t), la)
	require.NoError(t, err)
	assert.Equal(t, b.leaseID, to.waiterID)
	assert.Equal(t, int64(2), to.token)
	r, err := st.read(scenarioCtx(t), name)
	require.NoError(t, err)
	assert.True(t, r.heldBy(b.leaseID))
	lb := leaseOfRow(name, r)
	to, err = st.unlock(scenarioCtx(t), lb)
	require.NoError(t, err)
	assert.Equal(t, c.leaseID, to.waiterID)
	assert.Equal(t, int64(3), to.token)
	r, err = st.read(scenarioCtx(t), name)
	require.NoError(t, err)
	to, err = st.unlock(scenarioCtx(t), leaseOfRow(name, r))
	require.NoError(t, err)
	assert.Empty(t, to.waiterID)
	r, err = st.read(scenarioCtx(t), name)
	require.NoError(t, err)
	assert.Equal(t, StateNeeded, r.State)
	assert.Equal(t, int64(3), r.Token)
}

// leaseOfRow is the lease of the holder r shows of lock name.
func leaseOfRow(name string, r row) *Lease {
	return newLease(name, r.Owner, r.LeaseID, r.Token, false, defaultTable)
}

// A stray entry of a contender's own (a join whose answer was lost) is
// never counted before it: it takes the free lock, and purges the stray.
func scenarioOwnEntriesNeverAhead(t *testing.T, env scenarioEnv, name string) {
	st, s := env.conn(), NewScope()
	b := contenderIn(s, "b")
	_, err := st.enqueue(scenarioCtx(t), name, []queueInsert{{id: b.leaseID, owner: b.owner, lease: 10 * time.Second}})
	require.NoError(t, err)
	v, err := st.readLock(scenarioCtx(t), name, queueKey{at: endOfQueue.at, id: b.leaseID})
	require.NoError(t, err)
	assert.Zero(t, v.ahead, "our own stray entry counted before us")
	lb := mustAcquire(t, st, name, b, 10*time.Second, endOfQueue)
	require.NoError(t, st.purgeWaiter(scenarioCtx(t), name, b.leaseID))
	_, found, err := st.findQueued(scenarioCtx(t), name, b.leaseID)
	require.NoError(t, err)
	assert.False(t, found)
	_, err = st.unlock(scenarioCtx(t), lb)
	require.NoError(t, err)
}

// A holder silent past its lease: its Scope's other entries do not count
// before a contender of another Scope, whose takeover deletes them; the
// old holder's renewal and Unlock are then refused, fenced.
func scenarioTakeOverDeletesSilentScope(t *testing.T, env scenarioEnv, name string) {
	st, dead, live := env.conn(), NewScope(), NewScope()
	// Long enough that a's lease is live through the joins and the first
	// read on a loaded machine (500ms lapsed there under CI's -race).
	const lease = 2 * time.Second
	a, a2, c := contenderIn(dead, "a"), contenderIn(dead, "a2"), contenderIn(live, "c")
	la := mustAcquire(t, st, name, a, lease, endOfQueue)
	mustQueue(t, st, name, a2, lease)
	kc := mustQueue(t, st, name, c, 10*time.Second)
	v, err := st.readLock(scenarioCtx(t), name, kc)
	require.NoError(t, err)
	assert.Equal(t, 1, v.ahead, "a2 counts while its Scope's holder is live")
	env.elapse(t, st, name, lease+100*time.Millisecond)
	v, err = st.readLock(scenarioCtx(t), name, kc)
	require.NoError(t, err)
	assert.Zero(t, v.ahead, "a2, of the silent holder's Scope, still counts")
	lc := mustAcquire(t, st, name, c, 10*time.Second, kc)
	assert.True(t, lc.TookOver())
	assert.Equal(t, la.Token()+1, lc.Token())
	_, found, err := st.findQueued(scenarioCtx(t), name, a2.leaseID)
	require.NoError(t, err)
	assert.False(t, found, "the takeover left the silent Scope's entry")
	assert.ErrorIs(t, st.renew(scenarioCtx(t), la), ErrLeaseLost)
	_, err = st.unlock(scenarioCtx(t), la)
	assert.ErrorIs(t, err, ErrLeaseLost)
	r, err := st.read(scenarioCtx(t), name)
	require.NoError(t, err)
	assert.True(t, r.heldBy(c.leaseID), "the refused Unlock left the new holder alone")
	_, err = st.unlock(scenarioCtx(t), lc)
	require.NoError(t, err)
}

// More dead entries than one page of the hand-off's scan lead the queue:
// Unlock hands the lock to the live entry behind them and deletes them.
func scenarioHandOffPagesPastDeadEntries(t *testing.T, env scenarioEnv, name string) {
	st, s := env.conn(), NewScope()
	la := mustAcquire(t, st, name, contenderIn(s, "a"), 10*time.Second, endOfQueue)
	const short = 100 * time.Millisecond // dead after 4 of them
	var dead []queueInsert
	for i := range handOffScan + 4 {
		c := contenderIn(NewScope(), fmt.Sprintf("dead%02d", i))
		dead = append(dead, queueInsert{id: c.leaseID, owner: c.owner, lease: short})
	}
	_, err := st.enqueue(scenarioCtx(t), name, dead)
	require.NoError(t, err)
	env.elapse(t, st, name, waiterTTLFactor*short+100*time.Millisecond)
	require.NoError(t, st.renew(scenarioCtx(t), la))
	l := contenderIn(NewScope(), "live")
	mustQueue(t, st, name, l, 10*time.Second)
	to, err := st.unlock(scenarioCtx(t), la)
	require.NoError(t, err)
	assert.Equal(t, l.leaseID, to.waiterID, "handed past %d dead entries", len(dead))
	for _, d := range dead {
		_, found, err := st.findQueued(scenarioCtx(t), name, d.id)
		require.NoError(t, err)
		assert.False(t, found, "dead entry %s left", d.owner)
	}
	r, err := st.read(scenarioCtx(t), name)
	require.NoError(t, err)
	_, err = st.unlock(scenarioCtx(t), leaseOfRow(name, r))
	require.NoError(t, err)
}

// A waiter that leaves after the lock was handed to it hands it on to the
// next entry, in the same transaction.
func scenarioLeaveHandsOn(t *testing.T, env scenarioEnv, name string) {
	st, s := env.conn(), NewScope()
	a, b, c := contenderIn(s, "a"), contenderIn(s, "b"), contenderIn(s, "c")
	la := mustAcquire(t, st, name, a, 10*time.Second, endOfQueue)
	mustQueue(t, st, name, b, 10*time.Second)
	mustQueue(t, st, name, c, 10*time.Second)
	_, err := st.unlock(scenarioCtx(t), la)
	require.NoError(t, err)
	to, err := st.leave(scenarioCtx(t), name, b.leaseID)
	require.NoError(t, err)
	assert.Equal(t, c.leaseID, to.waiterID)
	assert.Equal(t, la.Token()+2, to.token)
	r, err := st.read(scenarioCtx(t), name)
	require.NoError(t, err)
	assert.True(t, r.heldBy(c.leaseID))
	_, err = st.unlock(scenarioCtx(t), leaseOfRow(name, r))
	require.NoError(t, err)
}

// An exact-timestamp read shows the row as its commits left it at that
// time: the previous holder just before a hand-off's commit timestamp,
// the new one at it.
func scenarioReadAtShowsThePast(t *testing.T, env scenarioEnv, name string) {
	st, s := env.conn(), NewScope()
	a, b := contenderIn(s, "a"), contenderIn(s, "b")
	la := mustAcquire(t, st, name, a, 10*time.Second, endOfQueue)
	mustQueue(t, st, name, b, 10*time.Second)
	to, err := st.unlock(scenarioCtx(t), la)
	require.NoError(t, err)
	before, err := st.readAt(scenarioCtx(t), name, to.at.Add(-time.Microsecond))
	require.NoError(t, err)
	assert.True(t, before.heldBy(a.leaseID), "before the hand-off: %+v", before)
	at, err := st.readAt(scenarioCtx(t), name, to.at)
	require.NoError(t, err)
	assert.True(t, at.heldBy(b.leaseID), "at the hand-off: %+v", at)
	_, err = st.unlock(scenarioCtx(t), leaseOfRow(name, at))
	require.NoError(t, err)
}

// A renewal moves the row's RenewedAt to its commit timestamp, and the
// lease records it (Lease.lastRenewedAt, which settles an Unlock of unknown
// outcome by Spanner's clock).
func scenarioRenewRecordsItsCommit(t *testing.T, env scenarioEnv, name string) {
	st := env.conn()
	la := mustAcquire(t, st, name, contenderIn(NewScope(), "a"), 10*time.Second, endOfQueue)
	require.NoError(t, st.renew(scenarioCtx(t), la))
	r, err := st.read(scenarioCtx(t), name)
	require.NoError(t, err)
	assert.True(t, r.RenewedAt.After(la.AcquiredAt()), "RenewedAt %v, acquired %v", r.RenewedAt, la.AcquiredAt())
	assert.True(t, r.RenewedAt.Equal(la.lastRenewedAt()), "RenewedAt %v, the lease recorded %v", r.RenewedAt, la.lastRenewedAt())
	_, err = st.unlock(scenarioCtx(t), la)
	require.NoError(t, err)
}

// A holder silent past its lease, with its Scope's entry and two live
// waiters of other Scopes queued: the second waiter's attempt hands the
// lock to the first (as the holder's Unlock would have) and deletes the
// silent Scope's entry, instead of waiting for it to expire.
func scenarioPassOnToTheHead(t *testing.T, env scenarioEnv, name string) {
	st, dead := env.conn(), NewScope()
	const lease = 500 * time.Millisecond
	a, a2 := contenderIn(dead, "a"), contenderIn(dead, "a2")
	b, c := contenderIn(NewScope(), "b"), contenderIn(NewScope(), "c")
	la := mustAcquire(t, st, name, a, lease, endOfQueue)
	mustQueue(t, st, name, a2, lease)
	mustQueue(t, st, name, b, 10*time.Second)
	kc := mustQueue(t, st, name, c, 10*time.Second)
	env.elapse(t, st, name, lease+100*time.Millisecond)
	res, err := st.acquireLock(scenarioCtx(t), name, kc, scenarioPolicy(10*time.Second), c, true)
	require.NoError(t, err)
	assert.Nil(t, res.lease)
	require.Equal(t, lockPassOn, res.decision.action)
	assert.Equal(t, b.leaseID, res.handed.waiterID)
	assert.Equal(t, la.Token()+1, res.handed.token)
	r, err := st.read(scenarioCtx(t), name)
	require.NoError(t, err)
	assert.True(t, r.heldBy(b.leaseID), "handed to b: %+v", r)
	_, found, err := st.findQueued(scenarioCtx(t), name, a2.leaseID)
	require.NoError(t, err)
	assert.False(t, found, "the silent Scope's entry is left")
	to, err := st.unlock(scenarioCtx(t), leaseOfRow(name, r))
	require.NoError(t, err)
	assert.Equal(t, c.leaseID, to.waiterID)
	r, err = st.read(scenarioCtx(t), name)
	require.NoError(t, err)
	_, err = st.unlock(scenarioCtx(t), leaseOfRow(name, r))
	require.NoError(t, err)
}

// TestStoreScenariosOnTheEmulator runs the table on the emulator, both
// dialects.
func TestStoreScenariosOnTheEmulator(t *testing.T) {
	t.Parallel() // waits out leases, beside the other waiting tests
	eachDialect(t, func(t *testing.T, db string) {
		client := newClient(t, db)
		cfg, err := configure[LockOption]("scenario", nil)
		require.NoError(t, err)
		runStoreScenarios(t, scenarioEnv{
			conn: func() lockStore { return cfg.newStore(client) },
			elapse: func(t *testing.T, st lockStore, name string, d time.Duration) {
				t.Helper()
				r, err := st.read(scenarioCtx(t), name)
				require.NoError(t, err)
				since := r.Now
				waitFor(t, time.Minute, fmt.Sprintf("%v to pass on Spanner's clock", d), func() bool {
					r, err := st.read(scenarioCtx(t), name)
					return err == nil && r.Now.Sub(since) >= d
				})
			},
		})
	})
}

// TestSimStoreScenarios runs the table on the simulation's store, with no
// faults, in virtual time.
func TestSimStoreScenarios(t *testing.T) {
	for _, sc := range storeScenarios {
		t.Run(sc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e, _ := newSimEnv()
				sc.run(t, scenarioEnv{
					conn: func() lockStore { return e.store(t) },
					// Virtual time: sleeping is how time passes in the bubble.
					elapse: func(_ *testing.T, _ lockStore, _ string, d time.Duration) { time.Sleep(d) },
				}, "scenario-"+sc.name)
			})
		})
	}
}
