//go:build unix

package upstream

import "syscall"

// resetAfterClose reports whether the member reset the connection after
// closing it: called once a read of the connection saw the member's end of
// file (FIN), it reads the socket's pending error, which Linux sets to
// EPIPE when a reset arrives after the FIN (ECONNRESET before it). Reading
// the error clears it.
func (c *conn) resetAfterClose() bool {
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
