package router

import (
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
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
	// size is memory per open stream; 4 KiB, not ReverseProxy's 32 KiB, is
	// the size of the buffers on either side of it (the member connection's
	// reader and the server's writer), so an event of up to 4 KiB still
	// takes one read and one write (docs/ROUTER.md#9-performance).
	copyBufferSize = 4 << 10
	// copyBufferPoolSize bounds the idle copy buffers kept for reuse: enough
	// for a thousand concurrent exchanges, 4 MiB at most.
	copyBufferPoolSize = 1024
)

// newReverseProxy returns the one ReverseProxy every request goes through,
// over the router's member client.
func (rt *Router) newReverseProxy() *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite:   rt.rewrite,
		Transport: rt.members,
		// Zero: ReverseProxy flushes every write (-1) of a text/event-stream
		// response and of any response without a Content-Length, which is
		// every stream, and spares the flush timer of bodies of known length.
		FlushInterval:  0,
		BufferPool:     copyBuffers{},
		ModifyResponse: modifyResponse,
		ErrorHandler:   handleError,
		// The proxy's own log quotes raw errors with addresses; the router
		// logs its classified outcome instead.
		ErrorLog: log.New(io.Discard, "", 0),
	}
}

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

// rewrite points the outgoing request at the leased member. The path is
// the route ServeHTTP matched, in its decoded form (one of the route
// constants), never the client's raw target: RawPath and RequestURI are
// cleared, so "/v1%2Fchat%2Fcompletions" goes out as
// "/v1/chat/completions". The query goes out re-encoded from the pairs it
// parses into (ReverseProxy has already dropped those that do not parse).
// The client's hop-by-hop headers were dropped before the proxy
// (dropHopByHop), ReverseProxy has dropped forwarding headers, and it adds
// none. A traced request carries its span's traceparent (and tracestate)
// instead of the caller's.
func (rt *Router) rewrite(pr *httputil.ProxyRequest) {
	ex := exchangeOf(pr.In.Context())
	out := pr.Out
	out.URL.Scheme = ex.route.scheme
	out.URL.Host = ex.route.host
	out.URL.Path, out.URL.RawPath, out.RequestURI = pr.In.URL.Path, "", ""
	if out.URL.RawQuery != "" {
		q, _ := url.ParseQuery(out.URL.RawQuery) // the pairs that parse; the error names the first that does not.
		out.URL.RawQuery = q.Encode()
	}
	out.Host = ""
	out.GetBody = nil // never rewindable.
	out.Header[headerRequestID] = ex.idHeader
	if rt.keys != nil {
		delete(out.Header, "Authorization") // the router's credential, not the engine's.
	}
	if t := ex.outcome.trace; t != nil {
		t.inject(out.Header)
	}
}

// modifyResponse runs when the member's response headers arrive: it reports
// them to the exchange, removes the member's values of the router's own
// headers, which are already on the client's response, and the engine
// headers the router strips (Router.stripHeaders). ReverseProxy has already
// dropped the response's hop-by-hop headers.
func modifyResponse(resp *http.Response) error {
	h := resp.Header
	ex := exchangeOf(resp.Request.Context())
	ex.gotHeaders(resp.StatusCode, h["Content-Type"])
	if t := ex.outcome.trace; t != nil {
		t.upstreamHeaders(resp.StatusCode)
	}
	delete(h, headerRequestID)
	delete(h, headerTier)
	delete(h, headerMember)
	for _, name := range ex.rt.stripHeaders {
		delete(h, name)
	}
	return nil
}

// handleError answers an exchange that failed before response headers with
// the error the exchange chose: nothing when the client went away.
func handleError(w http.ResponseWriter, req *http.Request, err error) {
	if e := exchangeOf(req.Context()).failed(err); e != nil {
		e.write(w)
	}
}

// isTimeout reports whether err is a connection deadline or dial timeout.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// heldReply is the client's ResponseWriter as the reverse proxy sees it. It
// holds the response head back until the first body byte, the first flush
// or the end of the exchange, whichever comes first. Streams lose nothing
// by it (the proxy flushes their head at once, and every event after it),
// and a response whose body fails before its first byte was read has sent
// the client nothing yet: the exchange answers it with the router's own
// error instead of a closed connection (exchange.answerUnsent).
type heldReply struct {
	w         http.ResponseWriter
	status    int  // the held status; 0 until the proxy wrote the head.
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

// unsent reports whether the member's head was written to the reply but
// nothing went to the client.
func (r *heldReply) unsent() bool { return r.status != 0 && !r.committed }
