package main

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/sluice-dev/sluice/internal/adminserver"
	"github.com/sluice-dev/sluice/internal/evidence"
	"github.com/sluice-dev/sluice/internal/pressure"
	"github.com/sluice-dev/sluice/internal/router"
	"github.com/sluice-dev/sluice/internal/telemetry"
	"github.com/sluice-dev/sluice/internal/version"
)

// observability is the router's evidence and telemetry: the decision log
// and its optional JSONL sink, and the Prometheus metrics. newObservability
// builds it before the pressure cache and the router, which it feeds;
// register adds its admin routes once both exist; close stops the sink's
// writer after the servers have shut down.
type observability struct {
	log      *evidence.Log
	sink     *evidence.FileSink // nil without --decision-log-file.
	fetches  *telemetry.FetchMetrics
	requests *telemetry.RequestMetrics
}

// newObservability opens the decision log (and its file, when configured).
func newObservability(cfg config) (*observability, error) {
	o := &observability{
		fetches:  telemetry.NewFetchMetrics(nil),
		requests: telemetry.NewRequestMetrics(),
	}
	var sink evidence.Sink
	if cfg.decisionLogFile != "" {
		s, err := evidence.OpenFileSink(evidence.FileSinkOptions{Path: cfg.decisionLogFile})
		if err != nil {
			return nil, err
		}
		o.sink, sink = s, s
	}
	log, err := evidence.NewLog(evidence.LogOptions{Size: cfg.decisionLogSize, Sink: sink})
	if err != nil {
		o.close(nil)
		return nil, err
	}
	o.log = log
	return o, nil
}

// collector wraps the pressure cache's collector to count its fetches.
func (o *observability) collector() pressure.Collector {
	return o.fetches.Wrap(pressure.HTTPCollector{})
}

// recorder is the router's Recorder: the decision log, then the request
// metrics.
func (o *observability) recorder() router.Recorder {
	return router.Recorders{router.EvidenceRecorder(o.log), o.requests}
}

// register adds GET /metrics (open) and the /admin/v1/decisions routes
// (authenticated) to the admin handler; the metrics include conns, the
// front door's connection counts, and the model-server gauges read from
// samples, the pressure cache whose collector o wraps.
func (o *observability) register(admin *adminserver.Admin, rt *router.Router, samples telemetry.PressureReader, conns *telemetry.ConnectionCollector) {
	var drops telemetry.SinkDropSource
	if o.sink != nil {
		drops = o.sink
	}
	reg := telemetry.NewRegistry(
		telemetry.NewCapacityCollector(telemetry.CapacityOptions{Source: admin, Targets: rt.Tiers(), Fetches: o.fetches}),
		telemetry.NewModelServerCollector(telemetry.ModelServerOptions{Source: admin, Pressure: samples, Targets: rt.Tiers(), Fetches: o.fetches}),
		o.requests,
		o.fetches,
		telemetry.NewDecisionLogCollector(drops, o.log),
		telemetry.NewBodyBufferCollector(rt),
		conns,
		version.BuildInfo(),
		// The Go runtime and process metrics (go_goroutines,
		// process_resident_memory_bytes, ...) carry no per-request labels.
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	admin.HandlePublic("GET /metrics", telemetry.Handler(reg))
	o.log.RegisterRoutes(admin.Handle)
}

// close stops the file sink's writer once it wrote what was queued. Call it
// after the front door has shut down, so every request's record is in.
func (o *observability) close(logger *slog.Logger) {
	if o.sink == nil {
		return
	}
	if err := o.sink.Close(); err != nil && logger != nil {
		logger.Error("decision log file not closed cleanly", "error", err.Error())
	}
}
