package router

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluice-dev/sluice/internal/version"
)

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
