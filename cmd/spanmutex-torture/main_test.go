package main

import (
	"os"
	"testing"

	"github.com/spanmutex/spanmutex/internal/cmdline/cmdlinetest"
)

// tests runs this command in-process, against the emulator TestMain starts.
var tests = &cmdlinetest.Command{Run: run}

// TestMain starts the emulator once, unless -short.
func TestMain(m *testing.M) { os.Exit(tests.Main(m)) }
