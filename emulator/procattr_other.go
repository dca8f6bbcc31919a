//go:build !linux

package emulator

import "syscall"

// procAttr has nothing to add outside Linux: Close stops the emulator.
func procAttr() *syscall.SysProcAttr { return nil }
