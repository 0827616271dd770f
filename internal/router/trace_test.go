package router

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/apikeys"
	"github.com/sluice-dev/sluice/internal/source/sourcetest"
)

// The caller's trace context in the tracing tests.
const (
	callerTraceID    = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpanID     = "00f067aa0ba902b7"
	callerTracestate = "vendor=opaque"
)

// newTracedFixture returns a fixture whose router traces into an in-memory
// exporter. The exporter is a syncer: a span is in it when it ends, and the
// router ends a request's span before recording its outcome, so once
// f.outcome returned the span is there.
func newTracedFixture(t *testing.T, o fixtureOptions, opts ...sdktrace.TracerProviderOption) (*fixture, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(append([]sdktrace.TracerProviderOption{sdktrace.WithSyncer(exp)}, opts...)...)
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	o.tracer = tp
	return newFixture(t, o), exp
}

// onlySpan returns the one span exported.
func onlySpan(t *testing.T, exp *tracetest.InMemoryExporter) tracetest.SpanStub {
	t.Helper()
	spans := exp.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("%d spans exported, want 1", len(spans))
	}
	return spans[0]
}

// attrMap returns a span's attributes by key.
func attrMap(kvs []attribute.KeyValue) map[string]attribute.Value {
	m := make(map[string]attribute.Value, len(kvs))
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value
	}
	return m
}

// TestTraceAdmittedRequest proves an admitted request's span continues the
// caller's trace, that the member receives a traceparent naming that span
// as parent (and the caller's tracestate), and that the span's attributes
// are exactly the ids, enums, statuses and timings listed, with no URL,
// query, prompt, key or address among them or among its events'.
func TestTraceAdmittedRequest(t *testing.T) {
	keys, _ := apikeys.Parse([]byte("sk-trace-secret-key\n"))
	f, exp := newTracedFixture(t, fixtureOptions{keys: keys})
	up := newUpstream(t, "gpu0", nil)
	f.apply(sourcetest.Tier("ns/llama", []string{"llama"}, v1alpha1.StrategyCapacity,
		[]sourcetest.Member{{ID: "gpu0", Endpoint: up.srv.URL, Max: 2}, {ID: "gpu1", Endpoint: up.srv.URL, Max: 2}}))

	const prompt = "the-secret-prompt-text"
	body := `{"model":"llama","messages":[{"role":"user","content":"` + prompt + `"}]}`
	resp, _ := f.mustPost(pathChatCompletions+"?api-version=query-value", body, http.Header{
		"Authorization": {"Bearer sk-trace-secret-key"},
		"Traceparent":   {"00-" + callerTraceID + "-" + callerSpanID + "-01"},
		"Tracestate":    {callerTracestate},
	})
	o := f.outcome()
	if resp.StatusCode != http.StatusOK || o.Result != ResultAdmitted || (o.Member != "gpu0" && o.Member != "gpu1") {
		t.Fatalf("status %d, result %s, member %q", resp.StatusCode, o.Result, o.Member)
	}
	s := onlySpan(t, exp)

	// The caller's trace continues.
	sc := s.SpanContext
	if sc.TraceID().String() != callerTraceID || s.Parent.SpanID().String() != callerSpanID || !s.Parent.IsRemote() {
		t.Errorf("span %s/%s, parent %s: want trace %s, parent %s (remote)", sc.TraceID(), sc.SpanID(), s.Parent.SpanID(), callerTraceID, callerSpanID)
	}
	if s.Name != spanName || s.SpanKind != trace.SpanKindServer || s.Status.Code != codes.Unset {
		t.Errorf("span %q kind %v status %v", s.Name, s.SpanKind, s.Status)
	}
	if !s.StartTime.Equal(o.Start) || !s.EndTime.Equal(o.Start.Add(o.Duration)) {
		t.Errorf("span from %v to %v, outcome from %v for %v", s.StartTime, s.EndTime, o.Start, o.Duration)
	}

	// The member's request is a child of the router's span, written on the
	// wire by the member client.
	seen := up.seen[0]
	if got, want := seen.header.Values("Traceparent"), "00-"+callerTraceID+"-"+sc.SpanID().String()+"-01"; len(got) != 1 || got[0] != want {
		t.Errorf("member got traceparent %q, want %q", got, want)
	}
	if got := seen.header.Values("Tracestate"); len(got) != 1 || got[0] != callerTracestate {
		t.Errorf("member got tracestate %q, want %q", got, callerTracestate)
	}

	// Exactly these attributes.
	got := attrMap(s.Attributes)
	want := map[string]attribute.Value{
		"http.route":                      attribute.StringValue(pathChatCompletions),
		"http.request.method":             attribute.StringValue("POST"),
		"http.response.status_code":       attribute.IntValue(200),
		"sluice.request_id":               attribute.StringValue(o.RequestID),
		"sluice.admission.result":         attribute.StringValue("admitted"),
		"sluice.alias":                    attribute.StringValue("llama"),
		"sluice.tier":                     attribute.StringValue("ns/llama"),
		"sluice.member":                   attribute.StringValue("gpu0"),
		"sluice.stream_outcome":           attribute.StringValue("complete"),
		"sluice.scheduler.reason":         attribute.StringValue("selected"),
		"sluice.scheduler.eligible_count": attribute.IntValue(2),
		"sluice.upstream.status_code":     attribute.IntValue(200),
	}
	if v, ok := got[string(attrSchedule)]; !ok || v.Type() != attribute.FLOAT64 || v.AsFloat64() != o.Schedule.Seconds() {
		t.Errorf("%s = %v, want %v", attrSchedule, v.String(), o.Schedule.Seconds())
	}
	delete(got, string(attrSchedule))
	for k, v := range want {
		if got[k] != v {
			t.Errorf("attribute %s = %q, want %q", k, got[k].String(), v.String())
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected attribute %s = %q", k, v.String())
		}
	}

	// Events: the dispatch and the member's response headers, at the
	// outcome's times.
	if len(s.Events) != 2 || s.Events[0].Name != eventDispatched || s.Events[1].Name != eventUpstreamHeaders ||
		!s.Events[0].Time.Equal(o.Start.Add(o.Dispatch)) || !s.Events[1].Time.Equal(o.Start.Add(o.FirstByte)) {
		t.Errorf("events %+v", s.Events)
	}

	// Nothing secret or addressable anywhere in the span.
	member, _ := url.Parse(up.srv.URL)
	client, _, _ := net.SplitHostPort(strings.TrimPrefix(f.front.URL, "http://"))
	forbidden := []string{prompt, "sk-trace-secret-key", "Bearer", "query-value", "?", member.Host, member.Port(), client, "http://"}
	all := append([]attribute.KeyValue(nil), s.Attributes...)
	for _, e := range s.Events {
		all = append(all, e.Attributes...)
	}
	for _, kv := range all {
		for _, bad := range forbidden {
			if strings.Contains(kv.Value.String(), bad) {
				t.Errorf("attribute %s = %q contains %q", kv.Key, kv.Value.String(), bad)
			}
		}
	}
}

// TestTraceRefusedAndFailed proves a request the router answers itself gets
// a span with its result and code: refused before alias resolution
// (without alias or tier), not admitted (503, status Error: among them a
// request whose only member refused the connection), and an exchange that
// failed (502, status Error). A request without a
// traceparent starts a trace of its own.
func TestTraceRefusedAndFailed(t *testing.T) {
	keys, _ := apikeys.Parse([]byte("sk-key\n"))
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close() // refuses connections.
	tests := []struct {
		desc      string
		model     string
		key       string
		mutate    func(*v1alpha1.ReplicaTierSpec)
		endpoint  string
		closes    bool // the member closes the connection after taking the request.
		noTier    bool // refused before alias resolution.
		wantAttrs map[string]attribute.Value
		wantError string // the span's status description, "" for Unset.
	}{
		{
			desc: "bad key", model: "llama", key: "wrong", noTier: true,
			wantAttrs: map[string]attribute.Value{
				"sluice.admission.result":   attribute.StringValue("refused"),
				"sluice.code":               attribute.StringValue("invalid_api_key"),
				"http.response.status_code": attribute.IntValue(401),
			},
		},
		{
			desc: "unknown model", model: "nope", key: "sk-key", noTier: true,
			wantAttrs: map[string]attribute.Value{
				"sluice.admission.result":   attribute.StringValue("refused"),
				"sluice.code":               attribute.StringValue("model_not_found"),
				"http.response.status_code": attribute.IntValue(404),
			},
		},
		{
			desc: "tier quiesced", model: "llama", key: "sk-key",
			mutate: func(s *v1alpha1.ReplicaTierSpec) { s.Quiesce = &v1alpha1.QuiesceSpec{Tier: "maintenance"} },
			wantAttrs: map[string]attribute.Value{
				"sluice.admission.result":   attribute.StringValue("not_admitted"),
				"sluice.code":               attribute.StringValue("tier_quiesced"),
				"sluice.alias":              attribute.StringValue("llama"),
				"sluice.tier":               attribute.StringValue("ns/llama"),
				"http.response.status_code": attribute.IntValue(503),
				"error.type":                attribute.StringValue("tier_quiesced"),
			},
			wantError: "tier_quiesced",
		},
		{
			// The only member never saw the request: admitted again
			// without it, the request is not admitted.
			desc: "member refuses the connection", model: "llama", key: "sk-key", endpoint: closed.URL,
			wantAttrs: map[string]attribute.Value{
				"sluice.admission.result":   attribute.StringValue("not_admitted"),
				"sluice.code":               attribute.StringValue("no_eligible_member"),
				"http.response.status_code": attribute.IntValue(503),
				"error.type":                attribute.StringValue("no_eligible_member"),
			},
			wantError: "no_eligible_member",
		},
		{
			desc: "member closes the connection after taking the request", model: "llama", key: "sk-key", closes: true,
			wantAttrs: map[string]attribute.Value{
				"sluice.admission.result":   attribute.StringValue("admitted"),
				"sluice.code":               attribute.StringValue("upstream_unavailable"),
				"sluice.member":             attribute.StringValue("gpu0"),
				"sluice.stream_outcome":     attribute.StringValue("upstream_unavailable"),
				"sluice.ejection":           attribute.StringValue("connection_closed"),
				"http.response.status_code": attribute.IntValue(502),
				"error.type":                attribute.StringValue("upstream_unavailable"),
			},
			wantError: "upstream_unavailable",
		},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			f, exp := newTracedFixture(t, fixtureOptions{keys: keys})
			up := newUpstream(t, "gpu0", nil)
			if tt.closes {
				up.handle(func(w http.ResponseWriter, _ *http.Request) { closeConnection(w) })
			}
			endpoint := up.srv.URL
			if tt.endpoint != "" {
				endpoint = tt.endpoint
			}
			var mutate []func(*v1alpha1.ReplicaTierSpec)
			if tt.mutate != nil {
				mutate = append(mutate, tt.mutate)
			}
			f.apply(sourcetest.Tier("ns/llama", []string{"llama"}, "", []sourcetest.Member{{ID: "gpu0", Endpoint: endpoint}}, mutate...))
			f.mustPost(pathChatCompletions, chat(tt.model), http.Header{"Authorization": {"Bearer " + tt.key}})
			o := f.outcome()
			s := onlySpan(t, exp)
			if s.Parent.IsValid() || !s.SpanContext.IsValid() {
				t.Errorf("span parent %v, context %v: want a new trace", s.Parent, s.SpanContext)
			}
			got := attrMap(s.Attributes)
			for k, v := range tt.wantAttrs {
				if got[k] != v {
					t.Errorf("attribute %s = %q, want %q", k, got[k].String(), v.String())
				}
			}
			if tt.noTier {
				for _, k := range []string{"sluice.alias", "sluice.tier", "sluice.member"} {
					if v, ok := got[k]; ok {
						t.Errorf("refused before alias resolution, yet %s = %q", k, v.String())
					}
				}
			}
			if got["sluice.request_id"] != attribute.StringValue(o.RequestID) {
				t.Errorf("sluice.request_id = %q, want %q", got["sluice.request_id"].String(), o.RequestID)
			}
			wantStatus := codes.Unset
			if tt.wantError != "" {
				wantStatus = codes.Error
			}
			if s.Status.Code != wantStatus || s.Status.Description != tt.wantError {
				t.Errorf("span status %v %q, want %v %q", s.Status.Code, s.Status.Description, wantStatus, tt.wantError)
			}
		})
	}
}

// TestTraceSampledOut proves a request the sampler drops exports no span
// and still passes a trace context upstream (not sampled), so the trace
// stays whole downstream.
func TestTraceSampledOut(t *testing.T) {
	f, exp := newTracedFixture(t, fixtureOptions{}, sdktrace.WithSampler(sdktrace.NeverSample()))
	up := newUpstream(t, "gpu0", nil)
	f.apply(sourcetest.Tier("ns/llama", []string{"llama"}, "", []sourcetest.Member{{ID: "gpu0", Endpoint: up.srv.URL}}))
	f.mustPost(pathChatCompletions, chat("llama"), nil)
	f.outcome()
	if n := len(exp.GetSpans()); n != 0 {
		t.Errorf("%d spans exported with a sampler that drops all", n)
	}
	tp := up.seen[0].header.Values("Traceparent")
	if len(tp) != 1 || !strings.HasPrefix(tp[0], "00-") || !strings.HasSuffix(tp[0], "-00") {
		t.Errorf("member got traceparent %q, want one not sampled", tp)
	}
}

// TestTraceOff proves a router without a TracerProvider adds no trace
// header: a request without one reaches the member without one, and the
// caller's traceparent and tracestate are forwarded unchanged.
func TestTraceOff(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	if f.rt.tracer != nil {
		t.Fatal("a router without a TracerProvider has a tracer")
	}
	up := newUpstream(t, "gpu0", nil)
	f.apply(sourcetest.Tier("ns/llama", []string{"llama"}, "", []sourcetest.Member{{ID: "gpu0", Endpoint: up.srv.URL}}))
	caller := "00-" + callerTraceID + "-" + callerSpanID + "-01"
	for i, h := range []http.Header{nil, {"Traceparent": {caller}, "Tracestate": {callerTracestate}}} {
		f.mustPost(pathChatCompletions, chat("llama"), h)
		if o := f.outcome(); o.trace != nil {
			t.Errorf("request %d: an untraced request's outcome carries a span", i)
		}
		seen := up.waitArrival(t)
		for _, k := range []string{"Traceparent", "Tracestate"} {
			if got, want := seen.header.Values(k), h.Values(k); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("request %d: member got %s %q, want %q", i, k, got, want)
			}
		}
	}
}

// TestTraceHandedOver proves a request handed to a successor router (its
// tier's admission moved after it arrived) gets a span too, with the result
// handed_over, and records no Outcome here.
func TestTraceHandedOver(t *testing.T) {
	f, exp := newTracedFixture(t, fixtureOptions{})
	up := newUpstream(t, "gpu0", nil)
	f.rt.handedOver = func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) }
	f.apply(sourcetest.Tier("ns/llama", []string{"llama"}, "", []sourcetest.Member{{ID: "gpu0", Endpoint: up.srv.URL, Max: 1}}))
	ts, _ := f.rt.Tiers().Table().Lookup("ns/llama")
	h, _, err := ts.Admission().HandOver(make(chan struct{}, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Cancel()
	// The hook's answer is buffered until the handler returns, after the
	// span ended.
	if resp, _ := f.mustPost(pathChatCompletions, chat("llama"), nil); resp.StatusCode != http.StatusTeapot {
		t.Fatalf("status %d, want the hook's 418", resp.StatusCode)
	}
	s := onlySpan(t, exp)
	got := attrMap(s.Attributes)
	if got["sluice.admission.result"] != attribute.StringValue(resultHandedOver) || got["sluice.tier"] != attribute.StringValue("ns/llama") ||
		s.Status.Code != codes.Unset || s.EndTime.Before(s.StartTime) {
		t.Errorf("span attributes %v, status %v, from %v to %v", s.Attributes, s.Status, s.StartTime, s.EndTime)
	}
	select {
	case o := <-f.outcomes:
		t.Errorf("a handed-over request recorded %+v", o)
	default:
	}
}

// TestTraceFirstTokenAndUsage proves a generation's span carries its first
// token as an event at the outcome's time and the response's token usage.
func TestTraceFirstTokenAndUsage(t *testing.T) {
	f, exp := newTracedFixture(t, fixtureOptions{})
	up := newUpstream(t, "gpu0", nil)
	up.handle(scriptedStream(nil, roleEvent+helEvent+usageEvent))
	f.apply(sourcetest.Tier("ns/llama", []string{"llama"}, v1alpha1.StrategyRoundRobin, []sourcetest.Member{{ID: "gpu0", Endpoint: up.srv.URL, Max: 1}}))
	if resp, body := f.mustPost(pathChatCompletions, chat("llama"), nil); resp.StatusCode != http.StatusOK || string(body) != roleEvent+helEvent+usageEvent {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}
	o := f.outcome()
	s := onlySpan(t, exp)
	if o.FirstToken <= 0 || len(s.Events) != 3 || s.Events[2].Name != eventFirstToken || !s.Events[2].Time.Equal(o.Start.Add(o.FirstToken)) {
		t.Fatalf("first token %v, events %+v", o.FirstToken, s.Events)
	}
	got := attrMap(s.Attributes)
	if got[string(attrPromptTokens)] != attribute.Int64Value(12) || got[string(attrOutputTokens)] != attribute.Int64Value(3) {
		t.Fatalf("usage attributes %v, want 12 prompt and 3 completion tokens", got)
	}
}
