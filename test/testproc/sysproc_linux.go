package testproc

import "syscall"

// sysProcAttr puts a child in its own process group (the test stops the
// whole group) and has the kernel kill it if the test binary dies without
// its cleanups (a timeout panic). The death signal follows the thread that
// started the child; the Go runtime only ends a thread when a goroutine
// locked to it exits, which these tests never do.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
