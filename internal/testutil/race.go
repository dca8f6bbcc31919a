//go:build race

package testutil

// raceDetector reports whether the race detector is on: its runs are
// several times slower, so WidenParallel leaves parallelism as Go sets it.
const raceDetector = true
