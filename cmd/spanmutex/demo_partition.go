package main

import (
	"google.golang.org/api/option"

	"github.com/spanmutex/spanmutex/internal/cutoff"
)

// partition cuts one simulated instance off from Spanner and can heal it
// again (p.cut.Store(true) and false): while cut, every call of its client
// fails as it would for a process that froze or lost its network. Its
// methods are safe for concurrent use.
type partition struct {
	cut cutoff.Switch
}

// clientOption installs the partition in a Spanner client.
func (p *partition) clientOption() []option.ClientOption {
	p.cut.Reason = "spanmutex demo: this instance is cut off from Spanner (simulated crash)"
	return p.cut.ClientOptions()
}
