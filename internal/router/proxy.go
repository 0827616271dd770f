package router

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/sluice-dev/sluice/internal/admission"
)

// The response headers the router sets.
const (
	headerTier   = "X-Sluice-Tier"
	headerMember = "X-Sluice-Member"
)

// Response body copying.
const (
	// copyBufferSize is the size of the buffers that copy response bodies.
	copyBufferSize = 32 << 10
	// copyBufferPoolSize bounds the idle copy buffers kept for reuse: enough
	// for a few hundred concurrent streams, 8 MiB at most.
	copyBufferPoolSize = 256
)

// copyBufferList is a bounded free list of copy buffers. A channel, unlike
// a sync.Pool of slices, takes and returns them without allocating.
var copyBufferList = make(chan []byte, copyBufferPoolSize)

// getCopyBuffer returns a buffer.
func getCopyBuffer() []byte {
	select {
	case b := <-copyBufferList:
		return b
	default:
		return make([]byte, copyBufferSize)
	}
}

// putCopyBuffer keeps a buffer for reuse unless the list is full.
func putCopyBuffer(b []byte) {
	select {
	case copyBufferList <- b:
	default:
	}
}

// errUpgrade reports a member that answered with 101 Switching Protocols,
// which no inference request asks for.
var errUpgrade = errors.New("router: member switched protocols")

// exchange is one admitted request's single upstream attempt, run entirely
// on the serving goroutine. Its lease is released exactly once, by whichever
// of these sees the end first: the failure to get response headers, the end
// of the response body (EOF or error), a failed write to the client, or the
// deferred end of serve, which also runs when the relay panics
// (http.ErrAbortHandler). Deadlines on the member connection bound the wait:
// until response headers arrive the tier's responseHeaderTimeout, then the
// idleTimeout for each body read. The client's going away sets a deadline in
// the past, which ends a blocked read or write at once.
type exchange struct {
	rt        *Router
	tier      *tierState
	route     *memberRoute
	lease     *admission.Lease
	body      []byte
	in        context.Context // the client's request context.
	requestID string

	headerTimeout time.Duration
	idleTimeout   time.Duration

	released bool
	returned bool // the relay returned without panicking.

	outcome Outcome
}

// serve sends the request to the member and relays the response.
func (ex *exchange) serve(w http.ResponseWriter, r *http.Request) {
	defer ex.end()
	ex.relay(w, r)
	ex.returned = true
}

// release returns the lease, once.
func (ex *exchange) release() {
	if ex.released {
		return
	}
	ex.released = true
	ex.lease.Release()
	if h := ex.rt.onRelease; h != nil {
		h(ex.tier.key, ex.route.id)
	}
}

// end runs when serve returns or panics: it releases the lease if nothing
// did yet and records the outcome.
func (ex *exchange) end() {
	ex.release()
	o := &ex.outcome
	if !ex.returned && (o.End == "" || o.End == EndComplete) || ex.returned && o.End == "" {
		// The relay to the client failed or stopped without the body's end.
		o.End = EndAborted
		if ex.in.Err() != nil {
			o.End = EndClientGone
		}
	}
	o.Duration = ex.rt.clock.Since(o.Start)
	ex.rt.finish(o)
}

// relay makes the one upstream attempt: it sends the request on a member
// connection and copies the response to w. The connection is kept for reuse
// only when the response was read to its end and the client's cancellation
// can no longer touch it.
func (ex *exchange) relay(w http.ResponseWriter, r *http.Request) {
	up := ex.rt.members
	deadline := time.Now().Add(ex.headerTimeout)
	c, err := up.get(ex.in, ex.route, deadline)
	if err != nil {
		ex.failHeaders(w, err)
		return
	}
	reusable := false
	stop := context.AfterFunc(ex.in, c.abort)
	defer func() {
		if stop() && reusable {
			up.put(c)
			return
		}
		c.close()
	}()

	// Checking the client after setting a deadline closes the race with
	// abort: either abort runs later and moves the deadline to the past, or
	// the request was already cancelled and the check sees it.
	if err := c.conn.SetDeadline(deadline); err != nil || ex.in.Err() != nil {
		ex.failHeaders(w, err)
		return
	}
	if err := c.writeRequest(r, ex.route, ex.requestID, ex.body, ex.rt.keys != nil); err != nil {
		ex.failHeaders(w, err)
		return
	}
	resp, err := readResponse(c.br) //nolint:bodyclose // read to its end or its connection closed; Close would drain a stream.
	if err != nil {
		ex.failHeaders(w, err)
		return
	}

	o := &ex.outcome
	o.Status = resp.StatusCode
	o.FirstByte = ex.rt.clock.Since(o.Start)
	copyResponseHeader(w.Header(), resp)
	stream := resp.ContentLength < 0 || isEventStream(resp.Header)
	w.WriteHeader(resp.StatusCode)
	var rc *http.ResponseController
	if stream {
		// Streams go out as they come: headers now, then every read.
		rc = http.NewResponseController(w)
		if rc.Flush() != nil {
			ex.abortClient(r)
			return
		}
	}

	buf := getCopyBuffer()
	defer putCopyBuffer(buf)
	for {
		if err := c.conn.SetReadDeadline(time.Now().Add(ex.idleTimeout)); err != nil || ex.in.Err() != nil {
			ex.bodyEnded(err)
			ex.abortClient(r)
			return
		}
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				ex.abortClient(r)
				return
			}
			if stream && rc.Flush() != nil {
				ex.abortClient(r)
				return
			}
		}
		if rerr == io.EOF {
			ex.bodyEnded(rerr)
			for k, vv := range resp.Trailer {
				w.Header()[http.TrailerPrefix+k] = vv
			}
			reusable = !resp.Close && c.br.Buffered() == 0
			return
		}
		if rerr != nil {
			ex.bodyEnded(rerr)
			ex.abortClient(r)
			return
		}
	}
}

// readResponse reads the member's response headers, skipping informational
// (1xx) responses.
func readResponse(br *bufio.Reader) (*http.Response, error) {
	for {
		resp, err := http.ReadResponse(br, nil)
		switch {
		case err != nil:
			return nil, err
		case resp.StatusCode == http.StatusSwitchingProtocols:
			return nil, errUpgrade
		case resp.StatusCode >= 200 || resp.StatusCode < 100:
			return resp, nil
		}
	}
}

// copyResponseHeader copies the member's response headers to the client's,
// leaving out hop-by-hop headers and the router's own (already set), and
// announces the member's trailers.
func copyResponseHeader(h http.Header, resp *http.Response) {
	conn := resp.Header["Connection"]
	for k, vv := range resp.Header {
		switch k {
		case headerRequestID, headerTier, headerMember:
			continue
		}
		if hopByHop(k, conn) {
			continue
		}
		h[k] = vv
	}
	for k := range resp.Trailer {
		h.Add("Trailer", k)
	}
}

// isEventStream reports whether the response is a server-sent event stream.
func isEventStream(h http.Header) bool {
	ct := h["Content-Type"]
	if len(ct) == 0 {
		return false
	}
	v := ct[0]
	const es = "text/event-stream"
	return len(v) >= len(es) && asciiEqualFold(v[:len(es)], es)
}

// asciiEqualFold reports whether a and b are equal ignoring ASCII case.
func asciiEqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range len(a) {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// abortClient ends a response whose headers were sent but whose body cannot
// be completed: under an http.Server it panics with http.ErrAbortHandler,
// so the client sees a cut response rather than a well-formed short one;
// called without a server (a handler test), it returns and the caller
// stops.
func (ex *exchange) abortClient(r *http.Request) {
	ex.release()
	if r.Context().Value(http.ServerContextKey) != nil {
		panic(http.ErrAbortHandler)
	}
}

// failHeaders answers an exchange that failed before response headers:
// 504 when the member did not answer within responseHeaderTimeout, nothing
// when the client went away, 502 otherwise.
func (ex *exchange) failHeaders(w http.ResponseWriter, err error) {
	ex.release()
	o := &ex.outcome
	e := errUpstreamUnavailable
	o.End = EndUnavailable
	switch {
	case ex.in.Err() != nil:
		o.End, o.Status = EndClientGone, StatusClientClosedRequest
		return // nobody is listening.
	case isTimeout(err):
		e, o.End = errUpstreamTimeout, EndHeaderTimeout
	}
	e.write(w)
	o.Status, o.Code = e.status, e.code
}

// bodyEnded releases the lease and classifies how the response body ended.
func (ex *exchange) bodyEnded(err error) {
	ex.release()
	o := &ex.outcome
	if o.End != "" {
		return
	}
	switch {
	case errors.Is(err, io.EOF):
		o.End = EndComplete
	case ex.in.Err() != nil:
		o.End = EndClientGone
	case isTimeout(err):
		o.End = EndIdleTimeout
	default:
		o.End = EndUpstreamError
	}
}

// isTimeout reports whether err is a connection deadline or dial timeout.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
