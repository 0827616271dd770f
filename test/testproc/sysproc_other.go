//go:build !linux

package testproc

import "syscall"

// sysProcAttr puts a child in its own process group; the test stops the
// whole group.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
