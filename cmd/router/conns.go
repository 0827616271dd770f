package main

import (
	"context"
	"net"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/sluice-dev/sluice/internal/telemetry"
)

// Bounds of the front door's connections
// (docs/CONFIGURATION.md#11-connection-limits).
const (
	// defaultMaxConnections is the default --max-connections. An open
	// stream costs the router about 48 KiB (5000 streams peaked at 281.8
	// MiB, docs/BENCHMARKS.md), so 4096 of them take 192 MiB, which with
	// the idle router's few tens of MiB stays below the DaemonSet's 256 Mi
	// memory limit; an idle keep-alive connection costs less than half a
	// stream.
	defaultMaxConnections = 4096
	// defaultMaxUnauthenticated is the default
	// --max-unauthenticated-connections. A client authenticates with its
	// first request, a round trip after connecting, so the connections
	// waiting for one are few; a thousand of them, at about 16 KiB each
	// (their goroutine and read and write buffers; 13,000 held 208 MiB,
	// docs/BENCHMARKS.md#58-hostile-traffic-and-connection-flood), hold
	// 16 MiB.
	defaultMaxUnauthenticated = 1024
	// maxConnectionLimit bounds both flags: a connection is a file
	// descriptor, and no router serves a million.
	maxConnectionLimit = 1 << 20
	// maxAdminConnections bounds the admin listener's connections, which
	// listens on every interface of the node too. Its clients are the
	// kubelet's probes, a scraper or two, kubectl sluice and drain calls
	// (each holding one connection for up to its timeout): a few dozen at
	// most. 256 of them, at about 16 KiB each, hold 4 MiB.
	maxAdminConnections = 256
)

// connLimits bounds the front door's open connections and, among them,
// those that have not carried an authenticated request yet. A connection is
// unauthenticated from its accept until a request on it passes the API key
// check (router.Options.Authenticated; with no key file, any request that
// reaches the check). When a new connection would exceed either bound, the
// oldest unauthenticated connection is closed to make room; when every
// slot is held by authenticated connections, the new connection is closed
// at once. So a flood of connections that never authenticate cannot keep a
// client with a key out: each new connection pushes out the oldest of
// them, and a client that authenticates with its first request is never
// pushed out. An authenticated connection is closed only by the front door's own
// timeouts. An unauthenticated connection that finished a request without
// the server closing it is closed when it goes idle: the router keeps no
// connection alive for a client that has not proven a key.
//
// Its methods are the front door server's listener, ConnContext and
// ConnState hooks (limit) and the router's Authenticated callback; they
// are safe for concurrent use. The request path pays one context lookup
// and one atomic load per request; the lock is taken once per connection
// at accept, authentication and close.
type connLimits struct {
	max, maxUnauth int
	// keepIdle keeps an unauthenticated connection that went idle open
	// (newAdminConnLimits).
	keepIdle bool

	mu sync.Mutex
	// open counts the tracked connections; unauth those of them in the
	// list from oldest to newest (head, tail).
	open, unauth int
	head, tail   *trackedConn
	overLimit    uint64 // connections closed at accept, every slot authenticated.
	evicted      uint64 // unauthenticated connections closed to make room.
}

// newConnLimits returns the limits of max connections, maxUnauth of them
// unauthenticated.
func newConnLimits(maxConns, maxUnauth int) *connLimits {
	return &connLimits{max: maxConns, maxUnauth: maxUnauth}
}

// newAdminConnLimits returns the admin listener's limits: at most
// maxAdminConnections, none of which ever authenticates (the admin token
// is checked per request, and probes and scrapes carry none), so a new
// connection over the bound closes the oldest. Idle connections stay open
// for keep-alive, as the admin server's idle timeout allows: a flood of them
// pushes out only the oldest, and a client that keeps a connection in use
// keeps it.
func newAdminConnLimits() *connLimits {
	return &connLimits{max: maxAdminConnections, maxUnauth: maxAdminConnections, keepIdle: true}
}

// trackedConn is a connection as the server that serves it sees it.
type trackedConn struct {
	net.Conn
	limits *connLimits
	authed atomic.Bool
	// Guarded by limits.mu.
	prev, next *trackedConn // in the unauthenticated list.
	tracked    bool         // counted in limits.open; false once closed or evicted.
}

// CloseWrite half-closes the connection when it can, for the
// graceful close after an unread request body.
func (c *trackedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// connKey is the context key of a request's trackedConn.
type connKey struct{}

// limit installs l on the front door server srv, whose listener must be the
// one l.listener returns.
func (l *connLimits) limit(srv *http.Server) {
	srv.ConnContext = l.connContext
	srv.ConnState = l.connState
}

// listener returns ln with l applied to every connection it accepts.
func (l *connLimits) listener(ln net.Listener) net.Listener {
	return &limitedListener{Listener: ln, limits: l}
}

// limitedListener is the front door's listener under connLimits.
type limitedListener struct {
	net.Listener
	limits *connLimits
}

// Accept returns the next connection the limits admit; the ones they
// refuse are closed.
func (ln *limitedListener) Accept() (net.Conn, error) {
	for {
		c, err := ln.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if tc := ln.limits.admit(c); tc != nil {
			return tc, nil
		}
	}
}

// admit tracks c as unauthenticated and returns it, after closing the
// oldest unauthenticated connection when c would exceed a bound; it
// closes c and returns nil when every slot is held by authenticated
// connections.
func (l *connLimits) admit(c net.Conn) *trackedConn {
	tc := &trackedConn{Conn: c, limits: l}
	var victims [2]*trackedConn
	l.mu.Lock()
	if l.unauth >= l.maxUnauth {
		victims[0] = l.evictLocked()
	}
	if l.open >= l.max {
		victims[1] = l.evictLocked()
		if victims[1] == nil {
			l.overLimit++
			l.mu.Unlock()
			_ = c.Close()
			return nil
		}
	}
	l.open++
	tc.tracked = true
	l.pushLocked(tc)
	l.mu.Unlock()
	for _, v := range victims {
		if v != nil {
			_ = v.Close() // its serving goroutine's read fails, and it ends.
		}
	}
	return tc
}

// evictLocked stops tracking the oldest unauthenticated connection and
// returns it to be closed; nil when there is none.
func (l *connLimits) evictLocked() *trackedConn {
	v := l.head
	if v == nil {
		return nil
	}
	l.removeLocked(v)
	l.open--
	v.tracked = false
	l.evicted++
	return v
}

// pushLocked appends c to the unauthenticated list.
func (l *connLimits) pushLocked(c *trackedConn) {
	c.prev, c.next = l.tail, nil
	if l.tail != nil {
		l.tail.next = c
	} else {
		l.head = c
	}
	l.tail = c
	l.unauth++
}

// removeLocked takes c out of the unauthenticated list.
func (l *connLimits) removeLocked(c *trackedConn) {
	if c.prev != nil {
		c.prev.next = c.next
	} else {
		l.head = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	} else {
		l.tail = c.prev
	}
	c.prev, c.next = nil, nil
	l.unauth--
}

// connContext is the server's ConnContext: a request's context carries its
// connection, for authenticated.
func (l *connLimits) connContext(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*trackedConn); ok {
		return context.WithValue(ctx, connKey{}, tc)
	}
	return ctx
}

// connState is the server's ConnState: it stops tracking a closed
// connection, and closes an unauthenticated one that went idle.
func (l *connLimits) connState(c net.Conn, state http.ConnState) {
	tc, ok := c.(*trackedConn)
	if !ok {
		return
	}
	switch state {
	case http.StateIdle:
		if !l.keepIdle && !tc.authed.Load() {
			_ = tc.Close()
		}
	case http.StateClosed, http.StateHijacked:
		l.mu.Lock()
		if tc.tracked {
			if !tc.authed.Load() {
				l.removeLocked(tc)
			}
			l.open--
			tc.tracked = false
		}
		l.mu.Unlock()
	}
}

// authenticated marks the connection of r authenticated: the router's
// Authenticated callback, on every request that passed the key check.
func (l *connLimits) authenticated(r *http.Request) {
	tc, _ := r.Context().Value(connKey{}).(*trackedConn)
	if tc == nil || tc.authed.Load() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if tc.tracked && !tc.authed.Load() {
		l.removeLocked(tc)
	}
	tc.authed.Store(true)
}

// counts returns the connections open now, and how many were closed by
// each rule since the start, for the metrics.
func (l *connLimits) counts() telemetry.ConnectionCounts {
	l.mu.Lock()
	defer l.mu.Unlock()
	return telemetry.ConnectionCounts{Open: l.open, Unauthenticated: l.unauth, ClosedOverLimit: l.overLimit, ClosedEvicted: l.evicted}
}
