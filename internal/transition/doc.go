// Package transition is the one request path for member and tier
// transitions of a ReplicaTier: it reads a tier, changes its quiesce intent
// (spec.quiesce) through the API server, waits for a drain, and projects a
// tier into the Status view that callers print or return.
//
// Quiesce and readmit change operator intent only, with JSON merge patches
// of exactly spec.quiesce.members.<id> or spec.quiesce.tier, so a member
// operation never touches the tier's intent and the reverse. Every check
// (the tier exists, the member exists, the tier is not a direct tier for a
// member operation, the reason is well formed) happens before any change.
// Drain quiesces the scope when needed and then waits, with a watch, until
// the router on the tier's node reports the scope Drained for the tier's
// current generation. A Client with DryRun set sends its changes as
// server-side dry runs, which the API server validates and never stores.
//
// The package must never talk to routers or engines (it reads only what
// they reported in status), never write status, never poll with sleeps,
// never print or log, and never change intent other than the scope it was
// asked about.
package transition
