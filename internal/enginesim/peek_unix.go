//go:build unix

package enginesim

import (
	"net"
	"syscall"
)

// peerClosed reports whether c's peer has closed or reset the connection.
// It peeks at the socket without blocking and without consuming anything,
// through Control (not Read: net/http's background read of a served
// connection holds the read lock).
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
		n    int
		rerr error
	)
	if err := rc.Control(func(fd uintptr) {
		n, _, rerr = syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	}); err != nil {
		return true // the connection is closed on this side.
	}
	switch {
	case rerr == syscall.EAGAIN || rerr == syscall.EWOULDBLOCK: //nolint:errorlint // raw errno values.
		return false // open, nothing to read.
	case rerr != nil:
		return true // reset.
	default:
		return n == 0 // end of file; bytes mean the peer is still talking.
	}
}
