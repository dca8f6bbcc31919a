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
	names := make([]string, len(lockScenarios))
	for i, sc := range lockScenarios {
		names[i] = sc.name
	}
	scenariosOnTheEmulator(t, names, func(t *testing.T, i int, db string) {
		cfg, err := configure[LockOption]("scenario", nil)
		if err != nil {
			t.Fatal(err)
		}
		reader := newClient(t, db)
		e := lockEnv{database: db, store: func(t *testing.T) lockStore { return cfg.newStore(newClient(t, db)) },
			queued: func(t *testing.T, name string) int { return len(queuedIDs(t, reader, name)) }}
		lockScenarios[i].run(t, e, "scenario")
	})
}

// scenariosOnTheEmulator runs the scenarios named names (run runs the
// i-th on database db) on each dialect: a dialect's scenarios one after
// the other, each on a database of its own, and the two dialects side by
// side, so that two shorter runs pack into the parallel tests' slots
// better than one long one.
func scenariosOnTheEmulator(t *testing.T, names []string, run func(t *testing.T, i int, db string)) {
	for _, d := range dialects {
		t.Run(d.String(), func(t *testing.T) {
			t.Parallel()
			for i, name := range names {
				t.Run(name, func(t *testing.T) { run(t, i, freshDatabaseIn(t, d)) })
			}
		})
	}
}
