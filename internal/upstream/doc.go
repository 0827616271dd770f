// Package upstream is sluice's HTTP/1.1 client to members: the engines on
// the node that the router sends requests to.
//
// A Client keeps idle connections per member address, closes those idle for
// its idle timeout (its reaper) and dials new ones, with TLS for https
// members. An Attempt is one request's single attempt: Send writes the
// request head and body (in one write where the bytes are at hand, then
// waits on the poller for the answer, not on an empty read), ReadHead
// reads the response head within bounded bytes (informational responses
// skipped, 101 refused), Read reads the body under the idle deadline, and
// Close gives the connection back only when the body was read whole and
// keep-alive allows. Failures are classified by the sentinel errors: a
// request the member cannot have seen (ErrNotSent), a refused, reset or
// closed connection, a head too large. The one resend is internal: a request
// that a reused connection provably never delivered goes out once more on a
// fresh connection.
//
// The package knows nothing of tiers, leases or the exchange that uses it:
// it is given a target, the request's parts, its body bytes and its
// timeouts, and is cancelled through the context. It must never resend a
// request the member may have received, follow redirects, use proxies or
// HTTP/2, start a goroutine per request or connection, or put an address or
// raw error text anywhere but the errors it returns.
package upstream
