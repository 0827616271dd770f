package main

import "syscall"

// sysProcAttr puts a child in its own process group and has the kernel
// kill it if the soak dies without cleaning up. The death signal follows the
// thread that started the child; the Go runtime only ends a thread when a
// goroutine locked to it exits, which the soak never does.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
