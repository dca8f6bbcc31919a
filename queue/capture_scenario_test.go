//go:build go1.25

package queue

// One table of checkpoint-store scenarios, run on the emulator
// (spannerCapture, both dialects) and on the capture simulation's store
// (simCapStore, faults off), so that the simulation cannot drift from what
// Spanner does: each scenario drives the captureStore interface that Run
// and readPartition use, and asserts what the store answers.

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/stretchr/testify/require"

	"github.com/spanmutex/spanmutex/ddl"
)

// capScenarioEnv is where a scenario runs.
type capScenarioEnv struct {
	// start is the stream's start, by Spanner's clock.
	start time.Time
	// rows writes created checkpoint rows, token → parents.
	rows func(t *testing.T, parents map[string][]string)
	// instance returns the store of a capture instance id declaring lease.
	instance func(t *testing.T, id string, lease time.Duration) captureStore
	// elapse lets d pass on Spanner's clock.
	elapse func(t *testing.T, d time.Duration)
}

// capScenarios is the table.
var capScenarios = []struct {
	name string
	run  func(t *testing.T, env capScenarioEnv)
}{
	{"OwnedIsNeitherRunnableNorClaimable", capScenarioOwned},
	{"TakenOverOnlyAfterTheDeclaredLease", capScenarioDeclaredLease},
	{"ReleaseGivesBackAtOnce", capScenarioRelease},
	{"MergedChildWaitsForAllParents", capScenarioMerge},
	{"ResumeNeverGoesBack", capScenarioResume},
}

func capTokens(ps []capturePartition) []string {
	out := []string{}
	for _, p := range ps {
		out = append(out, p.token)
	}
	return out
}

func mustClaim(t *testing.T, st captureStore, token string, want bool) capturePartition {
	t.Helper()
	p, claimed, err := st.claim(context.Background(), token)
	require.NoError(t, err)
	require.Equal(t, want, claimed, "claim of %s", token)
	return p
}

func mustRunnable(t *testing.T, st captureStore) []string {
	t.Helper()
	ps, err := st.runnable(context.Background())
	require.NoError(t, err)
	return capTokens(ps)
}

func capScenarioOwned(t *testing.T, env capScenarioEnv) {
	env.rows(t, map[string][]string{"P": nil, "Q": nil})
	a, b := env.instance(t, "A", 3*time.Second), env.instance(t, "B", 3*time.Second)
	mustClaim(t, a, "P", true)
	require.Equal(t, []string{"P", "Q"}, mustRunnable(t, a), "its own partition stays runnable for its owner")
	require.Equal(t, []string{"Q"}, mustRunnable(t, b))
	mustClaim(t, b, "P", false)
	_, err := b.commit(context.Background(), captureCheckpoint{token: "P", resume: env.start.Add(time.Second)})
	require.ErrorIs(t, err, errPartitionLost)
	_, err = a.commit(context.Background(), captureCheckpoint{token: "P", resume: env.start.Add(time.Second)})
	require.NoError(t, err)
}

func capScenarioDeclaredLease(t *testing.T, env capScenarioEnv) {
	env.rows(t, map[string][]string{"P": nil})
	a, b := env.instance(t, "A", 3*time.Second), env.instance(t, "B", 1200*time.Millisecond)
	mustClaim(t, a, "P", true)
	env.elapse(t, 1500*time.Millisecond)
	mustClaim(t, b, "P", false) // past B's own lease, within A's
	require.Empty(t, mustRunnable(t, b))
	env.elapse(t, 1700*time.Millisecond)
	require.Equal(t, []string{"P"}, mustRunnable(t, b))
	mustClaim(t, b, "P", true)
	_, err := a.commit(context.Background(), captureCheckpoint{token: "P", resume: env.start.Add(time.Second)})
	require.ErrorIs(t, err, errPartitionLost, "the old owner is fenced off")
}

func capScenarioRelease(t *testing.T, env capScenarioEnv) {
	env.rows(t, map[string][]string{"P": nil, "Q": nil})
	a, b := env.instance(t, "A", 3*time.Second), env.instance(t, "B", 3*time.Second)
	mustClaim(t, a, "P", true)
	mustClaim(t, a, "Q", true)
	a.release(context.Background())
	mustClaim(t, b, "P", true)
	mustClaim(t, b, "Q", true)
}

func capScenarioMerge(t *testing.T, env capScenarioEnv) {
	env.rows(t, map[string][]string{"P1": nil, "P2": nil})
	a := env.instance(t, "A", 3*time.Second)
	mustClaim(t, a, "P1", true)
	mustClaim(t, a, "P2", true)
	end := env.start.Add(time.Second)
	merge := &childPartitionsRecord{StartTimestamp: end, Children: []childPartition{{Token: "M", Parents: []string{"P2", "P1"}}}}
	ctx := context.Background()
	_, err := a.commit(ctx, captureCheckpoint{token: "P1", resume: end, finish: merge})
	require.NoError(t, err)
	require.Equal(t, []string{"P2"}, mustRunnable(t, a), "M waits for P2")
	_, err = a.commit(ctx, captureCheckpoint{token: "P2", resume: end, finish: merge})
	require.NoError(t, err)
	ps, err := a.runnable(ctx)
	require.NoError(t, err)
	require.Len(t, ps, 1)
	require.Equal(t, "M", ps[0].token)
	require.Equal(t, []string{"P1", "P2"}, ps[0].parents)
	require.Equal(t, end, ps[0].resume, "a child starts at its start timestamp")
	_, err = a.commit(ctx, captureCheckpoint{token: "P1", resume: end.Add(time.Second)})
	require.ErrorIs(t, err, errPartitionLost, "a finished partition takes no checkpoint")
}

func capScenarioResume(t *testing.T, env capScenarioEnv) {
	env.rows(t, map[string][]string{"P": nil})
	a := env.instance(t, "A", 3*time.Second)
	mustClaim(t, a, "P", true)
	ctx := context.Background()
	for _, d := range []time.Duration{2 * time.Second, time.Second} {
		_, err := a.commit(ctx, captureCheckpoint{token: "P", resume: env.start.Add(d)})
		require.NoError(t, err)
	}
	a.release(ctx)
	p := mustClaim(t, a, "P", true)
	require.Equal(t, env.start.Add(2*time.Second), p.resume, "a checkpoint never moves back")
}

func TestCaptureScenariosOnTheEmulator(t *testing.T) {
	t.Parallel() // waits out leases beside the other waiting tests, on its own database
	for _, d := range []ddl.Dialect{ddl.GoogleSQL, ddl.PostgreSQL} {
		t.Run(d.String(), func(t *testing.T) {
			for _, sc := range capScenarios {
				t.Run(sc.name, func(t *testing.T) {
					c, start := captureDatabaseIn(t, d)
					q, err := New(c)
					require.NoError(t, err)
					var first *Capture
					env := capScenarioEnv{start: start}
					env.instance = func(t *testing.T, id string, lease time.Duration) captureStore {
						cp := fastCapture(t, q, c, start, WithCaptureID(id), WithQueryWindow(100*time.Millisecond), WithPartitionLease(lease))
						return cp.store
					}
					env.rows = func(t *testing.T, parents map[string][]string) {
						first = fastCapture(t, q, c, start)
						ms := []*spanner.Mutation{first.newRow(rootToken, partitionFinished, nil, start)}
						for tok, ps := range parents {
							ms = append(ms, first.newRow(tok, partitionCreated, ps, start))
						}
						_, err := c.Apply(context.Background(), ms)
						require.NoError(t, err)
					}
					env.elapse = func(t *testing.T, d time.Duration) {
						from, err := first.store.spannerNow(context.Background(), "run")
						require.NoError(t, err)
						waitFor(t, d+30*time.Second, "Spanner's clock to pass "+d.String(), func() bool {
							now, err := first.store.spannerNow(context.Background(), "run")
							require.NoError(t, err)
							return now.Sub(from) >= d
						})
					}
					sc.run(t, env)
				})
			}
		})
	}
}

func TestCaptureScenariosOnTheSimulation(t *testing.T) {
	for _, sc := range capScenarios {
		t.Run(sc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := emptySimCapWorld(1)
				env := capScenarioEnv{start: w.start}
				env.instance = func(t *testing.T, id string, lease time.Duration) captureStore {
					in := &simCapInstance{id: id, lease: lease}
					w.leases[id] = lease
					in.store = w.newStore(in)
					return in.store
				}
				env.rows = func(t *testing.T, parents map[string][]string) {
					w.rows[rootToken] = &simCapRow{state: partitionFinished, start: w.start}
					for tok, ps := range parents {
						w.rows[tok] = &simCapRow{state: partitionCreated, parents: normalizeParents(ps), start: w.start, resume: w.start}
					}
				}
				env.elapse = func(t *testing.T, d time.Duration) { time.Sleep(d) }
				sc.run(t, env)
				require.Empty(t, w.bad)
			})
		})
	}
}
