// Package telemetry owns the router's Prometheus metrics
// (docs/EVIDENCE.md#6-metrics), built with client_golang: a collector that
// projects the capacity view (admission counts, ceilings, readiness and
// cached pressure) at scrape time, the request counters and histograms fed
// once per request through the router's Recorder seam, the pressure fetch
// counters and sample ages fed by a wrapper around the pressure cache's
// Collector, the decision log's drop counters, and the model-server
// gauges a cluster picker scrapes (docs/OPERATIONS.md#model-server-gauges).
// Handler serves them on the admin listener.
//
// Labels are limited to tier, member, outcome, reason, freshness, result
// and model_name, whose values come from the configuration or from closed
// enum sets. The package must never put a request id, URL, address, credential,
// prompt, body, raw metrics text or Go error text in a metric; never
// rerank or change an admission count or cursor when scraped (a scrape
// reads one admission Snapshot and one pressure Peek per tier and holds no
// lock while it reads); never schedule a pressure refresh when scraped,
// but for the model-server gauges, which read the pressure cache as a
// request does (Snapshot, never waiting) because a picker routes by them;
// and never block the request path.
package telemetry
