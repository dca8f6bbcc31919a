//go:build !race

package testutil

// raceDetector reports whether the race detector is on (see race.go).
const raceDetector = false
