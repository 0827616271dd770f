// Package frontdoor is the router's HTTP/1.1 server for client requests:
// net/http's request parser (http.ReadRequest) under a connection loop and
// a response writer of its own, with net/http's server behaviour where a
// client can tell (status codes for malformed requests, framing, keep-alive,
// Expect, trailers, bounds and timeouts), and without its per-request
// background read.
//
// net/http's server starts a goroutine on every request that reads the
// client's connection while the handler runs, to notice a client that goes
// away, and stops it when the handler returns: a read that fails at once,
// a goroutine, a deadline moved to the past and a wake-up on every request.
// A request answered within WatchAfter needs none of it; one that lasts
// longer (a generation, a wait in a tier's queue) is watched from then on,
// and its context ends when the client closes its connection, as under
// net/http (docs/ROUTER.md#9-performance).
//
// The server speaks HTTP/1.x only; the router's front door never offered
// HTTP/2 or TLS.
package frontdoor
