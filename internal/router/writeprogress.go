package router

import (
	"net/http"
	"time"
)

// writeDeadlineSteps is how many times per timeout the write deadline may
// move: it moves at most every timeout/writeDeadlineSteps, so a stream pays
// for one deadline change per quarter of its tier's idle timeout rather
// than one per write, and the deadline, set that much past the timeout,
// never cuts a write that has been blocked for less than the timeout.
const writeDeadlineSteps = 4

// deadlineSetter is the part of a client's ResponseWriter that sets its
// connection's write deadline (net/http's response has it).
type deadlineSetter interface {
	SetWriteDeadline(deadline time.Time) error
}

// writeProgress bounds how long a write to the client may make no
// progress: the client's connection gets a write deadline of timeout, moved
// forward as writes are made. A client that stops reading blocks the
// router's write once the sockets' buffers are full; the deadline then
// fails the write, net/http closes the connection and cancels the request,
// and the exchange ends as client_gone and releases its lease
// (docs/ROUTER.md#3-terminal-paths). Without it the exchange would wait as
// long as the engine produces: the member's idle timeout runs only while
// the router reads the member, not while it writes to the client.
//
// A write that is blocked for timeout fails between timeout and
// timeout*(1+1/writeDeadlineSteps) after it began. The deadline is real
// time: the kernel and Go's poller own it, not the router's clock.
type writeProgress struct {
	conn    deadlineSetter // nil: the ResponseWriter sets no deadline.
	timeout time.Duration  // 0: no deadline.
	next    time.Time      // when the deadline may move again.
}

// newWriteProgress returns the write progress of w's connection with the
// tier's idle timeout.
func newWriteProgress(w http.ResponseWriter, timeout time.Duration) writeProgress {
	conn, ok := w.(deadlineSetter)
	if !ok {
		conn = http.NewResponseController(w) // unwraps a wrapped writer.
	}
	return writeProgress{conn: conn, timeout: timeout}
}

// progress moves the write deadline before a write when it is due. It is
// not inlined, so that its frame is gone before the write it precedes:
// the deepest call of a stream is under that write
// (docs/ROUTER.md#9-performance).
//
//go:noinline
func (p *writeProgress) progress() {
	if p.timeout <= 0 || p.conn == nil {
		return
	}
	now := time.Now()
	if now.Before(p.next) {
		return
	}
	step := p.timeout / writeDeadlineSteps
	p.next = now.Add(step)
	_ = p.conn.SetWriteDeadline(now.Add(p.timeout + step))
}
