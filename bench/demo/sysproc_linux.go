package main

import "syscall"

// sysProcAttr puts a child in its own process group (so a terminal's Ctrl-C
// reaches only the demo, which then stops the children in order) and has
// the kernel kill it if the demo dies without cleaning up. The death signal
// follows the thread that started the child; the Go runtime only ends a
// thread when a goroutine locked to it exits, which the demo never does.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
