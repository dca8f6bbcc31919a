// Command spanmutex-bench measures what spanmutex's Lock costs under contention, against the
// naive lock most libraries implement, on an embedded Cloud Spanner emulator
// or a database of yours. It is kept out of the operator binary spanmutex so
// that that links no benchmark machinery.
//
// Run "spanmutex-bench --help" for its flags.
package main

import (
	"context"
	"os"

	"github.com/spanmutex/spanmutex/internal/cmdline"
)

// command is this command's name, as its messages and help name it.
const command = "spanmutex-bench"

// main runs the command line and exits with its status.
func main() {
	os.Exit(run(context.Background(), cmdline.Streams{Stdout: os.Stdout, Stderr: os.Stderr}, os.Args[1:]))
}
