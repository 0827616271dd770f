//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// steerToNewest is the classic-BPF program attached to the reuseport group
// of each listener: it returns socket index 1. The kernel keeps a group's
// sockets in the order they joined, so with two routers on a port (the one
// draining and the one replacing it) index 1 is the newer one and every new
// connection goes to it. With one socket the index is out of range and the
// kernel falls back to its hash, which has only that socket to pick; when
// the older socket leaves, the newer one moves to index 0 and the same
// holds.
var steerToNewest = [...]unix.SockFilter{{Code: unix.BPF_RET | unix.BPF_K, K: 1}}

// listen opens a TCP listener with SO_REUSEPORT, so that a new router can
// bind the same address while the old one drains, and attaches
// steerToNewest to the address's reuseport group, so that new connections
// go to the newest router once it listens. Connections the old router
// accepted (or has queued) stay with it.
func listen(ctx context.Context, address string) (net.Listener, error) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		return setsockopt(c, func(fd int) error {
			return unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
		})
	}}
	// Go listens with Multipath TCP where the kernel has it; the kernel
	// refuses a reuseport program on an MPTCP socket, and clients of a
	// node-local router gain nothing from several paths.
	lc.SetMultipathTCP(false)
	ln, err := lc.Listen(ctx, "tcp", address)
	if err != nil {
		return nil, err
	}
	// Attached after listen: the socket is in its group now, and the
	// program replaces any other, such as none from an older router.
	if err := attachSteering(ln); err != nil {
		_ = ln.Close()
		return nil, err
	}
	return ln, nil
}

// attachSteering attaches steerToNewest to the reuseport group of ln.
func attachSteering(ln net.Listener) error {
	sc, ok := ln.(syscall.Conn)
	if !ok {
		return errors.New("not a socket listener")
	}
	c, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	prog := unix.SockFprog{Len: uint16(len(steerToNewest)), Filter: &steerToNewest[0]}
	if err := setsockopt(c, func(fd int) error {
		return unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_REUSEPORT_CBPF, &prog)
	}); err != nil {
		return fmt.Errorf("attaching the reuseport program: %w", err)
	}
	return nil
}

// setsockopt runs set on the socket of c.
func setsockopt(c syscall.RawConn, set func(fd int) error) error {
	var serr error
	if err := c.Control(func(fd uintptr) { serr = set(int(fd)) }); err != nil { //nolint:gosec // A file descriptor fits an int.
		return err
	}
	return serr
}
