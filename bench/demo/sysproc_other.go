//go:build !linux

package main

import "syscall"

// sysProcAttr puts a child in its own process group, so a terminal's Ctrl-C
// reaches only the demo, which then stops the children in order.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
