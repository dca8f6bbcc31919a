//go:build unix

package spanmutex

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stormProcs is how many processes cancel their Lock calls in
// TestLockProcessesCancelStorm.
const stormProcs = 20

// stormProcs processes each call Lock of "storm" in a loop for 3 s, each
// call under a 60 ms timeout (so most are cancelled), holding a lease they
// get for 5 ms; a patient process calls Lock 1 s after they all began,
// under a 10 s timeout, and must get the lock within 5 s (issue 41, ported
// from the etcd comparison's TestProcessesCancelStorm). Each process's
// Locks share one Scope that listens for wake-ups, as a service's would;
// all use the default lease. It logs the patient's wait, reads and
// wake-ups, and how many storm calls returned after the patient's: on the
// emulator none do (the patient is served only once the storm ends: the
// emulator runs one transaction at a time, so the read-write leave of a
// cancelled caller that was handed the lock retries behind the storm's
// short transactions). Not parallel: it measures a wait, as
// TestLockProcessesWakeUpAcrossProcesses does.
func TestLockProcessesCancelStorm(t *testing.T) {
	eachDialect(t, func(t *testing.T, db string) {
		const name = "storm"
		patient := startContender(t, procSpec{Role: "interactive", ID: "patient", Database: db, Lock: name, Listen: true})
		patient.await(t, time.Minute, 0, "ready", nil)
		storm := startContenders(t, stormProcs, func(i int) procSpec {
			return procSpec{Role: "storm", ID: fmt.Sprintf("s%02d", i), Database: db, Lock: name,
				Duration: 3 * time.Second, MinDeadline: 60 * time.Millisecond, MaxDeadline: 60 * time.Millisecond, Hold: 5 * time.Millisecond, Listen: true}
		})
		var began time.Time // when the last storm process began its loop
		for _, c := range storm {
			e, _ := c.await(t, time.Minute, 0, "ready", nil)
			if at := time.Unix(0, e.End); at.After(began) {
				began = at
			}
		}
		time.Sleep(time.Until(began.Add(time.Second)))
		patient.send(t, "lock 10s")
		pl, _ := patient.await(t, time.Minute, 0, "lock", nil)
		calls := stormCalls(waitAll(t, storm, 2*time.Minute))

		leases, lateStorm := 0, 0
		var took []time.Duration
		for _, c := range calls {
			took = append(took, c.lock.took())
			if c.lock.ok() {
				leases++
			}
			if c.lock.End > pl.End {
				lateStorm++
			}
		}
		byClass, others := stormErrors(calls)
		t.Logf("patient: Lock took %v (token %d, handed over: %v, err %q), %d reads, %d wake-ups received; "+
			"storm: %d Lock calls (%d returned after the patient's; took p50 %v, max %v), %d leases, errors by class %v",
			pl.took(), pl.Token, pl.HandedOff, pl.Err, pl.Reads, pl.WakeUps, len(calls), lateStorm, quantile(took, 0.5), quantile(took, 1), leases, byClass)
		assert.Empty(t, others, "Lock errors that match neither ErrNotObtained nor a documented typed error")
		require.True(t, pl.ok(), "the patient's Lock: %s", pl.Err)
		assert.Less(t, pl.took(), 5*time.Second, "the patient's wait for the lock during the storm")
		assert.True(t, patient.do(t, "unlock", time.Minute).ok())
	})
}

// quantile returns the q-quantile (0..1) of ds, 0 if there are none.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return ds[int(q*float64(len(ds)-1))]
}
