// Package router is sluice's front door for one node.
//
// The Router serves the OpenAI-compatible routes: for every request it runs
// the request-wide gates (method, API key, body size, a JSON object with a
// string "model", a known alias), reads completed readiness and pressure
// snapshots without waiting, makes one admission decision on the tier's
// admission owner, sends exactly one
// upstream attempt to the leased member through the member client
// (internal/upstream), and releases the lease exactly once when the
// exchange ends, however it ends: exchange.serve runs it top to bottom.
// The tiers it serves are internal/tiers' (Router.Tiers): the alias table
// the request path reads is an immutable value swapped atomically there.
//
// The package must never retry an upstream request or pick a second member
// for a request, never wait for capacity, readiness or pressure, never start
// a goroutine per request beyond what the server starts, never mutate quiesce
// intent, and never put an endpoint URL, address, credential, prompt,
// upstream body or raw Go error text in an error body or log line it
// produces.
package router
