// Command soak is sluice's chaos soak (`make soak`, docs/RELIABILITY.md).
//
// It starts the real router binary in files mode, several enginesim
// processes with per-request faults and request logs enabled, and a driver
// that mixes streaming and non-streaming requests through the router for a
// bounded duration while it injects faults: client disconnects mid-stream,
// engine resets and truncated streams mid-body, stalls that hit the tier's
// idle and response header timeouts, engine kills (SIGKILL) and restarts on
// the same port, hot reconfiguration (ceilings, members, strategy), quiesce
// and readmit flips of members and of the tier, and drain waits through the
// admin API.
//
// It checks, continuously and at the end: no lease leaked, no engine serving
// more requests than its member's ceiling in force, every client got the
// engine's bytes or a documented error, no request id reached two engines or
// one engine twice, the router's goroutines, open files and resident memory
// back near their baseline, and the router still serving. It prints one
// summary line, writes a JSON report, and exits non-zero naming every
// invariant that failed.
//
// The soak never retries, never sends traffic beyond loopback, bounds every
// wait, and stops every process it started on every exit path.
package main
