// Package readiness qualifies the members of every tier on this node: a
// member is ready when its GET /v1/models lists the tier's served model id
// exactly, observed recently.
//
// It owns what a probe is (Target, the HTTP prober) and what a result means
// (ready within StaleIntervals intervals); internal/memberpoll runs the
// probes on its bounded workers, single-flight per member. Run starts them:
// every member is probed once at start, then every interval and whenever
// Recheck (passive ejection, readmission) or ProbeNow asks; Run's context,
// Close and a member's removal stop them. Recheck makes the member not ready
// until a probe that started after it passes. The request path only reads
// completed results through Ready.
//
// The package must never probe on the request path, hold its lock during I/O,
// start a goroutine per request or per probe, treat a prefix or
// case-insensitive match as the served model, keep a response body or error
// text, or let a result older than StaleIntervals intervals count as ready.
package readiness
