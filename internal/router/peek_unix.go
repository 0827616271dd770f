//go:build unix

package router

import (
	"net"
	"syscall"
)

// peerClosed reports whether an idle connection is unusable: the member
// closed or reset it, or sent bytes nobody asked for. It peeks at the
// socket without blocking and without consuming anything.
func peerClosed(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	var (
		buf  [1]byte
		rerr error
	)
	err = rc.Read(func(fd uintptr) bool {
		_, _, rerr = syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return true // never wait for readability.
	})
	if err != nil {
		return true
	}
	// EAGAIN: nothing to read, the connection is open. Anything else is
	// an end of file (n == 0), a reset, or bytes out of turn.
	return rerr != syscall.EAGAIN && rerr != syscall.EWOULDBLOCK //nolint:errorlint // raw errno values.
}

// resetAfterClose reports whether the member reset the connection after
// closing it: called once a read of the connection saw the member's end of
// file (FIN), it reads the socket's pending error, which Linux sets to
// EPIPE when a reset arrives after the FIN (ECONNRESET before it). Reading
// the error clears it.
func (c *memberConn) resetAfterClose() bool {
	sc, ok := c.raw.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	var (
		soErr int
		gerr  error
	)
	if err := rc.Control(func(fd uintptr) {
		soErr, gerr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_ERROR)
	}); err != nil || gerr != nil {
		return false
	}
	e := syscall.Errno(soErr) //nolint:gosec // an errno always fits.
	return e == syscall.EPIPE || e == syscall.ECONNRESET
}
