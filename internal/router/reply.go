package router

import (
	"net/http"
	"time"
)

// The response headers the router sets.
const (
	headerTier   = "X-Sluice-Tier"
	headerMember = "X-Sluice-Member"
)

// Response body copying.
const (
	// copyBufferSize is the size of the buffers that copy response bodies.
	// A stream holds its buffer while it waits for the next event, so the
	// size is memory per open stream; 4 KiB, not net/http's 32 KiB, is
	// the size of the buffers on either side of it (the member connection's
	// reader and the server's writer), so an event of up to 4 KiB still
	// takes one read and one write (docs/ROUTER.md#9-performance).
	copyBufferSize = 4 << 10
	// copyBufferPoolSize bounds the idle copy buffers kept for reuse: enough
	// for a thousand concurrent exchanges, 4 MiB at most.
	copyBufferPoolSize = 1024
)

// copyBuffers is a bounded free list of copy buffers. A channel, unlike a
// sync.Pool of slices, takes and returns them without allocating.
type copyBuffers struct{}

var copyBufferList = make(chan []byte, copyBufferPoolSize)

// Get returns a buffer.
func (copyBuffers) Get() []byte {
	select {
	case b := <-copyBufferList:
		return b
	default:
		return make([]byte, copyBufferSize)
	}
}

// Put keeps a buffer for reuse unless the list is full.
func (copyBuffers) Put(b []byte) {
	select {
	case copyBufferList <- b:
	default:
	}
}

// heldReply is the client's ResponseWriter as the exchange writes it. It
// holds the response head back until the first body byte, the first flush
// or the end of the exchange, whichever comes first. Streams lose nothing
// by it (the exchange flushes their head at once, and every event after it),
// and a response whose body fails before its first byte was read has sent
// the client nothing yet: the exchange answers it with the router's own
// error instead of a closed connection (exchange.answerUnsent).
type heldReply struct {
	w         http.ResponseWriter
	status    int  // the held status; 0 until the exchange wrote the head.
	committed bool // the head went to w.
	// progress bounds each write to w (writeProgress).
	progress writeProgress
}

// Header returns the response's header map.
func (r *heldReply) Header() http.Header { return r.w.Header() }

// WriteHeader holds the final status; an informational one passes.
func (r *heldReply) WriteHeader(code int) {
	switch {
	case code < http.StatusOK:
		r.w.WriteHeader(code)
	case r.status == 0:
		r.status = code
	}
}

// commit sends the held head.
func (r *heldReply) commit() {
	if r.committed {
		return
	}
	r.committed = true
	if r.status == 0 {
		r.status = http.StatusOK
	}
	r.w.WriteHeader(r.status)
}

// Write sends the head, then p.
func (r *heldReply) Write(p []byte) (int, error) {
	r.commit()
	r.progress.progress()
	return r.w.Write(p)
}

// FlushError sends the head and flushes what was written. It calls the
// server's flush itself rather than through a ResponseController, one
// frame less under the head's write (docs/ROUTER.md#9-performance).
func (r *heldReply) FlushError() error {
	r.commit()
	r.progress.progress()
	if f, ok := r.w.(interface{ FlushError() error }); ok {
		return f.FlushError()
	}
	return http.NewResponseController(r.w).Flush()
}

// Unwrap returns the client's ResponseWriter, for http.ResponseController.
func (r *heldReply) Unwrap() http.ResponseWriter { return r.w }

// unsent reports whether a final status was written to the reply but
// nothing went to the client.
func (r *heldReply) unsent() bool { return r.status != 0 && !r.committed }

// writeDeadlineSteps is how many times per timeout the write deadline may
// move: it moves at most every timeout/writeDeadlineSteps, so a stream pays
// for one deadline change per quarter of its tier's idle timeout rather
// than one per write, and the deadline, set that much past the timeout,
// never cuts a write that has been blocked for less than the timeout.
const writeDeadlineSteps = 4

// deadlineSetter is the part of a client's ResponseWriter that sets its
// connection's write deadline (the front door's response has it).
type deadlineSetter interface {
	SetWriteDeadline(deadline time.Time) error
}

// writeProgress bounds how long a write to the client may make no
// progress: the client's connection gets a write deadline of timeout, moved
// forward as writes are made. A client that stops reading blocks the
// router's write once the sockets' buffers are full; the deadline then
// fails the write, the server closes the connection and cancels the request,
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
