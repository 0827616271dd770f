// Package readiness qualifies the members of every tier on this node: a
// member is ready when its GET /v1/models lists the tier's served model id
// exactly, observed recently.
//
// It owns the probes and their latest results. Each registered member has one
// prober goroutine, started by Run and stopped by Run's context, Close or the
// member's removal; it probes once at start, then every interval and whenever
// Recheck (passive ejection, readmission) or ProbeNow asks. Recheck makes the
// member not ready until a probe that started after it passes. The request
// path only reads completed results through Ready.
//
// The package must never probe on the request path, hold its lock during I/O,
// start a goroutine per request or per probe, treat a prefix or
// case-insensitive match as the served model, keep a response body or error
// text, or let a result older than StaleIntervals intervals count as ready.
package readiness
