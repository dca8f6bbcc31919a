package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os/exec"
	"syscall"
)

// startError says COMMAND could not be started at all.
type startError struct {
	argv0 string
	err   error
}

// Error says which COMMAND could not be started and why.
func (e *startError) Error() string { return fmt.Sprintf("start COMMAND %q: %v", e.argv0, e.err) }

// Unwrap returns the error of exec.Cmd.Start.
func (e *startError) Unwrap() error { return e.err }

// commandStatus returns the exit status that stands for how COMMAND ended,
// as a shell would report it, if err says COMMAND failed.
func commandStatus(err error) (int, bool) {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), true
		}
		return ee.ExitCode(), true
	}
	var se *startError
	if errors.As(err, &se) {
		if errors.Is(se.err, exec.ErrNotFound) || errors.Is(se.err, fs.ErrNotExist) {
			return 127, true
		}
		return 126, true
	}
	return 0, false
}
