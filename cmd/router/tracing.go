package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluice-dev/sluice/internal/version"
)

// The OpenTelemetry environment variables the router reads itself; the SDK
// and the OTLP exporters read the others (endpoint, headers, TLS, timeout,
// sampler, batching, resource attributes). docs/OPERATIONS.md#tracing.
const (
	envSDKDisabled     = "OTEL_SDK_DISABLED"
	envTracesExporter  = "OTEL_TRACES_EXPORTER"
	envEndpoint        = "OTEL_EXPORTER_OTLP_ENDPOINT"
	envTracesEndpoint  = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	envProtocol        = "OTEL_EXPORTER_OTLP_PROTOCOL"
	envTracesProtocol  = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	protocolGRPC       = "grpc"
	protocolHTTP       = "http/protobuf"
	defaultServiceName = "sluice-router"
)

// tracingShutdownTimeout bounds the flush of the spans still queued when
// the router stops, after both servers shut down: a collector that does not
// answer must not hold the pod past its termination grace period. With the
// defaults (--shutdown-grace 5 s, --shutdown-timeout 30 s, the admin
// server's 5 s) this stays below the DaemonSet's 45 s; a collector answers
// a batch in milliseconds.
const tracingShutdownTimeout = 2 * time.Second

// tracingErrorMessage is the log message of the SDK's own errors.
const tracingErrorMessage = "tracing error"

// tracingConfig is what the environment asks of tracing.
type tracingConfig struct {
	enabled  bool
	protocol string // protocolGRPC or protocolHTTP; set when enabled.
}

// tracingFromEnv decides from the environment whether the router traces.
// OTEL_SDK_DISABLED=true turns tracing off whatever else is set. Otherwise
// OTEL_TRACES_EXPORTER decides when it is set: "otlp" on, "none" off, any
// other exporter is an error; when it is not set, tracing is on exactly
// when OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT is
// set. The protocol is OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else
// OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf; grpc and http/protobuf
// are supported.
func tracingFromEnv(getenv func(string) string) (tracingConfig, error) {
	env := func(k string) string { return strings.TrimSpace(getenv(k)) }
	if strings.EqualFold(env(envSDKDisabled), "true") {
		return tracingConfig{}, nil
	}
	if exporters := env(envTracesExporter); exporters != "" {
		on := false
		for e := range strings.SplitSeq(exporters, ",") {
			switch e = strings.ToLower(strings.TrimSpace(e)); e {
			case "otlp":
				on = true
			case "none":
			default:
				return tracingConfig{}, fmt.Errorf("%s=%q: the router exports traces with otlp only (or none)", envTracesExporter, e)
			}
		}
		if !on {
			return tracingConfig{}, nil
		}
	} else if env(envTracesEndpoint) == "" && env(envEndpoint) == "" {
		return tracingConfig{}, nil
	}
	protocol := env(envTracesProtocol)
	if protocol == "" {
		protocol = env(envProtocol)
	}
	switch protocol {
	case "":
		protocol = protocolHTTP
	case protocolGRPC, protocolHTTP:
	default:
		return tracingConfig{}, fmt.Errorf("OTLP protocol %q: the router exports traces with %s or %s", protocol, protocolGRPC, protocolHTTP)
	}
	return tracingConfig{enabled: true, protocol: protocol}, nil
}

// tracing is the router's tracer provider; the zero value is tracing off.
type tracing struct {
	tp *sdktrace.TracerProvider // nil when off.
}

// newTracing creates the OTLP exporter and the tracer provider when cfg
// enables tracing, and nothing otherwise. The SDK's own errors (a failed
// export, an unknown sampler) are logged at WARN.
func newTracing(ctx context.Context, cfg tracingConfig, logger *slog.Logger) (*tracing, error) {
	if !cfg.enabled {
		return &tracing{}, nil
	}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		logger.Warn(tracingErrorMessage, "error", err.Error())
	}))
	var (
		exp sdktrace.SpanExporter
		err error
	)
	if cfg.protocol == protocolGRPC {
		exp, err = otlptracegrpc.New(ctx)
	} else {
		exp, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("trace exporter: %w", err)
	}
	// The router's name and version, unless OTEL_SERVICE_NAME or
	// OTEL_RESOURCE_ATTRIBUTES say otherwise (the later detector wins).
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName(defaultServiceName), semconv.ServiceVersion(version.Version())),
		resource.WithFromEnv())
	if err != nil {
		logger.Warn("tracing resource attributes partly ignored", "error", err.Error())
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	logger.Info("tracing on", "protocol", cfg.protocol)
	return &tracing{tp: tp}, nil
}

// provider returns the router's TracerProvider: nil when tracing is off.
func (t *tracing) provider() trace.TracerProvider {
	if t.tp == nil {
		return nil
	}
	return t.tp
}

// shutdown exports the spans still queued, waiting at most
// tracingShutdownTimeout, and stops the exporter. Call it after the front
// door has shut down, so every request's span has ended.
func (t *tracing) shutdown(logger *slog.Logger) {
	if t.tp == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), tracingShutdownTimeout)
	defer cancel()
	if err := t.tp.Shutdown(ctx); err != nil {
		logger.Warn("spans not all exported at shutdown", "error", err.Error())
	}
}
