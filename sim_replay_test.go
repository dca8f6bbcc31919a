//go:build go1.25

package spanmutex

import "fmt"

// replayCommand is the one command that replays seed of the simulation
// whose trace test is test (its seed in env), printing its every event
// with the library's log: what a failing seed prints, in CI or not
// (doc/simulation.md, Replay).
func replayCommand(env, test string, seed uint64) string {
	return fmt.Sprintf("%s=%d go test -count=1 -short -v -run '^%s$' .", env, seed, test)
}
