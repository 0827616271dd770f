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

// Tuning of the shared upstream transport. Members are engines on loopback:
// connections are cheap to keep and slow to churn.
const (
	// dialTimeout bounds a connect. Loopback connects in microseconds; the
	// tier's responseHeaderTimeout bounds the whole wait anyway.
	dialTimeout = 5 * time.Second
	// tcpKeepAlive is the keep-alive probe period of upstream connections.
	tcpKeepAlive = 30 * time.Second
	// maxIdleConnsPerHost keeps one idle connection per concurrent request
	// to a member up to well past any engine's batch size, so a burst does
	// not close and redial connections (net/http's default is 2).
	maxIdleConnsPerHost = 1024
	// maxIdleConns bounds idle connections across all members.
	maxIdleConns = 4096
	// idleConnTimeout closes connections idle that long.
	idleConnTimeout = 90 * time.Second
	// tlsHandshakeTimeout bounds the handshake with an https member.
	tlsHandshakeTimeout = 10 * time.Second
	// copyBufferSize is the size of the buffers that copy response bodies,
	// ReverseProxy's own default.
	copyBufferSize = 32 << 10
	// copyBufferPoolSize bounds the idle copy buffers kept for reuse: enough
	// for a few hundred concurrent streams, 8 MiB at most.
	copyBufferPoolSize = 256
)

// NewTransport returns the upstream transport the Router uses by default:
// HTTP/1.1 only, no proxy from the environment, no compression added, idle
// connections kept per member. It never retries a request: the Router
// forwards bodies without GetBody, which net/http's Transport needs to
// resend one (also when the request carries Idempotency-Key), and HTTP/2,
// whose transport retries on its own, is disabled.
func NewTransport() *http.Transport {
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	return &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: dialTimeout, KeepAlive: tcpKeepAlive}).DialContext,
		MaxIdleConns:        maxIdleConns,
		MaxIdleConnsPerHost: maxIdleConnsPerHost,
		IdleConnTimeout:     idleConnTimeout,
		TLSHandshakeTimeout: tlsHandshakeTimeout,
		DisableCompression:  true,
		Protocols:           &protocols,
	}
}

// newReverseProxy returns the one ReverseProxy every request goes through.
func (rt *Router) newReverseProxy() *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite:   rt.rewrite,
		Transport: rt.transport,
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

// exchangeOf returns the exchange of a request the router proxies.
func exchangeOf(ctx context.Context) *exchange {
	ex, _ := ctx.Value(exchangeKey{}).(*exchange)
	return ex
}

// exchange is one admitted request's single upstream attempt. Its lease is
// released exactly once, by whichever of these sees the end first: the
// response body's EOF, read error or Close, the proxy's ErrorHandler, or the
// deferred end of serve, which also runs when the copy panics
// (http.ErrAbortHandler). One timer guards the exchange: until response
// headers arrive it is the responseHeaderTimeout, then it runs only while a
// body read waits, as the idleTimeout. Expiry cancels the exchange's
// context with the matching cause, which aborts the upstream request.
type exchange struct {
	rt    *Router
	tier  *tierState
	route *memberRoute
	lease *admission.Lease
	body  *replayBody
	in    context.Context // the client's request context.

	idHeader []string // the X-Request-Id header value.

	headerTimeout time.Duration
	idleTimeout   time.Duration

	ctx      context.Context // the upstream request context.
	cancel   context.CancelCauseFunc
	timer    *time.Timer
	inBody   atomic.Bool // response headers arrived; the timer guards body reads.
	released atomic.Bool
	returned bool // the proxy returned without panicking.

	resp    responseBody
	outcome Outcome // written only on the serving goroutine.
}

// serve sends the request upstream through the reverse proxy; n is the
// body length.
func (ex *exchange) serve(w http.ResponseWriter, r *http.Request, n int64) {
	ex.ctx, ex.cancel = context.WithCancelCause(r.Context())
	out := r.WithContext(context.WithValue(ex.ctx, exchangeKey{}, ex))
	out.Body = ex.body
	out.ContentLength = n
	out.TransferEncoding = nil
	out.GetBody = nil
	ex.timer = time.AfterFunc(ex.headerTimeout, ex.expire)
	defer ex.end()
	ex.rt.proxy.ServeHTTP(w, out)
	ex.returned = true
}

// expire is the timer's function: it aborts the exchange.
func (ex *exchange) expire() {
	if ex.inBody.Load() {
		ex.cancel(errIdleTimeout)
		return
	}
	ex.cancel(errHeaderTimeout)
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

// end runs when serve returns or panics: it releases the lease if nothing
// did yet, frees the exchange's resources and records the outcome.
func (ex *exchange) end() {
	ex.timer.Stop()
	ex.release()
	ex.cancel(errExchangeDone)
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

// rewrite points the outgoing request at the leased member. The body, path
// and query are forwarded unchanged.
func (rt *Router) rewrite(pr *httputil.ProxyRequest) {
	ex := exchangeOf(pr.In.Context())
	out := pr.Out
	out.URL.Scheme = ex.route.scheme
	out.URL.Host = ex.route.host
	out.Host = ""
	out.GetBody = nil // never rewindable: the transport must not resend it.
	out.Header[headerRequestID] = ex.idHeader
	if rt.keys != nil {
		delete(out.Header, "Authorization") // the router's credential, not the engine's.
	}
}

// modifyResponse runs when the member's response headers arrive: it stops
// the header timer, arms body reads with the idle timer and labels the
// response.
func modifyResponse(resp *http.Response) error {
	ex := exchangeOf(resp.Request.Context())
	if !ex.timer.Stop() {
		return errHeaderTimeout // the timer fired as the headers arrived.
	}
	ex.inBody.Store(true)
	o := &ex.outcome
	o.Status = resp.StatusCode
	o.FirstByte = ex.rt.clock.Since(o.Start)
	// The router's own values, already on the client's response, win.
	h := resp.Header
	delete(h, headerRequestID)
	delete(h, headerTier)
	delete(h, headerMember)
	ex.resp = responseBody{ex: ex, rc: resp.Body}
	resp.Body = &ex.resp
	return nil
}

// handleError answers an exchange that failed before response headers.
func handleError(w http.ResponseWriter, req *http.Request, err error) {
	ex := exchangeOf(req.Context())
	ex.timer.Stop()
	ex.release()
	o := &ex.outcome
	e := errUpstreamUnavailable
	o.End = EndUnavailable
	switch {
	case errors.Is(err, errHeaderTimeout) || errors.Is(context.Cause(ex.ctx), errHeaderTimeout):
		e, o.End = errUpstreamTimeout, EndHeaderTimeout
	case ex.in.Err() != nil:
		o.End, o.Status = EndClientGone, StatusClientClosedRequest
		return // nobody is listening.
	}
	e.write(w)
	o.Status, o.Code = e.status, e.code
}

// responseBody is the member's response body as the proxy reads it: every
// read is guarded by the idle timer, and its end (EOF, error or Close)
// releases the lease.
type responseBody struct {
	ex *exchange
	rc io.ReadCloser
}

// Read reads the member's body with the idle timer running.
func (b *responseBody) Read(p []byte) (int, error) {
	ex := b.ex
	ex.timer.Reset(ex.idleTimeout)
	n, err := b.rc.Read(p)
	ex.timer.Stop()
	if err != nil {
		ex.bodyEnded(err)
	}
	return n, err
}

// Close closes the member's body and releases the lease.
func (b *responseBody) Close() error {
	err := b.rc.Close()
	b.ex.release()
	return err
}

// bodyEnded releases the lease and classifies how the body ended.
func (ex *exchange) bodyEnded(err error) {
	ex.release()
	o := &ex.outcome
	if o.End != "" {
		return
	}
	switch {
	case errors.Is(err, io.EOF):
		o.End = EndComplete
	case errors.Is(context.Cause(ex.ctx), errIdleTimeout):
		o.End = EndIdleTimeout
	case ex.in.Err() != nil:
		o.End = EndClientGone
	default:
		o.End = EndUpstreamError
	}
}
