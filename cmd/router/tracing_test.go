package main

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-dev/sluice/internal/version"
)

// TestTracingFromEnv proves the environment's decision: off by default,
// on with an OTLP endpoint or OTEL_TRACES_EXPORTER=otlp, off with
// OTEL_TRACES_EXPORTER=none whatever the endpoint, off whenever
// OTEL_SDK_DISABLED=true, and http/protobuf unless a protocol is named.
func TestTracingFromEnv(t *testing.T) {
	on := func(protocol string) tracingConfig { return tracingConfig{enabled: true, protocol: protocol} }
	tests := []struct {
		desc    string
		env     map[string]string
		want    tracingConfig
		wantErr string
	}{
		{desc: "nothing set", env: nil, want: tracingConfig{}},
		{desc: "unrelated OTLP settings", env: map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "a=b", "OTEL_TRACES_SAMPLER": "always_on"}, want: tracingConfig{}},
		{desc: "blank endpoint", env: map[string]string{envEndpoint: " "}, want: tracingConfig{}},
		{desc: "endpoint", env: map[string]string{envEndpoint: "http://collector:4318"}, want: on(protocolHTTP)},
		{desc: "traces endpoint", env: map[string]string{envTracesEndpoint: "http://collector:4318/v1/traces"}, want: on(protocolHTTP)},
		{desc: "exporter otlp", env: map[string]string{envTracesExporter: "otlp"}, want: on(protocolHTTP)},
		{desc: "exporter list with otlp", env: map[string]string{envTracesExporter: "none, OTLP"}, want: on(protocolHTTP)},
		{desc: "exporter none wins over an endpoint", env: map[string]string{envTracesExporter: "none", envEndpoint: "http://c:4318"}, want: tracingConfig{}},
		{desc: "unsupported exporter", env: map[string]string{envTracesExporter: "zipkin"}, wantErr: "zipkin"},
		{desc: "grpc", env: map[string]string{envEndpoint: "http://c:4317", envProtocol: "grpc"}, want: on(protocolGRPC)},
		{desc: "traces protocol wins", env: map[string]string{envEndpoint: "http://c:4317", envProtocol: "grpc", envTracesProtocol: "http/protobuf"}, want: on(protocolHTTP)},
		{desc: "traces protocol grpc", env: map[string]string{envTracesExporter: "otlp", envTracesProtocol: "grpc"}, want: on(protocolGRPC)},
		{desc: "unsupported protocol", env: map[string]string{envEndpoint: "http://c:4318", envProtocol: "http/json"}, wantErr: "http/json"},
		{desc: "unsupported protocol while off", env: map[string]string{envProtocol: "http/json"}, want: tracingConfig{}},
		{desc: "sdk disabled wins over an endpoint", env: map[string]string{envSDKDisabled: "true", envEndpoint: "http://c:4318"}, want: tracingConfig{}},
		{desc: "sdk disabled wins over the exporter", env: map[string]string{envSDKDisabled: "TRUE", envTracesExporter: "otlp"}, want: tracingConfig{}},
		{desc: "sdk disabled wins over a bad exporter", env: map[string]string{envSDKDisabled: "true", envTracesExporter: "zipkin"}, want: tracingConfig{}},
		{desc: "sdk not disabled", env: map[string]string{envSDKDisabled: "false", envEndpoint: "http://c:4318"}, want: on(protocolHTTP)},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			got, err := tracingFromEnv(func(k string) string { return tt.env[k] })
			switch {
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one naming %q", err, tt.wantErr)
				}
			case err != nil || got != tt.want:
				t.Fatalf("tracingFromEnv = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

// TestTracingOffCreatesNothing proves tracing off creates no provider (and
// so no exporter), hands the router a nil TracerProvider, and shuts down as
// a no-op.
func TestTracingOffCreatesNothing(t *testing.T) {
	tr, err := newTracing(context.Background(), tracingConfig{}, slog.New(slog.DiscardHandler))
	if err != nil || tr.tp != nil || tr.provider() != nil {
		t.Fatalf("tracing off: %+v, provider %v, %v", tr, tr.provider(), err)
	}
	tr.shutdown(slog.New(slog.DiscardHandler))
}

// TestTracingBothProtocols proves either protocol builds a provider; no
// connection is made before a span is exported.
func TestTracingBothProtocols(t *testing.T) {
	t.Setenv(envEndpoint, "http://127.0.0.1:1")
	logger := slog.New(slog.DiscardHandler)
	for _, protocol := range []string{protocolGRPC, protocolHTTP} {
		tr, err := newTracing(context.Background(), tracingConfig{enabled: true, protocol: protocol}, logger)
		if err != nil || tr.provider() == nil {
			t.Fatalf("%s: %+v, %v", protocol, tr, err)
		}
		tr.shutdown(logger)
	}
}

// collector is a fake OTLP/HTTP trace collector on loopback.
type collector struct {
	srv   *httptest.Server
	mu    sync.Mutex
	spans []*tracepb.ResourceSpans
}

func newCollector(t *testing.T) *collector {
	t.Helper()
	c := &collector{}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
			http.NotFound(w, r)
			return
		}
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		data, err := io.ReadAll(body)
		var req collectortrace.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(data, &req)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		c.spans = append(c.spans, req.GetResourceSpans()...)
		c.mu.Unlock()
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(c.srv.Close)
	return c
}

// TestRunExportsSpans runs the command with an OTLP endpoint in the
// environment (http/protobuf, the default) and a fake collector: the
// request's span, with the router's service name and version, reaches the
// collector by the time run returned (the shutdown flushes the batch,
// whose own delay is 5 s), and the engine got a traceparent naming that
// span as parent.
func TestRunExportsSpans(t *testing.T) {
	col := newCollector(t)
	for _, k := range []string{"OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG",
		envSDKDisabled, envTracesExporter, envTracesEndpoint, envProtocol, envTracesProtocol} {
		t.Setenv(k, "") // restored when the test ends.
		_ = os.Unsetenv(k)
	}
	t.Setenv(envEndpoint, col.srv.URL)

	traceparent := make(chan string, 1)
	probed := make(chan struct{}, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if servedModelList(w, r, probed) {
			return
		}
		traceparent <- r.Header.Get("Traceparent")
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"ok"}`)
	}))
	defer up.Close()
	s, result, cancel, logs := startRouter(t, up.URL)
	defer cancel()
	waitReady(t, s, probed)

	resp := postChat(t, s.front, `{"model":"llama"}`)
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	var sent string
	select {
	case sent = <-traceparent:
	case <-time.After(failSafe):
		t.Fatal("no request reached the engine")
	}

	cancel() // SIGTERM.
	select {
	case err := <-result:
		if err != nil {
			t.Fatalf("run = %v", err)
		}
	case <-time.After(failSafe):
		t.Fatal("run did not return")
	}

	col.mu.Lock()
	defer col.mu.Unlock()
	var found *tracepb.Span
	var service string
	for _, rs := range col.spans {
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				if sp.GetName() == "sluice.request" {
					found = sp
				}
			}
		}
	}
	if found == nil {
		t.Fatalf("no sluice.request span reached the collector; logs: %s", logs)
	}
	if service != defaultServiceName {
		t.Errorf("service.name = %q, want %q", service, defaultServiceName)
	}
	// traceparent: 00-TRACEID-PARENTID-FLAGS.
	parts := strings.Split(sent, "-")
	if len(parts) != 4 || parts[1] != hex.EncodeToString(found.GetTraceId()) || parts[2] != hex.EncodeToString(found.GetSpanId()) {
		t.Errorf("engine got traceparent %q, span %s/%s", sent, hex.EncodeToString(found.GetTraceId()), hex.EncodeToString(found.GetSpanId()))
	}
	if strings.Contains(logs.String(), tracingErrorMessage) {
		t.Errorf("the SDK reported errors: %s", logs)
	}
}

// TestTracingResource proves the spans' resource: service.name
// sluice-router and the router's version, unless OTEL_RESOURCE_ATTRIBUTES
// or OTEL_SERVICE_NAME (which wins over both) name the service.
func TestTracingResource(t *testing.T) {
	for _, tt := range []struct{ name, attrs, want string }{
		{want: defaultServiceName},
		{name: "custom-router", want: "custom-router"},
		{attrs: "service.name=from-attributes,deployment.environment=test", want: "from-attributes"},
		{name: "custom-router", attrs: "service.name=from-attributes", want: "custom-router"},
	} {
		t.Run(tt.want, func(t *testing.T) {
			t.Setenv("OTEL_SERVICE_NAME", tt.name)
			t.Setenv("OTEL_RESOURCE_ATTRIBUTES", tt.attrs)
			// Nothing is exported: the span below never ends.
			t.Setenv(envEndpoint, "http://127.0.0.1:1")
			logger := slog.New(slog.DiscardHandler)
			tr, err := newTracing(context.Background(), tracingConfig{enabled: true, protocol: protocolHTTP}, logger)
			if err != nil {
				t.Fatal(err)
			}
			defer tr.shutdown(logger)
			_, span := tr.provider().Tracer("test").Start(context.Background(), "probe")
			ro, ok := span.(sdktrace.ReadOnlySpan)
			if !ok {
				t.Fatalf("span %T is not the SDK's", span)
			}
			got := map[string]string{}
			for _, kv := range ro.Resource().Attributes() {
				got[string(kv.Key)] = kv.Value.AsString()
			}
			if got["service.name"] != tt.want || got["service.version"] != version.Version() {
				t.Errorf("resource %v, want service.name %q and service.version %q", got, tt.want, version.Version())
			}
		})
	}
}
