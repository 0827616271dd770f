//go:build unix

package sockpeek

import (
	"net"
	"syscall"
)

// Peek looks at c's receive queue. It reaches the descriptor through
// Control, not Read, so it works while another goroutine reads c (net/http's
// background read of a served connection holds the read lock).
func Peek(c net.Conn) State {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return Unknown
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return Closed
	}
	var (
		buf  [1]byte
		n    int
		rerr error
	)
	if err := rc.Control(func(fd uintptr) {
		n, _, rerr = syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	}); err != nil {
		return Closed // closed on this side.
	}
	switch {
	case rerr == syscall.EAGAIN || rerr == syscall.EWOULDBLOCK: //nolint:errorlint // raw errno values.
		return Open
	case rerr != nil || n == 0:
		return Closed // a reset, or the end of file.
	default:
		return Data
	}
}
