package frontdoor

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	_ "unsafe" // for go:linkname

	"golang.org/x/net/http/httpguts"
)

// readRequest is net/http's request parser, as its server calls it.
// http.ReadRequest calls it too, then deletes the Host fields, which a
// server must count (RFC 9112 §3.2: none, or an invalid one, is a 400);
// net/http keeps its name and signature for callers outside it
// (go.dev/issue/67401).
//
//go:linkname readRequest net/http.readRequest
func readRequest(b *bufio.Reader) (*http.Request, error)

// The server's defaults and fixed bounds.
const (
	// DefaultWatchAfter is the default Server.WatchAfter. A request that
	// lasts longer than this is watched for its client going away, so a
	// client that leaves a generation or a queue is noticed at most this
	// late; the watch costs a goroutine and a read, nothing next to such a
	// request, and a request answered sooner never pays for it.
	DefaultWatchAfter = 50 * time.Millisecond
	// DefaultMaxHeaderBytes is the default Server.MaxHeaderBytes, net/http's.
	DefaultMaxHeaderBytes = http.DefaultMaxHeaderBytes

	// headerSlack is read past MaxHeaderBytes before a header block is too
	// large, as net/http allows: the request line and framing.
	headerSlack = 4096
	// maxPostHandlerReadBytes is how much of a request body the handler
	// left unread is read and dropped so the connection can carry the
	// next request; a larger rest closes the connection (net/http's bound).
	maxPostHandlerReadBytes = 256 << 10
	// bufferBeforeChunking is how much of a body without a Content-Length
	// is held before its head is sent: a handler that ends within it gets
	// a Content-Length rather than a chunked body (net/http's size).
	bufferBeforeChunking = 2048
	// readBufferSize and writeBufferSize are each connection's buffers.
	readBufferSize  = 4 << 10
	writeBufferSize = 4 << 10
	// idleNewConnAge is how old a connection that never sent a byte must
	// be for Shutdown to close it as idle (net/http's rule).
	idleNewConnAge = 5 * time.Second
	// maxShutdownPoll bounds the interval at which Shutdown looks for
	// connections gone idle.
	maxShutdownPoll = 500 * time.Millisecond
	// maxAcceptBackoff bounds the wait after a failed accept (out of file
	// descriptors, say) before the next.
	maxAcceptBackoff = time.Second
)

// Server serves HTTP/1.x requests with Handler. Its fields mean what
// net/http's Server fields of the same names mean; set them before Serve.
type Server struct {
	// Handler serves every request.
	Handler http.Handler
	// ReadHeaderTimeout bounds the reading of a request's head.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds the reading of a whole request, head and body,
	// from the start of its head.
	ReadTimeout time.Duration
	// IdleTimeout bounds the wait for the next request on a keep-alive
	// connection; 0 uses ReadTimeout, as net/http does.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's head; 0 means
	// DefaultMaxHeaderBytes.
	MaxHeaderBytes int
	// WatchAfter is how long a request is served before the server
	// watches its connection for the client going away (then the
	// request's context ends); 0 means DefaultWatchAfter.
	WatchAfter time.Duration
	// BaseContext returns the context of the connections a listener
	// accepts; nil means context.Background.
	BaseContext func(net.Listener) context.Context
	// ConnContext derives a connection's context, once per connection.
	ConnContext func(ctx context.Context, c net.Conn) context.Context
	// ConnState is called as a connection changes state: http.StateNew,
	// StateActive, StateIdle and StateClosed.
	ConnState func(net.Conn, http.ConnState)
	// ErrorLog receives handler panics and accept errors; nil means the
	// log package's standard logger.
	ErrorLog *log.Logger

	mu           sync.Mutex
	listeners    map[net.Listener]struct{}
	conns        map[*conn]struct{}
	shuttingDown atomic.Bool
}

// Serve accepts connections on ln and serves each on its own goroutine. It
// returns http.ErrServerClosed once Shutdown or Close was called, or the
// listener's error; ln is closed when Serve returns.
func (s *Server) Serve(ln net.Listener) error {
	if !s.trackListener(ln) {
		_ = ln.Close()
		return http.ErrServerClosed
	}
	defer s.untrackListener(ln)
	base := context.Background()
	if s.BaseContext != nil {
		if base = s.BaseContext(ln); base == nil {
			panic("frontdoor: BaseContext returned a nil context")
		}
	}
	var backoff time.Duration
	for {
		rwc, err := ln.Accept()
		if err != nil {
			if s.shuttingDown.Load() {
				return http.ErrServerClosed
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			backoff = min(max(2*backoff, 5*time.Millisecond), maxAcceptBackoff)
			s.logf("http: Accept error: %v; retrying in %v", err, backoff)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		ctx := base
		if s.ConnContext != nil {
			if ctx = s.ConnContext(ctx, rwc); ctx == nil {
				panic("frontdoor: ConnContext returned a nil context")
			}
		}
		c := &conn{s: s, rwc: rwc}
		c.r.c = c
		c.setState(http.StateNew)
		go c.serve(ctx)
	}
}

// Shutdown stops accepting, closes idle connections, and waits until
// every connection finished its request and closed, or ctx ends (its
// error). Connections still open then are left to Close.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shuttingDown.Store(true)
	s.mu.Lock()
	err := s.closeListenersLocked()
	s.mu.Unlock()
	poll := time.Millisecond
	timer := time.NewTimer(poll)
	defer timer.Stop()
	for {
		if s.closeIdleConns() {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			poll = min(2*poll, maxShutdownPoll)
			timer.Reset(poll)
		}
	}
}

// Close stops accepting and closes every connection at once.
func (s *Server) Close() error {
	s.shuttingDown.Store(true)
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.closeListenersLocked()
	for c := range s.conns {
		_ = c.rwc.Close()
		delete(s.conns, c)
	}
	return err
}

// trackListener records ln for Shutdown and Close, unless they were
// called already.
func (s *Server) trackListener(ln net.Listener) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shuttingDown.Load() {
		return false
	}
	if s.listeners == nil {
		s.listeners = make(map[net.Listener]struct{})
	}
	s.listeners[ln] = struct{}{}
	return true
}

// untrackListener closes ln and forgets it.
func (s *Server) untrackListener(ln net.Listener) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.listeners[ln]; ok {
		_ = ln.Close()
		delete(s.listeners, ln)
	}
}

// closeListenersLocked closes every listener and returns the first error.
func (s *Server) closeListenersLocked() error {
	var err error
	for ln := range s.listeners {
		if cerr := ln.Close(); cerr != nil && err == nil {
			err = cerr
		}
		delete(s.listeners, ln)
	}
	return err
}

// closeIdleConns closes the idle connections and reports whether none is
// left.
func (s *Server) closeIdleConns() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	quiescent := true
	now := time.Now().Unix()
	for c := range s.conns {
		st, since := c.getState()
		if st == http.StateNew && since < now-int64(idleNewConnAge/time.Second) {
			st = http.StateIdle
		}
		if st != http.StateIdle {
			quiescent = false
			continue
		}
		_ = c.rwc.Close()
		delete(s.conns, c)
	}
	return quiescent
}

// trackConn adds c to, or removes it from, the open connections.
func (s *Server) trackConn(c *conn, add bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conns == nil {
		s.conns = make(map[*conn]struct{})
	}
	if add {
		s.conns[c] = struct{}{}
	} else {
		delete(s.conns, c)
	}
}

// logf writes to ErrorLog.
func (s *Server) logf(format string, args ...any) {
	if s.ErrorLog != nil {
		s.ErrorLog.Printf(format, args...)
	} else {
		log.Printf(format, args...)
	}
}

// maxHeaderBytes returns the bound of a request's head.
func (s *Server) maxHeaderBytes() int64 {
	if s.MaxHeaderBytes > 0 {
		return int64(s.MaxHeaderBytes)
	}
	return DefaultMaxHeaderBytes
}

// idleTimeout returns the bound of the wait for a next request.
func (s *Server) idleTimeout() time.Duration {
	if s.IdleTimeout != 0 {
		return s.IdleTimeout
	}
	return s.ReadTimeout
}

// readHeaderTimeout returns the bound of a request head's reading.
func (s *Server) readHeaderTimeout() time.Duration {
	if s.ReadHeaderTimeout != 0 {
		return s.ReadHeaderTimeout
	}
	return s.ReadTimeout
}

// watchAfter returns how long a request runs before it is watched.
func (s *Server) watchAfter() time.Duration {
	if s.WatchAfter > 0 {
		return s.WatchAfter
	}
	return DefaultWatchAfter
}

// Buffers are pooled between connections: an idle connection keeps its
// own, as net/http's do, and a closed one gives them back.
var (
	readers sync.Pool
	writers sync.Pool
)

// newReader returns a pooled reader on r.
func newReader(r io.Reader) *bufio.Reader {
	if br, ok := readers.Get().(*bufio.Reader); ok {
		br.Reset(r)
		return br
	}
	return bufio.NewReaderSize(r, readBufferSize)
}

// newWriter returns a pooled writer on w.
func newWriter(w io.Writer) *bufio.Writer {
	if bw, ok := writers.Get().(*bufio.Writer); ok {
		bw.Reset(w)
		return bw
	}
	return bufio.NewWriterSize(w, writeBufferSize)
}

// aLongTimeAgo is a deadline in the past: it ends a pending read at once.
var aLongTimeAgo = time.Unix(1, 0)

// conn is one client connection, served by one goroutine (serve).
type conn struct {
	s          *Server
	rwc        net.Conn
	remoteAddr string
	r          connReader
	br         *bufio.Reader
	bw         *bufio.Writer
	// cancel ends the connection's context, and so its request's: when a
	// write fails or the client went away.
	cancel context.CancelFunc
	// werr is the first failed write's error.
	werr error
	// state is the connection's http.ConnState and, above 8 bits, the
	// Unix second it took it.
	state atomic.Int64
	// lastMethod is the last request's method: a POST may be followed by a
	// stray CRLF.
	lastMethod string

	// The watch of the request in progress (armWatch, startWatch,
	// stopWatch).
	watchMu    sync.Mutex
	watchTimer *time.Timer
	watchSeq   uint64        // the request the armed timer is for; 0: none armed.
	reqSeq     uint64        // the request in progress.
	watchDone  chan struct{} // closed when the running watch ended; nil: none runs.
	aborting   bool          // stopWatch ends the running watch.
}

// setState records st and calls the ConnState hook.
func (c *conn) setState(st http.ConnState) {
	switch st {
	case http.StateNew:
		c.s.trackConn(c, true)
	case http.StateClosed:
		c.s.trackConn(c, false)
	}
	c.state.Store(int64(st) | time.Now().Unix()<<8)
	if hook := c.s.ConnState; hook != nil {
		hook(c.rwc, st)
	}
}

// getState returns the connection's state and the Unix second it took it.
func (c *conn) getState() (http.ConnState, int64) {
	v := c.state.Load()
	return http.ConnState(v & 0xff), v >> 8
}

// serve reads and serves the connection's requests one after another until
// one of them, or the client, ends it.
func (c *conn) serve(ctx context.Context) {
	if ra := c.rwc.RemoteAddr(); ra != nil {
		c.remoteAddr = ra.String()
	}
	ctx = context.WithValue(ctx, http.LocalAddrContextKey, c.rwc.LocalAddr())
	ctx, c.cancel = context.WithCancel(ctx)
	defer c.cancel()
	var inFlight *response
	defer func() {
		if p := recover(); p != nil && p != http.ErrAbortHandler { //nolint:errorlint // net/http compares the sentinel itself.
			const size = 64 << 10
			buf := make([]byte, size)
			buf = buf[:runtime.Stack(buf, false)]
			c.s.logf("http: panic serving %v: %v\n%s", c.remoteAddr, p, buf)
		}
		if inFlight != nil {
			inFlight.disableContinue()
		}
		c.stopWatch()
		c.close()
		c.setState(http.StateClosed)
	}()

	c.br = newReader(&c.r)
	c.bw = newWriter(connWriter{c})
	if d := c.s.readHeaderTimeout(); d > 0 {
		_ = c.rwc.SetReadDeadline(time.Now().Add(d))
	}
	for {
		w, err := c.readRequest(ctx)
		if err == nil || c.r.read {
			c.setState(http.StateActive)
		}
		if c.s.shuttingDown.Load() {
			return
		}
		if err != nil {
			c.refuse(err)
			return
		}
		req := w.req
		if expect := req.Header.Get("Expect"); expect != "" {
			if !hasToken(expect, "100-continue") {
				w.sendExpectationFailed()
				return
			}
			if req.ProtoAtLeast(1, 1) && req.ContentLength != 0 && w.body != nil {
				w.expectContinue = true
				w.canContinue.Store(true)
			}
		}
		if w.body == nil {
			c.armWatch(w.seq)
		}

		inFlight = w
		if req.RequestURI == "*" && req.Method == http.MethodOptions {
			globalOptions(w, req)
		} else {
			c.s.Handler.ServeHTTP(w, req)
		}
		inFlight = nil
		w.cancel()
		w.finish()
		c.stopWatch()
		if w.setWriteDeadline {
			_ = c.rwc.SetWriteDeadline(time.Time{})
		}
		if !w.reuse() {
			if w.bodyLimitHit {
				c.closeWriteAndWait()
			}
			return
		}
		c.setState(http.StateIdle)
		if c.s.shuttingDown.Load() {
			return
		}
		if d := c.s.idleTimeout(); d > 0 {
			_ = c.rwc.SetReadDeadline(time.Now().Add(d))
		} else {
			_ = c.rwc.SetReadDeadline(time.Time{})
		}
		if _, err := c.br.Peek(4); err != nil {
			return
		}
		if d := c.s.readHeaderTimeout(); d > 0 {
			_ = c.rwc.SetReadDeadline(time.Now().Add(d))
		} else {
			_ = c.rwc.SetReadDeadline(time.Time{})
		}
	}
}

// globalOptions answers "OPTIONS *" itself, as net/http does: 200 with an
// empty body, a body of the request read up to 4 KiB.
func globalOptions(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Length", "0")
	if r.ContentLength != 0 {
		_, _ = io.Copy(io.Discard, http.MaxBytesReader(w, r.Body, 4<<10))
	}
}

// Errors of a request's head that the server answers itself.
var (
	// errTooLarge is a head over MaxHeaderBytes.
	errTooLarge = errors.New("frontdoor: request head too large")
)

// statusError is a malformed request's status and the text sent with it.
type statusError struct {
	code int
	text string
}

// Error returns the status and its text.
func (e statusError) Error() string { return http.StatusText(e.code) + ": " + e.text }

// badRequest returns a 400 statusError with text.
func badRequest(text string) error { return statusError{http.StatusBadRequest, text} }

// readRequest reads the next request's head and returns its response.
func (c *conn) readRequest(ctx context.Context) (*response, error) {
	t0 := time.Now()
	c.r.read = false
	c.r.setLimit(c.s.maxHeaderBytes() + headerSlack)
	if c.lastMethod == http.MethodPost {
		// RFC 9112 §2.2: a server ignores at least one empty line before a
		// request line; some clients send a CRLF after a POST's body.
		peek, _ := c.br.Peek(4)
		_, _ = c.br.Discard(leadingCRLF(peek))
	}
	req, err := readRequest(c.br)
	if err != nil {
		if c.r.hitLimit {
			return nil, errTooLarge
		}
		return nil, err
	}
	if !supportedProto(req) {
		return nil, statusError{http.StatusHTTPVersionNotSupported, "unsupported protocol version"}
	}
	c.lastMethod = req.Method
	c.r.setLimit(0)

	hosts, haveHost := req.Header["Host"]
	h2Upgrade := isH2Upgrade(req)
	if req.ProtoAtLeast(1, 1) && (!haveHost || len(hosts) == 0) && !h2Upgrade && req.Method != http.MethodConnect {
		return nil, badRequest("missing required Host header")
	}
	if len(hosts) == 1 && !httpguts.ValidHostHeader(hosts[0]) {
		return nil, badRequest("malformed Host header")
	}
	for k, vv := range req.Header {
		if !httpguts.ValidHeaderFieldName(k) {
			return nil, badRequest("invalid header name")
		}
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				return nil, badRequest("invalid header value")
			}
		}
	}
	delete(req.Header, "Host")

	rctx, cancel := context.WithCancel(ctx)
	// In place: the body's reader sets the trailers of this request.
	*req = *req.WithContext(rctx)
	req.RemoteAddr = c.remoteAddr
	var deadline time.Time
	if d := c.s.ReadTimeout; d > 0 {
		deadline = t0.Add(d)
	}
	_ = c.rwc.SetReadDeadline(deadline)

	c.watchMu.Lock()
	c.reqSeq++
	seq := c.reqSeq
	c.watchMu.Unlock()
	wants10 := wants10KeepAlive(req)
	w := &response{
		c:             c,
		req:           req,
		seq:           seq,
		cancel:        cancel,
		header:        make(http.Header),
		contentLength: -1,
		closeAfter:    h2Upgrade,
		wantsClose:    req.Close && !wants10,
		wants10:       wants10,
	}
	if req.Body != http.NoBody && req.Body != nil {
		w.body = &w.bodyv
		w.body.rc, w.body.w, w.body.left = req.Body, w, req.ContentLength
		req.Body = w.body
	}
	return w, nil
}

// refuse answers a request whose head could not be read, as net/http
// does, unless the connection failed or timed out.
func (c *conn) refuse(err error) {
	const errorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"
	var se statusError
	switch {
	case errors.Is(err, errTooLarge):
		const publicErr = "431 Request Header Fields Too Large"
		_, _ = io.WriteString(c.rwc, "HTTP/1.1 "+publicErr+errorHeaders+publicErr)
		c.closeWriteAndWait()
	case isUnsupportedTE(err):
		code := http.StatusNotImplemented
		_, _ = fmt.Fprintf(c.rwc, "HTTP/1.1 %d %s%sUnsupported transfer encoding", code, http.StatusText(code), errorHeaders)
	case isCommonNetReadError(err):
		// Nothing to answer: the client left, or sent nothing in time.
	case errors.As(err, &se):
		_, _ = fmt.Fprintf(c.rwc, "HTTP/1.1 %d %s: %s%s%d %s: %s", se.code, http.StatusText(se.code), se.text, errorHeaders,
			se.code, http.StatusText(se.code), se.text)
	default:
		const publicErr = "400 Bad Request"
		_, _ = io.WriteString(c.rwc, "HTTP/1.1 "+publicErr+errorHeaders+publicErr)
	}
}

// rstAvoidanceDelay is how long closeWriteAndWait lets the client read
// the response before the connection closes (net/http's delay).
const rstAvoidanceDelay = 500 * time.Millisecond

// closeWriteAndWait flushes, half-closes the connection and waits a little
// before it is closed, so that a client still sending a body it was told
// to stop reads the response rather than a reset.
func (c *conn) closeWriteAndWait() {
	_ = c.bw.Flush()
	if cw, ok := c.rwc.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	time.Sleep(rstAvoidanceDelay)
}

// close flushes what the response left, gives the buffers back and closes
// the connection.
func (c *conn) close() {
	if c.bw != nil {
		_ = c.bw.Flush()
		c.bw.Reset(nil)
		writers.Put(c.bw)
		c.bw = nil
	}
	if c.br != nil {
		c.br.Reset(nil)
		readers.Put(c.br)
		c.br = nil
	}
	_ = c.rwc.Close()
}

// armWatch arms the watch of request seq, now that nothing of its body is
// left to read: if it is still served after WatchAfter, startWatch reads
// the connection until the client goes away or sends more.
func (c *conn) armWatch(seq uint64) {
	c.watchMu.Lock()
	defer c.watchMu.Unlock()
	if seq != c.reqSeq || c.watchSeq == seq {
		return // a late read of an earlier request's body, or armed already.
	}
	c.watchSeq = seq
	if c.watchTimer == nil {
		c.watchTimer = time.AfterFunc(c.s.watchAfter(), c.startWatch)
	} else {
		c.watchTimer.Reset(c.s.watchAfter())
	}
}

// startWatch, on the watch timer's goroutine, reads the connection of the
// request in progress until the client goes away, which ends the
// connection's context and so the request's, or sends a byte of a next
// request, which the connection's reader keeps for it. stopWatch ends it.
func (c *conn) startWatch() {
	c.watchMu.Lock()
	if c.watchSeq == 0 || c.watchSeq != c.reqSeq || c.watchDone != nil {
		c.watchMu.Unlock()
		return
	}
	done := make(chan struct{})
	c.watchDone = done
	_ = c.rwc.SetReadDeadline(time.Time{}) // ReadTimeout bounds the request, not the wait for the next.
	c.watchMu.Unlock()
	defer close(done)

	n, err := c.rwc.Read(c.r.byteBuf[:])
	c.watchMu.Lock()
	aborted := c.aborting
	c.watchMu.Unlock()
	switch {
	case n == 1:
		c.r.hasByte = true
	case err == nil, aborted && errors.Is(err, os.ErrDeadlineExceeded):
	default:
		c.r.err = err
		c.cancel() // the client went away.
	}
}

// stopWatch disarms the watch of the request that ended, and ends it and
// waits for it if it runs.
func (c *conn) stopWatch() {
	c.watchMu.Lock()
	c.watchSeq = 0
	if c.watchTimer != nil {
		c.watchTimer.Stop()
	}
	done := c.watchDone
	if done != nil {
		c.aborting = true
		_ = c.rwc.SetReadDeadline(aLongTimeAgo)
	}
	c.watchMu.Unlock()
	if done == nil {
		return
	}
	<-done
	c.watchMu.Lock()
	c.watchDone = nil
	c.aborting = false
	c.watchMu.Unlock()
}

// connReader is the connection as its buffered reader reads it: bounded
// while a head is read, and first giving back the byte a watch read.
type connReader struct {
	c *conn
	// remain is what is left of the bound; limited says there is one.
	remain   int64
	limited  bool
	hitLimit bool // a read found the bound reached.
	read     bool // a byte of the request being read was read.
	// hasByte says byteBuf holds a byte a watch read; err is the error a
	// watch saw, which every later read returns.
	hasByte bool
	byteBuf [1]byte
	err     error
}

// setLimit bounds the reads to n bytes from now; 0 lifts the bound.
func (cr *connReader) setLimit(n int64) {
	cr.remain, cr.limited, cr.hitLimit = n, n > 0, false
}

// Read reads from the connection within the bound.
func (cr *connReader) Read(p []byte) (int, error) {
	if cr.limited {
		if cr.remain <= 0 {
			cr.hitLimit = true
			return 0, io.EOF
		}
		if int64(len(p)) > cr.remain {
			p = p[:cr.remain]
		}
	}
	if len(p) == 0 {
		return 0, nil
	}
	if cr.hasByte {
		p[0] = cr.byteBuf[0]
		cr.hasByte = false
		cr.remain--
		cr.read = true
		return 1, nil
	}
	if cr.err != nil {
		return 0, cr.err
	}
	n, err := cr.c.rwc.Read(p)
	cr.remain -= int64(n)
	if n > 0 {
		cr.read = true
	}
	return n, err
}

// connWriter is the connection as its buffered writer writes it: the first
// failed write ends the connection's context.
type connWriter struct{ c *conn }

// Write writes p to the connection.
func (w connWriter) Write(p []byte) (int, error) {
	n, err := w.c.rwc.Write(p)
	if err != nil && w.c.werr == nil {
		w.c.werr = err
		w.c.cancel()
	}
	return n, err
}

// supportedProto reports whether the server speaks req's protocol:
// HTTP/1.x, or HTTP/2's preface, which it answers as HTTP/1.1 and closes.
func supportedProto(req *http.Request) bool {
	return req.ProtoMajor == 1 || isH2Upgrade(req)
}

// isH2Upgrade reports whether req is HTTP/2's connection preface.
func isH2Upgrade(req *http.Request) bool {
	return req.Method == "PRI" && req.ProtoMajor == 2 && req.ProtoMinor == 0 && req.RequestURI == "*" && len(req.Header) == 0
}

// wants10KeepAlive reports whether req is an HTTP/1.0 request asking for
// keep-alive.
func wants10KeepAlive(req *http.Request) bool {
	if req.ProtoMajor != 1 || req.ProtoMinor != 0 {
		return false
	}
	return hasToken(strings.Join(req.Header["Connection"], ","), "keep-alive")
}

// hasToken reports whether the comma-separated list v holds token, in any
// case.
func hasToken(v, token string) bool {
	for f := range strings.SplitSeq(v, ",") {
		if strings.EqualFold(strings.TrimSpace(f), token) {
			return true
		}
	}
	return false
}

// leadingCRLF counts the CR and LF bytes that start b.
func leadingCRLF(b []byte) int {
	n := 0
	for _, c := range b {
		if c != '\r' && c != '\n' {
			break
		}
		n++
	}
	return n
}

// isUnsupportedTE reports whether err is net/http's refusal of a request's
// Transfer-Encoding: a coding other than chunked, or more than one. Its
// type is net/http's own and not exported; its texts are stable.
func isUnsupportedTE(err error) bool {
	msg := err.Error()
	return strings.HasPrefix(msg, "unsupported transfer encoding") || strings.HasPrefix(msg, "too many transfer encodings")
}

// isCommonNetReadError reports whether err is the connection's end or a
// timeout rather than a malformed request.
func isCommonNetReadError(err error) bool {
	if err == io.EOF { //nolint:errorlint // http.ReadRequest returns io.EOF itself on a connection that ended between requests.
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "read"
}
