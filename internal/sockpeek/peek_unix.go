//go:build unix

package sockpeek

import (
	"net"
	"syscall"
)

// Peek looks at c's receive queue. It reaches the descriptor through
// Control, not Read, so it works while another goroutine reads c (net/http's
// background read of a served connection holds the read lock).
func Peek(c net.Conn) State { return NewPeeker(c).Peek() }

// Peeker peeks at one connection, repeatedly, without allocating: the raw
// connection and the control function are set up once. It is not safe for
// concurrent use.
type Peeker struct {
	rc      syscall.RawConn // nil: c is not a socket (Unknown), or failed (Closed).
	state   State           // the state without rc.
	control func(fd uintptr)
	buf     [1]byte
	n       int
	err     error
}

// NewPeeker returns a Peeker of c.
func NewPeeker(c net.Conn) *Peeker {
	p := &Peeker{state: Unknown}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return p
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		p.state = Closed
		return p
	}
	p.rc = rc
	p.control = p.peekFD
	return p
}

// peekFD peeks at the descriptor, for RawConn.Control.
func (p *Peeker) peekFD(fd uintptr) {
	p.n, _, p.err = syscall.Recvfrom(int(fd), p.buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
}

// Peek looks at the connection's receive queue, as the function Peek does.
func (p *Peeker) Peek() State {
	if p.rc == nil {
		return p.state
	}
	if err := p.rc.Control(p.control); err != nil {
		return Closed // closed on this side.
	}
	switch {
	case p.err == syscall.EAGAIN || p.err == syscall.EWOULDBLOCK: //nolint:errorlint // raw errno values.
		return Open
	case p.err != nil || p.n == 0:
		return Closed // a reset, or the end of file.
	default:
		return Data
	}
}
