// Package transitiontest is a fake API server for tests of the transition
// request path and its callers (the kubectl plugin and its MCP server): two
// ReplicaTiers in one namespace, a record of every patch sent, a lagging
// list on request, and a fake router that reports a member Draining and
// then Drained.
//
// It owns test fixtures only. It must never be imported by code that ships
// in a binary, never reach a real API server, and never wait with sleeps:
// every wait is on a channel, bounded by FailSafe.
package transitiontest
