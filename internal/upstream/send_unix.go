//go:build unix

package upstream

import (
	"net"
	"os"
	"syscall"
)

// sendOp is the state of one send: the bytes, and what the write did.
type sendOp struct {
	fn     func(fd uintptr) bool // sendFD, bound once per connection.
	b      []byte
	n      int
	err    error // the write's errno; nil when it took everything or would block.
	called bool  // the write was made.
}

// send writes b, a whole request, and returns once the member's answer can
// be read, or once the connection can tell why not. It returns how many
// bytes the connection took.
//
// Written the usual way, the request goes out and the response head's
// first read finds nothing yet (the member is still answering), so the
// read parks on the poller and is made again: three system calls. send
// writes the request from inside a raw read of the connection instead, and
// the poller wakes it once the answer arrived, so the head's read finds it:
// two. The raw read resets the connection's readiness before the write,
// so no byte of the answer can arrive unseen. Whatever the wait ends with
// (the header deadline, the context's abort, the member's end of file or
// reset) the head's read finds it again and ReadHead classifies it as
// before. A write that would block, or takes only part of b, is finished
// by the connection's own Write under its deadline; a request refused
// before the raw write (a deadline already past) fails there too.
func (c *conn) send(b []byte) (int, error) {
	if c.rc == nil {
		return c.conn.Write(b)
	}
	if c.out.fn == nil {
		c.out.fn = c.sendFD
	}
	c.out = sendOp{fn: c.out.fn, b: b}
	_ = c.rc.Read(c.out.fn) // its failure is the head read's to find.
	op := c.out
	c.out = sendOp{fn: op.fn}
	if op.err != nil {
		return op.n, &net.OpError{Op: "write", Net: "tcp", Source: c.raw.LocalAddr(), Addr: c.raw.RemoteAddr(),
			Err: os.NewSyscallError("write", op.err)}
	}
	if op.n < len(b) {
		m, err := c.conn.Write(b[op.n:])
		return op.n + m, err
	}
	return op.n, nil
}

// sendFD is send's raw read of the descriptor: called first, it writes the
// bytes and asks the poller to wait for the answer when all of them went
// out; called again, the answer (or the connection's end) is there.
func (c *conn) sendFD(fd uintptr) bool {
	op := &c.out
	if op.called {
		return true
	}
	op.called = true
	for {
		n, err := syscall.Write(int(fd), op.b)
		if err == syscall.EINTR { //nolint:errorlint // a raw errno.
			continue
		}
		op.n = max(n, 0)
		if err == syscall.EAGAIN { //nolint:errorlint // a raw errno.
			return true // the connection's Write finishes it.
		}
		op.err = err
		return err != nil || op.n < len(op.b)
	}
}
