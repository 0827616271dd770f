package router

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/admission"
	"github.com/sluice-dev/sluice/internal/apierror"
	"github.com/sluice-dev/sluice/internal/sse"
	"github.com/sluice-dev/sluice/internal/tiers"
	"github.com/sluice-dev/sluice/internal/upstream"
)

// maxUpstreamFields bounds the header fields an exchange replaces or
// removes on the upstream request: X-Request-Id, the four forwarding
// fields, Authorization, TE, traceparent and tracestate.
const maxUpstreamFields = 9

// exchange is one admitted request's single upstream attempt, from its
// lease to the lease's release: serve runs it top to bottom on the serving
// goroutine, and settle, which serve's deferred end reaches however the
// exchange ends, is the one path to Lease.Release. The client's
// cancellation only moves the member connection's deadlines (the
// attempt's) and never ends the exchange itself. Until the member's
// response head arrives the tier's responseHeaderTimeout bounds the
// attempt, then its idleTimeout bounds each body read and each write to
// the client.
type exchange struct {
	rt    *Router
	tier  *tiers.Tier
	who   admission.Tenant // whom the request waits for in the tier's queue.
	route *tiers.Member
	lease *admission.Lease
	body  []byte // the request body sent to the member.
	// held are the request's body buffers, body among them; released when
	// the response head arrives (the request is never sent again) or when
	// the exchange ends, whichever comes first.
	held heldBodies
	in   context.Context // the client's request context.

	idHeader []string // the X-Request-Id header value.

	headerTimeout time.Duration
	idleTimeout   time.Duration

	// req is the upstream request, and upFields its replaced fields.
	req      upstream.Request
	upFields [maxUpstreamFields]upstream.Field
	// attempt is the request's one attempt on a member connection.
	attempt upstream.Attempt
	// reply is the client's response as the exchange writes it; it holds
	// the head until the first body byte.
	reply heldReply

	// settled says the lease was released.
	settled bool
	// relayFailed says the relay of the body to the client failed after
	// the head: the client's response is aborted.
	relayFailed bool

	// notSent says the member never saw the request (upstream.ErrNotSent):
	// the lease is released and nothing was answered, and the router
	// admits the request once more (readmit). readmitted says this
	// exchange is that second admission's, which is never admitted again.
	notSent    bool
	readmitted bool

	outcome Outcome // written only on the serving goroutine.

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

// serve runs the exchange, top to bottom: write the request on a member
// connection, read the response head, scrub it, relay and scan the body,
// pass the trailers on. Its deferred end releases the lease exactly once
// and records the outcome, whether serve returns, the relay fails or a
// write to the client panics. serve reports whether the member never saw
// the request (notSent): then it answered and recorded nothing, and the
// caller admits the request again (readmit).
func (ex *exchange) serve(w http.ResponseWriter, r *http.Request) (notSent bool) {
	ex.reply = heldReply{w: w, progress: newWriteProgress(w, ex.idleTimeout)}
	// However serve ends, end releases the lease once and records the
	// outcome; a panic goes on after it.
	returned := false
	defer func() { ex.end(returned, recover()) }()

	// 1. Write the request; read the member's response head.
	ex.prepare(r)
	err := ex.rt.members.Send(ex.in, &ex.attempt, ex.route.Target(), &ex.req)
	var head upstream.Head
	if err == nil {
		head, err = ex.attempt.ReadHead()
	}
	if err != nil {
		// No response: the router's own error, or nothing (failed).
		if e := ex.failed(err); e != nil {
			e.Write(&ex.reply)
		}
		returned = true
		return ex.notSent
	}

	// 2. Scrub the head, then hold it back until the body starts.
	dropResponseHopByHop(head.Header)
	ex.gotHeaders(head.Status, head.Header["Content-Type"])
	ex.rt.copyResponseHeader(w.Header(), head.Header)
	announceTrailers(w.Header(), &ex.attempt)
	ex.reply.WriteHeader(head.Status)

	// 3. Relay the body as it is read, scanning it; its end releases the
	// lease (bodyEnded).
	if ex.relay(flushEveryWrite(&head)) != nil {
		ex.relayFailed = true // end answers the client or aborts its response.
		returned = true
		return false
	}
	_ = ex.attempt.Close() // the connection goes back to the idle pool.

	// 4. Trailers, then end.
	ex.trailers(head.Trailers)
	returned = true
	return false
}

// end ends the exchange however serve left it (returned, or a panic p, nil
// for runtime.Goexit): after a failed relay or a panic it answers the
// router's own error when the client was sent nothing yet (answerUnsent),
// else flushes the head and the bytes relayed so far before the client's
// response is aborted; it then gives up the member connection, releases
// the lease and records the outcome (served). A failed relay aborts the
// client's response with http.ErrAbortHandler; any other panic goes on.
func (ex *exchange) end(returned bool, p any) {
	if returned && ex.notSent {
		return // readmit owns the request, its body and its outcome now.
	}
	aborted := !returned || ex.relayFailed
	if returned && ex.relayFailed {
		p = http.ErrAbortHandler
	}
	switch {
	case p != nil && p != http.ErrAbortHandler: //nolint:errorlint // net/http compares the sentinel itself.
	case ex.answerUnsent():
		aborted, p = false, nil
	case !aborted && ex.reply.unsent():
		ex.reply.commit() // a response without a body byte, such as a 204.
	case ex.reply.committed:
		// The head and the bytes relayed so far reach the client before
		// the connection is aborted.
		_ = http.NewResponseController(ex.reply.w).Flush()
	}
	ex.served(!aborted)
	if p != nil {
		panic(p)
	}
}

// prepare builds the upstream request from the client's r: the route's
// path, never the client's raw target (so "/v1%2Fchat%2Fcompletions" goes
// out as "/v1/chat/completions"); the query re-encoded from the pairs that
// parse, those that do not dropped; the client's header fields less its
// hop-by-hop ones (dropped from r.Header here, an upgrade included: the
// router serves a request asking for one as a plain request, RFC 9110
// §7.8) and less the forwarding fields (Forwarded, X-Forwarded-*), with the
// router's X-Request-Id; Authorization removed when the router
// authenticates; TE: trailers when the client's TE named trailers; a
// traced request's traceparent and tracestate its span's. The body is the
// exchange's, the timeouts its tier's.
func (ex *exchange) prepare(r *http.Request) {
	dropHopByHop(r.Header)
	query := r.URL.RawQuery
	if query != "" {
		q, _ := url.ParseQuery(query) // the pairs that parse; the error names the first that does not.
		query = q.Encode()
	}
	f := append(ex.upFields[:0], upstream.Field{Name: headerRequestID, Values: ex.idHeader})
	f = append(f, forwardingFields...)
	if ex.rt.keys != nil {
		f = append(f, upstream.Field{Name: "Authorization"}) // the router's credential, not the engine's.
	}
	if containsToken(r.Header["Te"], "trailers") {
		f = append(f, teTrailers)
	}
	if t := ex.outcome.trace; t != nil {
		h := make(http.Header, 2)
		t.inject(h)
		f = append(f, upstream.Field{Name: "Traceparent", Values: h["Traceparent"]},
			upstream.Field{Name: "Tracestate", Values: h["Tracestate"]})
	}
	ex.req = upstream.Request{Method: r.Method, Path: r.URL.Path, RawQuery: query, Header: r.Header, Fields: f,
		Body: ex.body, HeaderTimeout: ex.headerTimeout, IdleTimeout: ex.idleTimeout}
}

// relay copies the member's body to the client until its end, scanning
// each read (bodyBytes) before it is written; with flush, the head goes
// out at once and every write is flushed. The body's end or failure is
// reported (bodyEnded) before the read's bytes are written, so the lease
// is free once the member is done. It returns the read's failure, or the
// write's: the client's response must then be aborted.
//
// A flushed body, which is every stream, waits for its next bytes with no
// copy buffer taken (Attempt.Wait), so a quiet stream holds none
// (docs/ROUTER.md#9-performance).
func (ex *exchange) relay(flush bool) error {
	var buf []byte
	defer func() {
		if buf != nil {
			copyBuffers{}.Put(buf)
		}
	}()
	if flush {
		_ = ex.reply.FlushError()
	}
	for {
		if flush {
			if buf != nil {
				copyBuffers{}.Put(buf)
				buf = nil
			}
			ex.attempt.Wait()
		}
		if buf == nil {
			buf = copyBuffers{}.Get()
		}
		n, rerr := ex.attempt.Read(buf)
		if n > 0 {
			ex.bodyBytes(buf[:n])
		}
		if rerr != nil {
			ex.bodyEnded(rerr)
		}
		if n > 0 {
			nw, werr := ex.reply.Write(buf[:n])
			if flush {
				_ = ex.reply.FlushError()
			}
			if werr == nil && nw != n {
				werr = io.ErrShortWrite
			}
			if werr != nil {
				return werr
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}

// flushEveryWrite reports whether every write of a body is flushed: an
// event stream's and a body's without a Content-Length, which is every
// stream. A body of known length is written through the server's buffer.
func flushEveryWrite(head *upstream.Head) bool {
	ct := head.Header["Content-Type"]
	return len(ct) > 0 && isEventStream(ct[0]) || head.ContentLength == -1
}

// trailers passes the member's trailers on once its body was read whole:
// under the names its head announced (announceTrailers), or, when the
// body brought others, each under http.TrailerPrefix. A response with
// trailers is flushed first, so that the server sends it chunked.
func (ex *exchange) trailers(announced int) {
	trailer := ex.attempt.Trailer()
	if len(trailer) == 0 {
		return
	}
	_ = ex.reply.FlushError()
	h := ex.reply.w.Header()
	for k, vv := range trailer {
		if len(trailer) != announced {
			k = http.TrailerPrefix + k
		}
		for _, v := range vv {
			h.Add(k, v)
		}
	}
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
	e.Write(ex.reply.w)
	o.Status, o.Code = e.Status, e.Code
	return true
}

// settle releases the exchange's lease: the one path to Lease.Release.
// Later calls do nothing.
func (ex *exchange) settle() {
	if ex.settled {
		return
	}
	ex.settled = true
	ex.lease.Release()
	if h := ex.rt.onRelease; h != nil {
		h(ex.tier.Key(), ex.lease.Member())
	}
}

// gotHeaders takes the member's response head: its status and Content-Type
// values, hop-by-hop fields dropped. The request is never sent again, so
// its body buffers go. A 2xx text/event-stream response has its body's
// framing checked.
func (ex *exchange) gotHeaders(status int, contentType []string) {
	ex.held.release()
	ex.body = nil
	ex.req.Body = nil
	o := &ex.outcome
	o.Status = status
	o.FirstByte = ex.rt.clock.Since(o.Start)
	if t := o.trace; t != nil {
		t.upstreamHeaders(status)
	}
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

// bodyBytes takes body bytes read from the member, which the exchange
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

// failed ends an exchange that failed before response headers (the
// attempt closed its connection already) and returns the error the client
// gets: nil when the client went away (nobody is listening) and when the
// member never saw the request (notSent), 504 when the member did not
// answer within responseHeaderTimeout, 502 otherwise. A member that
// refused the connection or reset or closed it before any response byte
// is ejected (eject).
func (ex *exchange) failed(err error) *apierror.Error {
	ex.settle()
	o := &ex.outcome
	if reason := ejectionReason(err); reason != "" {
		ex.eject(reason)
	}
	switch {
	case ex.in.Err() == nil && !ex.readmitted && errors.Is(err, upstream.ErrNotSent):
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
		o.Status, o.Code = e.Status, e.Code
		return e
	}
	o.End = EndUnavailable
	o.ProtocolError = protocolErrorOf(err)
	e := errUpstreamUnavailable
	o.Status, o.Code = e.Status, e.Code
	return e
}

// bodyEnded takes the response body's end (EOF) or failure: the lease is
// released (the attempt closed a failed body's connection first, so the
// member sees the exchange end before its lease is free for another
// request, docs/ROUTER.md#3-terminal-paths), and how the exchange ended is
// classified unless that is known already.
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

// served ends the exchange once serve returned (returned) or stopped
// short: it gives up the member connection (closed unless its body was
// read whole), releases the lease if nothing did, and records the outcome.
func (ex *exchange) served(returned bool) {
	_ = ex.attempt.Close()
	ex.held.release()
	ex.settle()
	o := &ex.outcome
	if !returned && (o.End == "" || o.End == EndComplete) || returned && o.End == "" {
		// The relay to the client failed, or stopped without the body's
		// end.
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
		ex.rt.recheck.Recheck(ex.tier.Key(), ex.route.ID())
	}
}

// isTimeout reports whether err is a connection deadline or dial timeout.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
