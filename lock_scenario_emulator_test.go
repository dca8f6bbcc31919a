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
	// A dialect's scenarios one after the other, the two dialects side by
	// side: two shorter runs pack into the parallel tests' slots better
	// than one long one.
	for _, d := range dialects {
		t.Run(d.String(), func(t *testing.T) {
			t.Parallel()
			for _, sc := range lockScenarios {
				t.Run(sc.name, func(t *testing.T) {
					db := freshDatabaseIn(t, d)
					cfg, err := configure[LockOption]("scenario", nil)
					if err != nil {
						t.Fatal(err)
					}
					reader := newClient(t, db)
					e := lockEnv{database: db, store: func(t *testing.T) lockStore { return cfg.newStore(newClient(t, db)) },
						queued: func(t *testing.T, name string) int { return len(queuedIDs(t, reader, name)) }}
					sc.run(t, e, "scenario")
				})
			}
		})
	}
}
