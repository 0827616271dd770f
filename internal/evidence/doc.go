// Package evidence owns sluice's decision records: one Record per inference
// request saying what the router decided and why, the bounded in-memory Log
// (a ring buffer) that keeps the latest ones, the FileSink that appends them
// to a JSONL file, the one-line text format, the summaries, the strict
// ingestion of captured JSON, and the admin endpoints that serve them.
//
// A Record's optional scheduler payload is the scheduler.Decision the
// request's Capacity lease already held: this package only checks, copies
// and projects it. Every surface — memory, the line format, the JSON
// serialization (and so the file) and the summaries — accepts the payload
// through the same check (see Record.SchedulerValid) and drops an invalid
// payload while keeping the rest of the record.
//
// The package must never recompute or rerank a decision, read admission or
// pressure state, block the request path (Log.Add takes one short lock; the
// FileSink queue drops when full), start a goroutine other than the
// FileSink's one writer, or put anything in a record, line, summary or file
// beyond ids, enums, counts and timings: no URL, address, credential,
// prompt, body, raw metrics text or Go error text.
package evidence
