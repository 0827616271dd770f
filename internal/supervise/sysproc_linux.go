package supervise

import "syscall"

// sysProcAttr puts a child in its own process group and has the kernel
// kill it if its parent dies without stopping it. The death signal follows
// the thread that started the child; the Go runtime only ends a thread when
// a goroutine locked to it exits, which the programs of this project never
// do.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
