//go:build !linux

package main

import "os/exec"

// startCommand starts cmd and returns the function that waits for it. Only
// Linux can have the kernel kill COMMAND when this process dies
// (pdeathsig_linux.go): elsewhere a killed spanmutex leaves COMMAND running,
// and COMMAND's fenced writes (SPANMUTEX_TOKEN) are what protects the data
// once another process takes over after the lease (doc/cli.md).
func startCommand(cmd *exec.Cmd) (wait func() error, err error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return cmd.Wait, nil
}
