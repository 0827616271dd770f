package main

import (
	"context"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluice-dev/sluice/internal/adminserver"
	"github.com/sluice-dev/sluice/internal/frontdoor"
)

// The servers' bounds.
const (
	// readHeaderTimeout bounds a client's request headers on both listeners.
	readHeaderTimeout = 10 * time.Second
	// idleTimeout closes idle client keep-alive connections.
	idleTimeout = 120 * time.Second
	// maxHeaderBytes bounds a request's header block on both listeners
	// (net/http's default is 1 MiB). An API key (at most
	// apikeys.MaxKeyLength, 4 KiB), a request id, tracing headers and the
	// usual client headers fit many times over in 64 KiB, and each
	// connection reading headers pins at most that much.
	maxHeaderBytes = 64 << 10
	// adminShutdownTimeout bounds the admin server's shutdown, after the
	// front door's: a pending drain call gets this long to answer.
	adminShutdownTimeout = 5 * time.Second
	// hurriedShutdownTimeout bounds the wait, after a second signal
	// cancelled every in-flight request, for their handlers to release
	// their leases and return: a cancelled exchange ends as soon as its
	// member read is aborted, in microseconds; only a handler blocked
	// writing to a client that does not read needs its connection closed,
	// which the router does after this bound.
	hurriedShutdownTimeout = time.Second
	// clientWatchAfter is how long a front door request runs before its
	// connection is watched for the client going away
	// (frontdoor.Server.WatchAfter): a client that leaves is noticed at
	// most this late, and a request answered sooner pays nothing for the
	// watch (docs/ROUTER.md#9-performance).
	clientWatchAfter = frontdoor.DefaultWatchAfter
)

// handOver tells clients to reconnect once shutdown began: every response
// then carries "Connection: close", so a keep-alive client sends its next
// request on a new connection, which reaches the router replacing this one
// (see listen). Closing idle connections instead would race clients
// reusing them.
func handOver(h http.Handler, draining *atomic.Bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		closeWhenDraining(w, draining)
		h.ServeHTTP(w, r)
	})
}

// closeWhenDraining sets "Connection: close" on the response once draining
// is set (handOver).
func closeWhenDraining(w http.ResponseWriter, draining *atomic.Bool) {
	if draining.Load() {
		w.Header().Set("Connection", "close")
	}
}

// readyOnceServing fails /readyz and the per-tier /readyz/{namespace}/{name}
// until the front door listens: the admin
// listener opens first, and a router replacing another must not be taken
// for ready before it takes front door connections.
func readyOnceServing(h http.Handler, serving *atomic.Bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if (r.URL.Path == "/readyz" || strings.HasPrefix(r.URL.Path, "/readyz/")) && !serving.Load() {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, "front door not listening yet\n")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// newFrontDoor returns the front door's server for h: the router's own
// HTTP/1.1 server (internal/frontdoor). ReadTimeout bounds a request's
// headers and body; it never cuts a response, and there is no write
// timeout: streams last as long as the engine streams, bounded by the
// tiers' idle timeouts. The server's error log goes to panicLog.
func newFrontDoor(logger *slog.Logger, h http.Handler, bodyReadTimeout time.Duration) *frontdoor.Server {
	return &frontdoor.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       bodyReadTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		WatchAfter:        clientWatchAfter,
		ErrorLog:          log.New(panicLog{logger}, "", 0),
	}
}

// newServer returns the admin listener's net/http server for h, with the
// front door's bounds (newFrontDoor). net/http lifts the connection's read
// deadline when a request's body has been read to its end, so ReadTimeout
// never cuts a response.
func newServer(logger *slog.Logger, h http.Handler, bodyReadTimeout time.Duration) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       bodyReadTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          log.New(panicLog{logger}, "", 0),
	}
}

// panicPrefix starts the servers' log line for a handler's panic.
const panicPrefix = "http: panic serving "

// panicLog is the error log of the router's servers. Both (net/http's and
// internal/frontdoor) write a line there when a handler panics with
// anything but http.ErrAbortHandler, then close the connection, so the
// client sees it closed without an answer: the router logs the panic and
// its stack at ERROR, without the client's address. The servers' other
// lines (accept errors, TLS handshake errors, ...) quote client addresses
// and raw errors and are dropped.
type panicLog struct{ logger *slog.Logger }

// Write logs p if it is a panic's line.
func (l panicLog) Write(p []byte) (int, error) {
	s, ok := strings.CutPrefix(string(p), panicPrefix)
	if !ok {
		return len(p), nil
	}
	if _, rest, found := strings.Cut(s, ": "); found {
		s = rest // the client's address goes.
	}
	l.logger.Error("panic serving a request", "panic", strings.TrimSpace(s))
	return len(p), nil
}

// shutdown stops accepting, lets in-flight requests finish until the
// timeout, then closes what remains (its leases are released as the
// handlers see their clients gone). When hurry ends (a second signal,
// which cancelled every request), it waits at most hurriedShutdownTimeout
// more for their handlers to return, and does not wait for the admin
// server.
func shutdown(hurry context.Context, logger *slog.Logger, front *frontdoor.Server, adminSrv *http.Server, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(hurry, timeout)
	defer cancel()
	err := front.Shutdown(ctx)
	if err != nil && hurry.Err() != nil {
		hctx, hcancel := context.WithTimeout(context.Background(), hurriedShutdownTimeout)
		defer hcancel()
		err = front.Shutdown(hctx)
	}
	if err != nil {
		why := "in-flight requests outlived the shutdown timeout; closing them"
		if hurry.Err() != nil {
			why = "in-flight requests outlived the second signal's wait; closing them"
		}
		logger.Warn(why)
		_ = front.Close()
	}
	actx, acancel := context.WithTimeout(hurry, adminShutdownTimeout)
	defer acancel()
	if err := adminSrv.Shutdown(actx); err != nil {
		_ = adminSrv.Close()
	}
}

// registerPprof serves Go's profiles (net/http/pprof) at /debug/pprof/ on
// the admin listener, behind the admin token.
func registerPprof(admin *adminserver.Admin) {
	admin.Handle("GET /debug/pprof/", http.HandlerFunc(pprof.Index))
	admin.Handle("GET /debug/pprof/cmdline", http.HandlerFunc(pprof.Cmdline))
	admin.Handle("GET /debug/pprof/profile", http.HandlerFunc(pprof.Profile))
	admin.Handle("GET /debug/pprof/symbol", http.HandlerFunc(pprof.Symbol))
	admin.Handle("POST /debug/pprof/symbol", http.HandlerFunc(pprof.Symbol))
	admin.Handle("GET /debug/pprof/trace", http.HandlerFunc(pprof.Trace))
}
