package spangoose_test

// The replica side of the process tests: when the test binary starts with
// replicaEnv set, TestMain runs one replica (runReplica) instead of the
// tests, and exits.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	spangoose "github.com/spanmutex/spanmutex/goose"
)

// replicaEnv holds the JSON replicaSpec of a replica process.
const replicaEnv = "SPANGOOSE_TEST_REPLICA"

// replicaSpec says what a replica process does.
type replicaSpec struct {
	Database string        `json:"database"`
	Dir      string        `json:"dir"`
	Lease    time.Duration `json:"lease"`
	// Pause makes the Go migration block after its DDL, once it told the
	// test (event "paused"), until the process is killed.
	Pause bool `json:"pause"`
}

// replicaEvent is one line a replica writes on stdout.
type replicaEvent struct {
	Event string `json:"event"` // ready, paused, done, fatal
	upResult
}

// runReplica is a replica process: it opens its clients, says "ready",
// waits for a line on stdin (so that the test starts every replica's goose
// up at once), runs goose up and reports the result. It returns the exit
// status.
func runReplica(js string) int {
	out := json.NewEncoder(os.Stdout)
	fatal := func(err error) int {
		_ = out.Encode(replicaEvent{Event: "fatal", upResult: upResult{Err: err.Error()}})
		return 1
	}
	var spec replicaSpec
	if err := json.Unmarshal([]byte(js), &spec); err != nil {
		return fatal(fmt.Errorf("bad %s: %w", replicaEnv, err))
	}
	var err error
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var r *replica
	paused := func(ctx context.Context) {
		if spec.Pause {
			_ = out.Encode(replicaEvent{Event: "paused", upResult: upResult{Token: r.locker.Lease().Token()}})
			<-ctx.Done() // until SIGKILL (or the replica's own deadline)
		}
	}
	r, err = openReplica(ctx, spec.Database, spec.Dir, paused, spangoose.WithLease(spec.Lease))
	if err != nil {
		return fatal(err)
	}
	defer r.close()
	_ = out.Encode(replicaEvent{Event: "ready"})
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return fatal(fmt.Errorf("waiting for the start line: %w", err))
	}
	res, _ := r.up(ctx) // an error is reported in res.Err
	_ = out.Encode(replicaEvent{Event: "done", upResult: res})
	return 0
}
