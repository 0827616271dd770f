package upstream

import (
	"bufio"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/sluice-dev/sluice/internal/sockpeek"
)

// aLongTimeAgo is a deadline in the past: setting it makes blocked reads
// and writes of a connection return at once.
var aLongTimeAgo = time.Unix(1, 0)

// conn is one connection to a member.
type conn struct {
	raw       net.Conn         // the TCP connection.
	peeker    *sockpeek.Peeker // of raw.
	conn      net.Conn         // raw, or the TLS client over it.
	limit     headLimit        // between conn and br: bounds what response heads read.
	br        *bufio.Reader
	head      []byte // scratch for request heads (and small bodies), kept between requests.
	addr      string
	idleSince time.Time
	reused    bool // it carried a request before.
	// rc reaches raw's descriptor when requests go out on raw itself
	// (plain TCP): send then writes a request and waits for its answer in
	// one pass over the poller. Nil otherwise.
	rc syscall.RawConn
	// out is send's state; abortFn is abort, bound once so that a request
	// does not allocate it.
	out     sendOp
	abortFn func()
}

// aborter returns abort as a func, bound once per connection.
func (c *conn) aborter() func() {
	if c.abortFn == nil {
		c.abortFn = c.abort
	}
	return c.abortFn
}

// alive reports whether an idle connection can carry a request: nothing is
// buffered, and the member neither closed or reset the connection nor sent
// bytes nobody asked for since the last response. Where the socket cannot
// be peeked at, a connection the member closed is found when the request
// on it fails.
func (c *conn) alive() bool {
	if c.br.Buffered() > 0 || c.raw.SetReadDeadline(time.Time{}) != nil {
		return false
	}
	st := c.peeker.Peek()
	return st == sockpeek.Open || st == sockpeek.Unknown
}

// abort makes the connection's blocked and future reads and writes fail at
// once.
func (c *conn) abort() { _ = c.raw.SetDeadline(aLongTimeAgo) }

// close closes the connection.
func (c *conn) close() { _ = c.conn.Close() }

// headLimit is the reader between a connection and its bufio.Reader. While
// set, it lets through at most n more bytes and then fails with
// ErrHeaderTooLarge, so reading response heads cannot take more than the
// bound from the connection (the bufio.Reader's read-ahead included); with
// n negative it passes reads through. It lives in the conn: limiting adds
// neither an allocation nor a copy.
//
// The connection's first read failure is sticky: every later read returns
// it again, so a failure that ended a bufio.Reader's Peek (Attempt.Wait)
// is what the body's next read reports too, a reset included (a socket
// reads end of file after the read that reported its reset).
type headLimit struct {
	r   io.Reader
	n   int64 // bytes left; negative means no limit.
	err error // the connection's first read failure.
}

// set starts a budget of n bytes, or lifts the limit when n is negative.
func (l *headLimit) set(n int64) { l.n = n }

// Read reads from the connection within the budget.
func (l *headLimit) Read(p []byte) (int, error) {
	if l.err != nil {
		return 0, l.err
	}
	if l.n == 0 {
		return 0, ErrHeaderTooLarge
	}
	if l.n > 0 && int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	if l.n > 0 {
		l.n -= int64(n)
	}
	l.err = err
	return n, err
}
