package enginesim

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"

	"github.com/sluice-dev/sluice/internal/sockpeek"
)

// HeaderRequestID is the request header whose value the request log keeps:
// the router sends its request id to the member in it.
const HeaderRequestID = "X-Request-Id"

// maxLoggedIDBytes bounds the request id a log line keeps. The router's ids
// are at most 64 bytes; a longer value is cut, so a line stays small
// whatever a client sends.
const maxLoggedIDBytes = 128

// connKey is the context key under which ConnContext stores the connection.
type connKey struct{}

// ConnContext is an http.Server ConnContext hook that makes each request's
// connection known to the Server, so that the request log does not count a
// request whose peer already closed or reset its connection (see
// WithRequestLog). Without it, a request counts until its handler returns
// or its context ends.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// WithRequestLog makes the server write one JSON line to w when each
// inference request's handler starts, before its body is read:
//
//	{"id":"REQUEST-ID","t":UNIX_NANOS,"live":N,"endpoint":"chat_completions"}
//
// id is the request's X-Request-Id (empty when absent), t the arrival time
// on the server's clock, and live the number of inference requests the
// engine is serving at that moment, this one included. A request is served
// from the start of its handler until the first of: its handler returns,
// its context ends, or (with ConnContext) its peer has closed or reset the
// connection. Each line is one Write call; the server serializes them. Write
// errors are ignored: the log never fails a request.
func WithRequestLog(w io.Writer) Option {
	return func(s *Server) { s.reqLog = &requestLog{w: w, live: map[uint64]liveRequest{}} }
}

// requestLog tracks the requests being served and writes the arrival lines.
type requestLog struct {
	mu   sync.Mutex // guards next and live; the write happens outside it.
	next uint64
	live map[uint64]liveRequest

	wmu sync.Mutex // serializes writes to w.
	w   io.Writer
	buf []byte
}

// liveRequest is one request being served.
type liveRequest struct {
	ctx  context.Context
	conn net.Conn // nil without ConnContext.
}

// served reports whether the request is still being served: its context
// has not ended and its peer has not closed the connection (bytes from the
// peer mean it is still talking). Where the socket cannot be peeked at, a
// request counts until its handler returns or its context ends.
func (l liveRequest) served() bool {
	return l.ctx.Err() == nil && (l.conn == nil || sockpeek.Peek(l.conn) != sockpeek.Closed)
}

// arrive registers r, writes its line and returns the function that
// unregisters it.
func (l *requestLog) arrive(r *http.Request, ep Endpoint, now int64) func() {
	ctx := r.Context()
	conn, _ := ctx.Value(connKey{}).(net.Conn)
	l.mu.Lock()
	l.next++
	key := l.next
	live := 1
	for _, other := range l.live {
		if other.served() {
			live++
		}
	}
	l.live[key] = liveRequest{ctx: ctx, conn: conn}
	l.mu.Unlock()

	id := r.Header.Get(HeaderRequestID)
	if len(id) > maxLoggedIDBytes {
		id = id[:maxLoggedIDBytes]
	}
	l.wmu.Lock()
	b := append(l.buf[:0], `{"id":`...)
	b = strconv.AppendQuote(b, id)
	b = append(b, `,"t":`...)
	b = strconv.AppendInt(b, now, 10)
	b = append(b, `,"live":`...)
	b = strconv.AppendInt(b, int64(live), 10)
	b = append(b, `,"endpoint":"`...)
	b = append(b, ep.String()...)
	b = append(b, "\"}\n"...)
	_, _ = l.w.Write(b)
	l.buf = b
	l.wmu.Unlock()

	return func() {
		l.mu.Lock()
		delete(l.live, key)
		l.mu.Unlock()
	}
}
