// Package adminserver is the router's admin listener's handler: health and
// readiness (open), and under bearer authentication the capacity view, the
// applied tier configuration and drain, all read from the tiers in force
// (internal/tiers); other packages add routes (metrics, decisions). Its
// JSON bodies are internal/adminapi's.
//
// The package must never change quiesce intent (intent changes only
// through the ReplicaTier), never wait for anything but a drain the caller
// asked for, and never put an endpoint URL, address, credential or raw Go
// error text in a response.
package adminserver
