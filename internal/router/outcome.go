package router

// A request's record: the Outcome and its closed sets, which the
// recorders and the access line take when the request ends, and its span
// when the router traces.

import (
	"context"
	"errors"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluice-dev/sluice/internal/admission"
	"github.com/sluice-dev/sluice/internal/evidence"
	"github.com/sluice-dev/sluice/internal/scheduler"
	"github.com/sluice-dev/sluice/internal/sse"
	"github.com/sluice-dev/sluice/internal/upstream"
	"github.com/sluice-dev/sluice/internal/version"
)

// Recorder receives one Outcome per request on the inference routes, after
// the request ended and its lease (if any) was released. It is the seam for
// the decision log (EvidenceRecorder) and the request metrics. Record is
// called on the request's goroutine, so it must be fast and must not block.
// The Outcome, its Selection included, is the recorders' own copy; when
// several recorders share it (Recorders), none may change the Selection.
type Recorder interface {
	// Record takes one request's outcome.
	Record(o Outcome)
}

// Result is the admission result of a request.
type Result string

// The closed set of Result values.
const (
	// ResultAdmitted means a lease was acquired and one upstream attempt
	// made.
	ResultAdmitted Result = "admitted"
	// ResultNotAdmitted means admission refused the request (capacity
	// exhausted, tier quiesced, no eligible member): no upstream attempt.
	ResultNotAdmitted Result = "not_admitted"
	// ResultRefused means a request-wide gate rejected the request (method,
	// API key, body size, body shape, unknown model) before admission.
	ResultRefused Result = "refused"
)

// End says how an admitted request's single upstream exchange ended.
type End string

// The closed set of End values.
const (
	// EndComplete means the member's response body was read to its end and
	// relayed, and for a 2xx text/event-stream response its framing held
	// and data: [DONE] was seen.
	EndComplete End = "complete"
	// EndTruncated means the member ended the response body before its
	// promised end, without an error on the connection: a body shorter than
	// its Content-Length or without its terminating chunk (the client's
	// response was aborted), or a 2xx text/event-stream response that ended
	// without data: [DONE] (relayed whole).
	EndTruncated End = "truncated"
	// EndMalformed means a 2xx text/event-stream response, read to its end
	// and relayed whole, broke the event-stream framing (internal/sse).
	EndMalformed End = "malformed"
	// EndUnavailable means the member failed before the client was sent
	// anything: before response headers (connection refused or reset), or
	// before the first body byte of a response of known length; the client
	// got 502.
	EndUnavailable End = "upstream_unavailable"
	// EndHeaderTimeout means the member's response did not start in time:
	// no response headers within the tier's responseHeaderTimeout, or no
	// first body byte of a response of known length within its
	// idleTimeout; the client got 504.
	EndHeaderTimeout End = "header_timeout"
	// EndIdleTimeout means the response body stalled for the tier's
	// idleTimeout; the client's response was aborted.
	EndIdleTimeout End = "idle_timeout"
	// EndUpstreamError means the member's response body failed mid-way; the
	// client's response was aborted.
	EndUpstreamError End = "upstream_error"
	// EndClientGone means the client went away before the exchange ended.
	EndClientGone End = "client_gone"
	// EndAborted means relaying to the client failed or panicked
	// (http.ErrAbortHandler) for another reason.
	EndAborted End = "aborted"
)

// Ejection says why an exchange took its member out of selection until a
// readiness probe passes again (passive ejection); empty when it did not.
type Ejection string

// The closed set of Ejection values.
const (
	// EjectRefused means the member refused the connection.
	EjectRefused Ejection = "connection_refused"
	// EjectReset means the member reset a fresh connection before any
	// response byte.
	EjectReset Ejection = "connection_reset"
	// EjectClosed means the member closed the connection after taking the
	// request (it was written, and not provably unreceived), before any
	// response byte: an engine that dies mid-request closes its
	// connections so, and a live one answers instead.
	EjectClosed Ejection = "connection_closed"
)

// ejectionReason returns the Ejection an exchange's failure before
// response headers calls for, or "".
func ejectionReason(err error) Ejection {
	switch {
	case errors.Is(err, upstream.ErrRefused):
		return EjectRefused
	case errors.Is(err, upstream.ErrReset):
		return EjectReset
	case errors.Is(err, upstream.ErrClosed):
		return EjectClosed
	}
	return ""
}

// ProtocolError says how a member broke the HTTP protocol before its
// response headers, ending the exchange as 502 upstream_unavailable; empty
// when it did not. It does not eject the member: a member that answers at
// all is alive.
type ProtocolError string

// The closed set of ProtocolError values.
const (
	// ProtocolHeadTooLarge means the member's response heads (1xx ones
	// included) exceeded upstream.MaxResponseHeadBytes.
	ProtocolHeadTooLarge ProtocolError = "response_head_too_large"
	// ProtocolTooManyInformational means the member sent more than
	// upstream.MaxInformational 1xx responses.
	ProtocolTooManyInformational ProtocolError = "too_many_informational"
	// ProtocolSwitchingProtocols means the member answered 101 Switching
	// Protocols, which no inference request asks for.
	ProtocolSwitchingProtocols ProtocolError = "switching_protocols"
)

// protocolErrorOf returns the ProtocolError of an exchange's failure
// before response headers, or "".
func protocolErrorOf(err error) ProtocolError {
	switch {
	case errors.Is(err, upstream.ErrHeaderTooLarge):
		return ProtocolHeadTooLarge
	case errors.Is(err, upstream.ErrTooManyInformational):
		return ProtocolTooManyInformational
	case errors.Is(err, upstream.ErrSwitchingProtocols):
		return ProtocolSwitchingProtocols
	}
	return ""
}

// QueueEnd is how a request that met its tier's admission queue left it
// (docs/ADMISSION-QUEUE.md).
type QueueEnd string

// The closed set of QueueEnd values.
const (
	// QueueAdmitted: it waited, then a member admitted it.
	QueueAdmitted QueueEnd = "admitted"
	// QueueTimeout: it waited the queue's maxWait (503 queue_timeout).
	QueueTimeout QueueEnd = "queue_timeout"
	// QueueFull: the queue, or its tenant's share, was full when it
	// arrived or after a reconfiguration lowered the bounds (429
	// queue_full).
	QueueFull QueueEnd = "queue_full"
	// QueueClientGone: its client left while it waited; it got no
	// response and never held a lease.
	QueueClientGone QueueEnd = "client_gone"
	// QueueRefused: while it waited the tier stopped admitting (quiesced,
	// handed over, no eligible member, queue removed) and it got that
	// refusal.
	QueueRefused QueueEnd = "refused"
)

// recordAdmission records an admission decision that took d, of which
// waited in the queue, and ended with err: Schedule is the time deciding
// (added to that of an earlier decision of the request), Queued and Queue
// the time and way it waited.
func (o *Outcome) recordAdmission(d time.Duration, waited admission.Waited, err error) {
	o.Schedule += d - waited.Duration
	o.Queued += waited.Duration
	if q := queueEnd(waited, err); q != "" {
		o.Queue = q
	}
}

// queueEnd returns how an admission decision that waited, or was refused
// by the queue, left it; empty when the request never met the queue.
func queueEnd(w admission.Waited, err error) QueueEnd {
	switch {
	case errors.Is(err, admission.ErrQueueFull):
		return QueueFull
	case !w.Queued:
		return ""
	case err == nil:
		return QueueAdmitted
	case errors.Is(err, admission.ErrQueueTimeout):
		return QueueTimeout
	case errors.Is(err, admission.ErrClientGone):
		return QueueClientGone
	}
	return QueueRefused
}

// StatusClientClosedRequest is the status recorded (never sent) for a
// request whose client went away before response headers: the nginx
// convention.
const StatusClientClosedRequest = 499

// Outcome is one request's record. It carries ids, classes and timings only:
// no URL, address, credential, prompt or body.
type Outcome struct {
	// RequestID is the X-Request-Id the client got.
	RequestID string
	// Start is when the router received the request.
	Start time.Time
	// Duration is from Start to the end of the exchange.
	Duration time.Duration
	// Alias is the model the request named; empty when a gate refused it
	// before alias resolution.
	Alias string
	// Tier is the tier's namespace/name; empty when unresolved.
	Tier string
	// Result is the admission result.
	Result Result
	// Code is the error code the router answered with for refused and
	// not-admitted requests, and for admitted requests that got a 502 or 504
	// from the router; empty otherwise.
	Code string
	// Status is the HTTP status the client got: the member's for relayed
	// responses, StatusClientClosedRequest when the client left before
	// headers.
	Status int
	// Member is the leased member; empty unless admitted.
	Member string
	// FirstByte is from Start to the member's response headers; zero when
	// none arrived.
	FirstByte time.Duration
	// Schedule is the time spent building the admission inputs and in
	// the admission decision, less Queued; zero for requests refused before
	// admission.
	Schedule time.Duration
	// Queued is how long the request waited in its tier's admission queue;
	// zero when it did not wait.
	Queued time.Duration
	// Queue is how the request's time in the queue ended; empty when it
	// never met the queue (it was admitted at once, or its tier has none).
	Queue QueueEnd
	// Dispatch is from Start to the start of the upstream attempt (gates
	// and admission); zero unless admitted.
	Dispatch time.Duration
	// End is how the upstream exchange ended; empty unless admitted.
	End End
	// Ejection says why the exchange ejected its member (the member refused
	// the connection, or reset a fresh one before any response byte); empty
	// when it did not.
	Ejection Ejection
	// ProtocolError says how the member broke the protocol before response
	// headers (heads too large, too many 1xx, 101); empty when it did not.
	ProtocolError ProtocolError
	// NotSentMember is the member the request was leased to first when not
	// a byte of it reached that member (the connection was refused, or a
	// fresh one reset before the first byte was written): the member was
	// ejected for NotSentEjection and the request went back to admission
	// once, without it. Member, End and Ejection then describe the second
	// admission's attempt, or Result its refusal. Empty when the first
	// member was sent the request. The decision record does not carry it:
	// its schema has one attempt, the one that may have reached an engine.
	NotSentMember string
	// NotSentEjection is why NotSentMember was ejected (EjectRefused or
	// EjectReset); empty with NotSentMember.
	NotSentEjection Ejection
	// Selection is the lease's scheduler decision for Capacity tiers (the
	// captured one, never recomputed) and nil otherwise.
	Selection *scheduler.Decision
	// FirstToken is from Start to the first generated content the member
	// sent: the read that brought the first content-bearing event of a
	// 2xx event stream (a chunk with only the role is none), or the end of
	// a complete 2xx non-streaming body that has content; zero when there
	// was none. Only the generation routes (chat completions, completions,
	// responses) have content.
	FirstToken time.Duration
	// Usage is the token counts of the member's usage object: a
	// non-streaming body's, or the last one of a stream (present when the
	// client asked for stream_options.include_usage). HasUsage says whether
	// the response had one.
	Usage    sse.Usage
	HasUsage bool

	// trace is the request's span, nil unless the router traces
	// (Options.TracerProvider); finish ends it. Recorders cannot see it.
	trace *requestTrace
}

// Observer takes one observation, in seconds.
type Observer interface {
	Observe(seconds float64)
}

// IntervalRecorder takes the intervals between the content events of the
// 2xx event streams the router relays (inter-token latency), as they
// happen: an event that arrives in the same read as the one before it
// counts 0.
type IntervalRecorder interface {
	// Intervals returns the observer of the intervals of tier's member, or
	// nil. The router asks once per admitted request.
	Intervals(tier, member string) Observer
}

// Evidence returns the outcome's decision record. The fields map one to
// one (Result is the record's Outcome, End its stream outcome, Code its
// refusal reason or upstream error code, Queue its queue outcome); the Selection pointer is carried
// over, not copied, so the record shares it.
func (o *Outcome) Evidence() evidence.Record {
	return evidence.Record{
		RequestID: o.RequestID,
		Time:      o.Start,
		Duration:  o.Duration,
		Alias:     o.Alias,
		Tier:      o.Tier,
		Outcome:   evidence.Outcome(o.Result),
		Code:      o.Code,
		Status:    o.Status,
		Member:    o.Member,
		Dispatch:  o.Dispatch,
		FirstByte: o.FirstByte,
		End:       evidence.StreamOutcome(o.End),
		Ejection:  evidence.Ejection(o.Ejection),
		Protocol:  evidence.ProtocolError(o.ProtocolError),
		Queued:    o.Queued,
		Queue:     evidence.QueueOutcome(o.Queue),
		Scheduler: o.Selection,
	}
}

// EvidenceRecorder returns a Recorder that adds every Outcome's decision
// record to l.
func EvidenceRecorder(l *evidence.Log) Recorder {
	return evidenceRecorder{log: l}
}

// evidenceRecorder adds outcomes to a decision log.
type evidenceRecorder struct {
	log *evidence.Log
}

// Record implements Recorder.
func (r evidenceRecorder) Record(o Outcome) { r.log.Add(o.Evidence()) }

// Recorders is a Recorder that passes every Outcome to each of its
// recorders, in order.
type Recorders []Recorder

// Record implements Recorder.
func (rs Recorders) Record(o Outcome) {
	for _, r := range rs {
		r.Record(o)
	}
}

// Tracing (docs/OPERATIONS.md#tracing). With Options.TracerProvider set,
// every inference request gets one server span, continuing the caller's W3C
// trace context, and its upstream request carries the span's context so
// the engine's spans join the trace. Without it the router starts no span,
// adds no header and pays one nil check per request. A span holds ids,
// enums, statuses and timings only, like the decision record: never a URL,
// a query, a prompt or body, a credential, a client or member address.

// tracerName is the instrumentation scope of the router's spans.
const tracerName = "github.com/sluice-dev/sluice/internal/router"

// spanName is the name of an inference request's span.
const spanName = "sluice.request"

// The router's span attributes beside the HTTP semantic conventions'.
const (
	attrRequestID      = attribute.Key("sluice.request_id")
	attrAlias          = attribute.Key("sluice.alias")
	attrTier           = attribute.Key("sluice.tier")
	attrMember         = attribute.Key("sluice.member")
	attrResult         = attribute.Key("sluice.admission.result")
	attrSchedule       = attribute.Key("sluice.admission.schedule_seconds")
	attrSchedulerWhy   = attribute.Key("sluice.scheduler.reason")
	attrEligibleCount  = attribute.Key("sluice.scheduler.eligible_count")
	attrCode           = attribute.Key("sluice.code")
	attrEnd            = attribute.Key("sluice.stream_outcome")
	attrEjection       = attribute.Key("sluice.ejection")
	attrProtocolError  = attribute.Key("sluice.protocol_error")
	attrUpstreamStatus = attribute.Key("sluice.upstream.status_code")
	attrFirstByte      = attribute.Key("sluice.upstream.first_byte_seconds")
	attrFirstToken     = attribute.Key("sluice.upstream.first_token_seconds")
	attrPromptTokens   = attribute.Key("sluice.usage.prompt_tokens")
	attrOutputTokens   = attribute.Key("sluice.usage.completion_tokens")
)

// The events of an inference request's span.
const (
	// eventDispatched marks the end of admission and the start of the
	// upstream attempt (Outcome.Dispatch).
	eventDispatched = "sluice.dispatched"
	// eventUpstreamHeaders marks the member's response headers
	// (Outcome.FirstByte).
	eventUpstreamHeaders = "sluice.upstream.headers"
	// eventFirstToken marks the first generated content relayed
	// (Outcome.FirstToken).
	eventFirstToken = "sluice.upstream.first_token" //nolint:gosec // an event name, not a credential.
)

// resultHandedOver is the admission result on the span of a request whose
// tier's admission moved to a successor router (Options.HandedOver): it
// has no Outcome, as the successor serves it.
const resultHandedOver = "handed_over"

// traceContext reads and writes the W3C traceparent and tracestate headers.
var traceContext = propagation.TraceContext{}

// newTracer returns the router's tracer from tp, nil without one.
func newTracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		return nil
	}
	return tp.Tracer(tracerName, trace.WithInstrumentationVersion(version.Version()))
}

// requestTrace is an inference request's span. It travels in the request's
// Outcome (Outcome.trace) from the gates through the exchange to finish,
// which ends it.
type requestTrace struct {
	span trace.Span
}

// startTrace starts the span of an inference request at o.Start, as a
// child of the caller's trace context when r carries a valid one.
func (rt *Router) startTrace(r *http.Request, o *Outcome) *requestTrace {
	ctx := traceContext.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	_, span := rt.tracer.Start(ctx, spanName,
		trace.WithSpanKind(trace.SpanKindServer),
		trace.WithTimestamp(o.Start),
		trace.WithAttributes(semconv.HTTPRoute(r.URL.Path), requestMethod(r.Method)))
	return &requestTrace{span: span}
}

// requestMethod is the http.request.method attribute: the method when it is
// one HTTP defines, _OTHER otherwise (the caller chooses the string).
func requestMethod(m string) attribute.KeyValue {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return semconv.HTTPRequestMethodKey.String(m)
	}
	return semconv.HTTPRequestMethodOther
}

// inject replaces the outgoing request's traceparent and tracestate with
// the span's, so the member's own spans are its children.
func (t *requestTrace) inject(h http.Header) {
	delete(h, "Traceparent")
	delete(h, "Tracestate")
	traceContext.Inject(trace.ContextWithSpan(context.Background(), t.span), propagation.HeaderCarrier(h))
}

// upstreamHeaders records the status of the member's response headers,
// which may differ from the client's (exchange.answerUnsent).
func (t *requestTrace) upstreamHeaders(status int) {
	t.span.SetAttributes(attrUpstreamStatus.Int(status))
}

// end sets the span's attributes, events and status from the request's
// outcome and ends it at o.Start+o.Duration.
func (t *requestTrace) end(o *Outcome) {
	if t.span.IsRecording() {
		spanOutcome(t.span, o)
	}
	t.span.End(trace.WithTimestamp(o.Start.Add(o.Duration)))
}

// spanOutcome sets a span's attributes, events and status from its
// request's Outcome at the request's end: the one place a span reads the
// Outcome, so a new Outcome field reaches the span here. An empty Result
// means the request went to a successor router (resultHandedOver).
func spanOutcome(span trace.Span, o *Outcome) {
	attrs := make([]attribute.KeyValue, 0, 16)
	result := string(o.Result)
	if result == "" {
		result = resultHandedOver
	}
	attrs = append(attrs, attrRequestID.String(o.RequestID), attrResult.String(result))
	for _, a := range [...]struct {
		key   attribute.Key
		value string
	}{
		{attrAlias, o.Alias},
		{attrTier, o.Tier},
		{attrMember, o.Member},
		{attrCode, o.Code},
		{attrEnd, string(o.End)},
		{attrEjection, string(o.Ejection)},
		{attrProtocolError, string(o.ProtocolError)},
	} {
		if a.value != "" {
			attrs = append(attrs, a.key.String(a.value))
		}
	}
	if o.Status != 0 && o.Status != StatusClientClosedRequest { // 499 is recorded, never sent.
		attrs = append(attrs, semconv.HTTPResponseStatusCode(o.Status))
	}
	if o.Result == ResultAdmitted || o.Result == ResultNotAdmitted {
		attrs = append(attrs, attrSchedule.Float64(o.Schedule.Seconds()))
	}
	if d := o.Selection; d != nil {
		attrs = append(attrs, attrSchedulerWhy.String(string(d.Reason)), attrEligibleCount.Int(len(d.EligibleIDs)))
	}
	failure := ""
	switch {
	case o.Code != "" && o.Status >= http.StatusInternalServerError:
		failure = o.Code // a 5xx the router answered itself.
	case o.End != "" && o.End != EndComplete && o.End != EndClientGone:
		failure = string(o.End) // the exchange failed.
	}
	if failure != "" {
		attrs = append(attrs, semconv.ErrorTypeKey.String(failure))
	}
	span.SetAttributes(attrs...)
	if o.Result == ResultAdmitted {
		span.AddEvent(eventDispatched, trace.WithTimestamp(o.Start.Add(o.Dispatch)),
			trace.WithAttributes(attrSchedule.Float64(o.Schedule.Seconds())))
	}
	if o.FirstByte > 0 {
		span.AddEvent(eventUpstreamHeaders, trace.WithTimestamp(o.Start.Add(o.FirstByte)),
			trace.WithAttributes(attrFirstByte.Float64(o.FirstByte.Seconds())))
	}
	if o.FirstToken > 0 {
		span.AddEvent(eventFirstToken, trace.WithTimestamp(o.Start.Add(o.FirstToken)),
			trace.WithAttributes(attrFirstToken.Float64(o.FirstToken.Seconds())))
	}
	if o.HasUsage {
		span.SetAttributes(attrPromptTokens.Int64(o.Usage.Prompt), attrOutputTokens.Int64(o.Usage.Completion))
	}
	if failure != "" {
		span.SetStatus(codes.Error, failure)
	}
}

// endHandedOver ends the span of a request handed to a successor router,
// which records no Outcome here.
func (rt *Router) endHandedOver(o *Outcome) {
	if o.trace == nil {
		return
	}
	o.Duration = rt.clock.Since(o.Start)
	o.trace.end(o)
}
