// Command spanmutex-torture runs a mixed workload of spanmutex Mutexes and Locks, with faults,
// against an embedded Cloud Spanner emulator, records every operation, and
// checks the history for violations of the guarantees. CI runs it; it is a
// test tool, kept out of the operator binary spanmutex so that that links no
// fault injection or history checker.
//
// Run "spanmutex-torture --help" for its flags.
package main

import (
	"context"
	"os"

	"github.com/spanmutex/spanmutex/internal/cmdline"
)

// command is this command's name, as its messages and help name it.
const command = "spanmutex-torture"

// main runs the command line and exits with its status.
func main() {
	os.Exit(run(context.Background(), cmdline.Streams{Stdout: os.Stdout, Stderr: os.Stderr}, os.Args[1:]))
}
