package emulator

import "syscall"

// procAttr makes the kernel kill the emulator when the process that started
// it dies, so that a killed test run leaves no emulator behind.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
