package emulator

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"
)

// RunTests is the body of a TestMain for packages whose integration tests
// share one emulator: unless -short is given it starts an emulator (failing
// the run, with instructions, if none can be found), hands it to use, runs
// the tests, and stops it. It returns the exit code for os.Exit. With -short,
// use is not called and the tests run without an emulator.
//
//	func TestMain(m *testing.M) {
//		os.Exit(emulator.RunTests(m, func(e *emulator.Emulator) { emu = e }))
//	}
func RunTests(m *testing.M, use func(*Emulator), opts ...Option) int {
	flag.Parse()
	if testing.Short() {
		return m.Run()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	e, err := Start(ctx, opts...)
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "integration tests need the Cloud Spanner emulator (run with -short to skip them): %v\n", err)
		return 1
	}
	defer func() {
		if err := e.Close(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()
	use(e)
	return m.Run()
}
