package router

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"sync/atomic"
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
	// copyBufferSize is the size of the buffers that copy response bodies,
	// ReverseProxy's own default.
	copyBufferSize = 32 << 10
	// copyBufferPoolSize bounds the idle copy buffers kept for reuse: enough
	// for a few hundred concurrent streams, 8 MiB at most.
	copyBufferPoolSize = 256
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

// exchangeKey is the context key of a request's exchange.
type exchangeKey struct{}

// exchangeOf returns the exchange of a request the router proxies, or nil.
func exchangeOf(ctx context.Context) *exchange {
	ex, _ := ctx.Value(exchangeKey{}).(*exchange)
	return ex
}

// exchange is one admitted request's single upstream attempt, through the
// ReverseProxy and the member client, all on the serving goroutine. Its lease
// is released exactly once, by whichever of these sees the end first: the
// proxy's ErrorHandler (no response headers), the response body's EOF, read
// error or Close, or the deferred end of serve, which also runs when the
// copy panics (http.ErrAbortHandler). The member client bounds the waits
// with connection deadlines: until response headers arrive the tier's
// responseHeaderTimeout, then the idleTimeout for each body read.
type exchange struct {
	rt    *Router
	tier  *tierState
	route *memberRoute
	lease *admission.Lease
	body  []byte          // the request body, as the gates read it.
	in    context.Context // the client's request context.

	idHeader []string // the X-Request-Id header value.

	headerTimeout time.Duration
	idleTimeout   time.Duration

	released atomic.Bool
	returned bool // the proxy returned without panicking.

	resp    memberBody // the member's response body, once headers arrived.
	outcome Outcome    // written only on the serving goroutine.
}

// serve sends the request to the member through the reverse proxy. The
// outgoing request carries no body reader: the member client writes the
// exchange's body buffer.
func (ex *exchange) serve(w http.ResponseWriter, r *http.Request) {
	out := r.WithContext(context.WithValue(r.Context(), exchangeKey{}, ex))
	out.Body = http.NoBody
	out.ContentLength = int64(len(ex.body))
	out.TransferEncoding = nil
	out.GetBody = nil
	defer ex.end()
	ex.rt.proxy.ServeHTTP(w, out)
	ex.returned = true
}

// release returns the lease, once.
func (ex *exchange) release() {
	if !ex.released.CompareAndSwap(false, true) {
		return
	}
	ex.lease.Release()
	if h := ex.rt.onRelease; h != nil {
		h(ex.tier.key, ex.route.id)
	}
}

// end runs when serve returns or panics: it gives up the member connection
// and releases the lease if nothing did yet, and records the outcome.
func (ex *exchange) end() {
	_ = ex.resp.Close()
	ex.release()
	o := &ex.outcome
	if !ex.returned && (o.End == "" || o.End == EndComplete) || ex.returned && o.End == "" {
		// The relay to the client failed (the proxy panics with
		// http.ErrAbortHandler) or stopped without the body's end.
		o.End = EndAborted
		if ex.in.Err() != nil {
			o.End = EndClientGone
		}
	}
	o.Duration = ex.rt.clock.Since(o.Start)
	ex.rt.finish(o)
}

// rewrite points the outgoing request at the leased member. The path and
// query are forwarded unchanged; ReverseProxy has already dropped hop-by-hop
// and forwarding headers, and adds none.
func (rt *Router) rewrite(pr *httputil.ProxyRequest) {
	ex := exchangeOf(pr.In.Context())
	out := pr.Out
	out.URL.Scheme = ex.route.scheme
	out.URL.Host = ex.route.host
	out.Host = ""
	out.GetBody = nil // never rewindable.
	out.Header[headerRequestID] = ex.idHeader
	if rt.keys != nil {
		delete(out.Header, "Authorization") // the router's credential, not the engine's.
	}
}

// modifyResponse runs when the member's response headers arrive: it records
// them and removes the member's values of the router's own headers, which
// are already on the client's response.
func modifyResponse(resp *http.Response) error {
	ex := exchangeOf(resp.Request.Context())
	o := &ex.outcome
	o.Status = resp.StatusCode
	o.FirstByte = ex.rt.clock.Since(o.Start)
	h := resp.Header
	delete(h, headerRequestID)
	delete(h, headerTier)
	delete(h, headerMember)
	return nil
}

// handleError answers an exchange that failed before response headers:
// nothing when the client went away, 504 when the member did not answer
// within responseHeaderTimeout, 502 otherwise.
func handleError(w http.ResponseWriter, req *http.Request, err error) {
	ex := exchangeOf(req.Context())
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
