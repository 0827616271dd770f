package router

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/admission"
	"github.com/sluice-dev/sluice/internal/sse"
)

// phase is where an exchange is in its life. Phases only move forward.
type phase uint8

// The phases of an exchange, in order.
const (
	// phaseAdmitted: the lease is held and nothing was sent yet.
	phaseAdmitted phase = iota
	// phaseSent: the request was written to a member connection.
	phaseSent
	// phaseHeaders: the member's response headers arrived.
	phaseHeaders
	// phaseBody: the proxy is reading the member's response body.
	phaseBody
	// phaseEnded: the lease was released; nothing moves the exchange any
	// more.
	phaseEnded
)

// String returns the phase's name, for test failures.
func (p phase) String() string {
	switch p {
	case phaseAdmitted:
		return "admitted"
	case phaseSent:
		return "sent"
	case phaseHeaders:
		return "headers"
	case phaseBody:
		return "body"
	case phaseEnded:
		return "ended"
	}
	return "unknown"
}

// exchangeKey is the context key of a request's exchange.
type exchangeKey struct{}

// exchangeOf returns the exchange of a request the router proxies, or nil.
func exchangeOf(ctx context.Context) *exchange {
	ex, _ := ctx.Value(exchangeKey{}).(*exchange)
	return ex
}

// exchange owns one admitted request's single upstream attempt from
// admission to the lease's release. It is a small state machine (admitted →
// sent → headers → body → ended) driven by events the other components
// report: the member client (sent), ModifyResponse (gotHeaders), the
// proxy's ErrorHandler (failed), the member's response body (bodyEnded,
// bodyClosed) and the deferred end of serve, which also runs when the copy
// panics with http.ErrAbortHandler (served). Reaching phaseEnded, in settle,
// is the only path to Lease.Release, so the lease is released exactly once
// whichever event comes first. All events arrive on the serving goroutine:
// the client's cancellation only moves connection deadlines (memberConn.abort)
// and never reports an event itself. The member client bounds the waits with
// connection deadlines: until response headers arrive the tier's
// responseHeaderTimeout, then the idleTimeout for each body read.
type exchange struct {
	rt    *Router
	tier  *tierState
	who   admission.Tenant // whom the request waits for in the tier's queue.
	route *memberRoute
	lease *admission.Lease
	body  []byte // the request body sent to the member.
	// held are the request's body buffers, body among them; released when
	// the response headers arrive (the request is never sent again) or when
	// the exchange is served, whichever comes first.
	held heldBodies
	in   context.Context // the client's request context.

	idHeader []string // the X-Request-Id header value.

	// reply is the client's response as the proxy writes it; it holds the
	// head until the first body byte.
	reply heldReply

	headerTimeout time.Duration
	idleTimeout   time.Duration

	phase phase

	// notSent says the member never saw the request (errNotSent): the
	// lease is released and nothing was answered, and the router admits
	// the request once more (readmit). readmitted says this exchange is
	// that second admission's, which is never admitted again.
	notSent    bool
	readmitted bool

	resp    memberBody // the member's response body, once headers arrived.
	outcome Outcome    // written only on the serving goroutine.

	// framed is set for a 2xx text/event-stream response: scan then checks
	// the body's framing as it is read.
	framed bool
	scan   sse.Scanner

	// fields are the content keys of the route's responses; zero when it
	// generates none. A 2xx response of a generation route has content
	// scan its body for content events and usage (scanContent).
	fields      sse.Fields
	scanContent bool
	content     sse.Content
	// events counts the content events (a non-streaming body with content
	// counts one); lastEvent is when the last one was read, from Start.
	events    int
	lastEvent time.Duration
	// intervals takes the intervals between a stream's content events;
	// nil when nobody records them.
	intervals Observer
}

// serve sends the request to the member through the reverse proxy. The
// outgoing request carries no body reader: the member client writes the
// exchange's body buffer. When the member never saw the request (notSent)
// serve answers nothing and records nothing: the caller admits the request
// again (readmit).
func (ex *exchange) serve(w http.ResponseWriter, r *http.Request) {
	out := r.WithContext(context.WithValue(r.Context(), exchangeKey{}, ex))
	out.Body = http.NoBody
	out.ContentLength = int64(len(ex.body))
	out.TransferEncoding = nil
	out.GetBody = nil
	// The client's connection headers go now, upgrade included; net/http's
	// server read what it needs of them when it read the request.
	dropHopByHop(out.Header)
	ex.reply = heldReply{w: w, progress: newWriteProgress(w, ex.idleTimeout)}
	returned := false
	defer func() {
		var p any
		if !returned {
			p = recover() // nil for runtime.Goexit.
		}
		if returned && ex.notSent {
			return // readmit owns the request, its body and its outcome now.
		}
		aborted := !returned
		switch {
		case p != nil && p != http.ErrAbortHandler: //nolint:errorlint // ReverseProxy panics with the sentinel itself.
		case ex.answerUnsent():
			aborted, p = false, nil
		case !aborted && ex.reply.unsent():
			ex.reply.commit() // a response without a body byte, such as a 204.
		case ex.reply.committed:
			// The head and the bytes relayed so far reach the client before
			// the connection is aborted.
			_ = http.NewResponseController(w).Flush()
		}
		ex.served(!aborted)
		if p != nil {
			panic(p)
		}
	}()
	ex.rt.proxy.ServeHTTP(&ex.reply, out)
	returned = true
}

// answerUnsent answers, with the router's own error, a response whose body
// failed before its first byte was read, while the client has been sent
// nothing of it: 504 upstream_timeout when the body stalled for the idle
// timeout (end header_timeout: the response did not start in time), else
// 502 upstream_unavailable (end upstream_unavailable). The member's headers
// are dropped; the router's own stay. It reports whether it answered.
func (ex *exchange) answerUnsent() bool {
	o := &ex.outcome
	if !ex.reply.unsent() || o.End == "" || o.End == EndComplete || ex.in.Err() != nil {
		return false
	}
	h := ex.reply.w.Header()
	for k := range h {
		if k != headerRequestID && k != headerTier && k != headerMember {
			delete(h, k)
		}
	}
	e, end := errUpstreamUnavailable, EndUnavailable
	if o.End == EndIdleTimeout {
		e, end = errUpstreamTimeout, EndHeaderTimeout
	}
	o.End = end
	ex.reply.committed = true
	e.write(ex.reply.w)
	o.Status, o.Code = e.status, e.code
	return true
}

// advance moves the exchange forward to p; it never moves it back and never
// out of phaseEnded.
func (ex *exchange) advance(p phase) {
	if p > ex.phase && ex.phase != phaseEnded {
		ex.phase = p
	}
}

// settle ends the exchange and releases its lease: the one path to
// Lease.Release. Later calls do nothing.
func (ex *exchange) settle() {
	if ex.phase == phaseEnded {
		return
	}
	ex.phase = phaseEnded
	ex.lease.Release()
	if h := ex.rt.onRelease; h != nil {
		h(ex.tier.key, ex.lease.Member())
	}
}

// sent reports that the request was written to a member connection.
func (ex *exchange) sent() { ex.advance(phaseSent) }

// gotHeaders reports the member's response headers: their status and
// Content-Type values, at the time they arrived. A 2xx text/event-stream
// response has its body's framing checked.
func (ex *exchange) gotHeaders(status int, contentType []string) {
	ex.advance(phaseHeaders)
	ex.held.release()
	ex.body = nil
	o := &ex.outcome
	o.Status = status
	o.FirstByte = ex.rt.clock.Since(o.Start)
	ok := status >= 200 && status < 300
	ex.framed = ok && len(contentType) == 1 && isEventStream(contentType[0])
	if ok && ex.fields != 0 {
		ex.scanContent = true
		ex.content = sse.NewContent(ex.fields, ex.framed)
	}
}

// isEventStream reports whether a Content-Type value's media type is
// text/event-stream, whatever its parameters, case and spacing; it does not
// allocate.
func isEventStream(v string) bool {
	if i := strings.IndexByte(v, ';'); i >= 0 {
		v = v[:i]
	}
	return strings.EqualFold(strings.TrimSpace(v), "text/event-stream")
}

// bodyBytes reports body bytes read from the member, which the proxy
// relays to the client unchanged.
func (ex *exchange) bodyBytes(p []byte) {
	if ex.framed {
		ex.scan.Write(p)
	}
	if ex.scanContent {
		if n := ex.content.Write(p); n > 0 {
			ex.contentEvents(n)
		}
	}
}

// contentEvents times n content events that arrived in one read: the
// stream's first is its time to first token, each later one an interval
// (0 for all but the first of a read).
func (ex *exchange) contentEvents(n int) {
	ex.events += n
	if !ex.framed {
		return // a whole body is timed at its end.
	}
	at := ex.rt.clock.Since(ex.outcome.Start)
	if ex.events == n {
		ex.outcome.FirstToken = at
		n--
	} else if ex.intervals != nil {
		ex.intervals.Observe((at - ex.lastEvent).Seconds())
		n--
	}
	if ex.intervals != nil {
		for ; n > 0; n-- {
			ex.intervals.Observe(0)
		}
	}
	ex.lastEvent = at
}

// failed reports that the exchange failed before response headers and
// returns the error the client gets: nil when the client went away (nobody
// is listening) and when the member never saw the request (notSent), 504
// when the member did not answer within responseHeaderTimeout, 502
// otherwise. A member that refused the connection or reset it before any
// response byte is ejected (eject).
func (ex *exchange) failed(err error) *apiError {
	ex.settle()
	o := &ex.outcome
	if reason := ejectionReason(err); reason != "" {
		ex.eject(reason)
	}
	switch {
	case ex.in.Err() == nil && !ex.readmitted && errors.Is(err, errNotSent):
		// Not a byte reached the member: the request goes back to
		// admission once, without it (readmit).
		ex.notSent = true
		o.NotSentMember, o.NotSentEjection, o.Ejection = o.Member, o.Ejection, ""
		return nil
	case ex.in.Err() != nil:
		o.End, o.Status = EndClientGone, StatusClientClosedRequest
		return nil
	case isTimeout(err):
		o.End = EndHeaderTimeout
		e := errUpstreamTimeout
		o.Status, o.Code = e.status, e.code
		return e
	}
	o.End = EndUnavailable
	o.ProtocolError = protocolErrorOf(err)
	e := errUpstreamUnavailable
	o.Status, o.Code = e.status, e.code
	return e
}

// bodyRead reports that the proxy reads the member's response body.
func (ex *exchange) bodyRead() { ex.advance(phaseBody) }

// bodyEnded reports the response body's end (EOF) or failure, and
// classifies how the exchange ended unless that is known already.
func (ex *exchange) bodyEnded(err error) {
	ex.settle()
	o := &ex.outcome
	if o.End != "" {
		return
	}
	switch {
	case errors.Is(err, io.EOF):
		o.End = EndComplete // served refines it by the body's framing.
	case ex.in.Err() != nil:
		o.End = EndClientGone
	case isTimeout(err):
		o.End = EndIdleTimeout
	case errors.Is(err, io.ErrUnexpectedEOF):
		// The connection ended cleanly (EOF) before the Content-Length or
		// the terminating chunk; a reset or read error is upstream_error.
		o.End = EndTruncated
	default:
		o.End = EndUpstreamError
	}
}

// bodyClosed reports that the proxy closed the member's response body.
func (ex *exchange) bodyClosed() { ex.settle() }

// served reports that serve returned (returned) or panicked: it gives up the
// member connection, ends the exchange if no other event did, and records
// the outcome.
func (ex *exchange) served(returned bool) {
	_ = ex.resp.Close()
	ex.held.release()
	ex.settle()
	o := &ex.outcome
	if !returned && (o.End == "" || o.End == EndComplete) || returned && o.End == "" {
		// The relay to the client failed (the proxy panics with
		// http.ErrAbortHandler) or stopped without the body's end.
		o.End = EndAborted
		if ex.in.Err() != nil {
			o.End = EndClientGone
		}
	}
	if o.End == EndComplete && ex.framed {
		// Relayed whole: the framing decides between complete, malformed
		// and truncated.
		switch ex.scan.End() {
		case sse.Malformed:
			o.End = EndMalformed
		case sse.Truncated:
			o.End = EndTruncated
		}
	}
	o.Duration = ex.rt.clock.Since(o.Start)
	if ex.scanContent {
		o.Usage, o.HasUsage = ex.content.Usage()
		if !ex.framed && ex.events > 0 && o.End == EndComplete {
			o.FirstToken = o.Duration // a non-streaming body's content comes whole.
		}
	}
	ex.rt.finish(o)
}

// eject takes the exchange's member out of selection until it proves its
// readiness again (Rechecker), and records why on the outcome.
func (ex *exchange) eject(reason Ejection) {
	ex.outcome.Ejection = reason
	if ex.rt.recheck != nil {
		ex.rt.recheck.Recheck(ex.tier.key, ex.route.id)
	}
}
