//go:build go1.25

package spanmutex

import "testing"

// TestLockScenariosOnTheEmulator runs lockScenarios, which TestSimScenarios
// runs on the simulated Spanner, on the emulator, in both dialects: each
// process has a client, a store and a Scope of its own. Its scenarios wait
// out leases, beside the other tests that do (t.Parallel); each runs on
// a database of its own.
func TestLockScenariosOnTheEmulator(t *testing.T) {
	needEmulator(t)
	t.Parallel()
	scenariosOnTheEmulator(t, lockScenarios, func(t *testing.T, db string) lockEnv {
		cfg, err := configure[LockOption]("scenario", nil)
		if err != nil {
			t.Fatal(err)
		}
		reader := newClient(t, db)
		return lockEnv{database: db, store: func(t *testing.T) lockStore { return cfg.newStore(newClient(t, db)) },
			queued: func(t *testing.T, name string) int { return len(queuedIDs(t, reader, name)) }}
	})
}

// scenario is one of a table of scenarios that run alike on the simulated
// Spanner and on the emulator, given an environment E of either.
type scenario[E any] struct {
	name string
	run  func(t *testing.T, e E, name string)
}

// scenariosOnTheEmulator runs scenarios scs on each dialect, each in the
// environment env makes on database db: a dialect's scenarios one after
// the other, each on a database of its own, and the two dialects side by
// side, so that two shorter runs pack into the parallel tests' slots
// better than one long one.
func scenariosOnTheEmulator[E any](t *testing.T, scs []scenario[E], env func(t *testing.T, db string) E) {
	for _, d := range dialects {
		t.Run(d.String(), func(t *testing.T) {
			t.Parallel()
			for _, sc := range scs {
				t.Run(sc.name, func(t *testing.T) { sc.run(t, env(t, freshDatabaseIn(t, d)), "scenario") })
			}
		})
	}
}
