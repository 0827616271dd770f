package router

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"

	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/internal/sockpeek"
)

// Tuning of the upstream connections. Members are engines on loopback:
// connections are cheap to keep and slow to churn.
const (
	// tcpKeepAlive is the keep-alive probe period of upstream connections.
	tcpKeepAlive = 30 * time.Second
	// maxIdlePerMember keeps one idle connection per concurrent request to
	// a member up to well past any engine's batch size, so a burst does not
	// close and redial connections.
	maxIdlePerMember = 1024
	// DefaultMemberIdleTimeout is the default Options.MemberIdleTimeout
	// (--member-idle-timeout): below the 5 s after which uvicorn, vLLM's
	// server, closes an idle keep-alive connection, so the router closes
	// its idle connections first and none lingers in CLOSE_WAIT.
	DefaultMemberIdleTimeout = 4 * time.Second
	// reaperChecksPerTimeout is how often per idle timeout the reaper looks
	// at the idle connections: a connection is closed at most an eighth of
	// the timeout late (4.5 s with the default, still before uvicorn's 5 s).
	reaperChecksPerTimeout = 8
	// maxInformational bounds the informational (1xx) responses read
	// before the final one, net/http's own limit: an engine has no reason
	// to send more than one. The header deadline bounds their time.
	maxInformational = 5
	// maxResponseHeaderBytes bounds the bytes of one exchange's response
	// heads: the status lines and headers of the informational (1xx)
	// responses and of the final one, together. A member sending more
	// fails the exchange (errHeaderTooLarge) after the router read at most
	// this many bytes of it; net/http's client allows 10 MB, which is
	// memory enough to take the router down.
	maxResponseHeaderBytes = 64 << 10
	// connBufferSize is the size of each connection's read buffer.
	connBufferSize = 4 << 10
	// inlineBodySize is the largest body copied behind the request head to
	// go out in one write; a larger one follows the head in a vectored
	// write, uncopied.
	inlineBodySize = 16 << 10
	// maxHeadScratch bounds the scratch buffer an idle connection keeps.
	maxHeadScratch = 32 << 10
)

// aLongTimeAgo is a deadline in the past: setting it makes blocked reads
// and writes of a connection return at once.
var aLongTimeAgo = time.Unix(1, 0)

// memberClient is the ReverseProxy's transport to members: an HTTP/1.1
// client that does only what one attempt to an engine on the same host
// needs. It sends one request per connection at a time, written and read
// on the serving goroutine (no per-connection goroutines, no redirects, no
// proxies, no compression, no HTTP/2), and keeps idle connections per
// member address, which its reaper closes once they were idle for
// idleTimeout. It serves only requests of an exchange (exchangeOf), whose
// route, timeouts and body it uses, and reports to the exchange when the
// request was sent and how its response body ends. Deadlines on the
// connection bound the wait for response headers and each body read; the
// request's cancellation sets a deadline in the past. A request is sent
// once; only when a reused connection provably never delivered it to the
// member (notReceived) does it go out once more, on a fresh connection.
type memberClient struct {
	tls         *tls.Config // for https members; nil means the system roots.
	idleTimeout time.Duration
	clock       clock.WithTicker

	// beforeWrite, when set (tests only), is called with a reused
	// connection's local address after its liveness check and before the
	// request is written.
	beforeWrite func(local net.Addr)

	mu   sync.Mutex
	idle map[string][]*memberConn // by memberRoute.addr, most recently used last.

	stopOnce sync.Once
	stop     chan struct{} // closed by Close: the reaper returns.
	done     chan struct{} // closed when the reaper returned.
}

// newMemberClient returns a member client with no connections and starts
// its reaper, which closes connections idle for idleTimeout (zero or
// negative means DefaultMemberIdleTimeout) on clk's ticker (nil means the
// real clock). Close stops it.
func newMemberClient(tlsConfig *tls.Config, idleTimeout time.Duration, clk clock.WithTicker) *memberClient {
	if idleTimeout <= 0 {
		idleTimeout = DefaultMemberIdleTimeout
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	u := &memberClient{tls: tlsConfig, idleTimeout: idleTimeout, clock: clk, idle: map[string][]*memberConn{},
		stop: make(chan struct{}), done: make(chan struct{})}
	go u.reap(clk.NewTicker(idleTimeout / reaperChecksPerTimeout))
	return u
}

// reap closes idle connections past their idle timeout on every tick of t,
// until Close.
func (u *memberClient) reap(t clock.Ticker) {
	defer close(u.done)
	defer t.Stop()
	for {
		select {
		case <-u.stop:
			return
		case <-t.C():
			u.closeIdleSince(u.clock.Now().Add(-u.idleTimeout))
		}
	}
}

// Close closes every idle connection and stops the reaper, waiting for it
// to return. Connections in use are not touched; they are closed instead of
// kept when their exchanges end. Close is idempotent.
func (u *memberClient) Close() {
	u.stopOnce.Do(func() { close(u.stop) })
	<-u.done
	u.closeIdle(func(*memberConn) bool { return true })
}

// RoundTrip sends the exchange's request to its member and returns the
// response once its headers arrived. The response body is the exchange's
// memberBody, which keeps the connection until the body is closed. The
// request goes out once, except when it failed on a reused connection that
// provably never delivered it (notReceived): then it goes out once more,
// on a freshly dialled connection, within the same header deadline.
func (u *memberClient) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	ex := exchangeOf(ctx)
	if ex == nil {
		return nil, errNotExchange
	}
	deadline := time.Now().Add(ex.headerTimeout)
	c, err := u.get(ctx, ex.route, deadline)
	if err != nil {
		return nil, err
	}
	resp, err := u.send(ctx, ex, c, req, deadline)
	if errors.Is(err, errNotReceived) {
		if c, err = u.dial(ctx, ex.route, deadline); err != nil {
			return nil, err
		}
		resp, err = u.send(ctx, ex, c, req, deadline)
	}
	return resp, err
}

// send writes the request on c and reads the response headers by deadline.
// On failure c is closed and the error says whether the member provably
// never received the request (errNotReceived, only for a reused c), reset
// a fresh c before any request byte was written (errNotSent and
// errMemberReset) or reset the connection before any response byte
// (errMemberReset).
func (u *memberClient) send(ctx context.Context, ex *exchange, c *memberConn, req *http.Request, deadline time.Time) (*http.Response, error) {
	stop := context.AfterFunc(ctx, c.abort)
	fail := func(err error) (*http.Response, error) {
		stop()
		c.close()
		return nil, err
	}
	// Checking the request after setting a deadline closes the race with
	// abort: either abort runs later and moves the deadline to the past, or
	// the request was already cancelled and the check sees it.
	if err := c.conn.SetDeadline(deadline); err != nil {
		return fail(err)
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	if c.reused && u.beforeWrite != nil {
		u.beforeWrite(c.raw.LocalAddr())
	}
	if n, err := c.writeRequest(req, ex.route, ex.body); err != nil {
		if c.reused && n == 0 && !isTimeout(err) {
			// Not a byte left this side: the member saw nothing.
			return fail(fmt.Errorf("%w: %w", errNotReceived, err))
		}
		err = c.resetError(err)
		if n == 0 && errors.Is(err, errMemberReset) {
			// A fresh connection reset before its first byte: the member
			// saw nothing either.
			err = fmt.Errorf("%w: %w", errNotSent, err)
		}
		return fail(err)
	}
	ex.sent()
	c.limit.set(maxResponseHeaderBytes)
	if _, err := c.br.Peek(1); err != nil {
		// Not a byte of a response arrived.
		if c.reused && errors.Is(err, io.EOF) && c.resetAfterClose() {
			return fail(fmt.Errorf("%w: %w", errNotReceived, err))
		}
		if errors.Is(err, io.EOF) {
			// The member took the request and closed without answering.
			return fail(fmt.Errorf("%w: %w", errMemberClosed, err))
		}
		return fail(c.resetError(err))
	}
	resp, err := readResponse(c.br)
	c.limit.set(-1)
	if err != nil {
		return fail(err)
	}
	resp.Request = req
	ex.resp = memberBody{c: c, ex: ex, body: resp.Body, stop: stop, keep: !resp.Close}
	resp.Body = &ex.resp
	return resp, nil
}

// resetError marks err as the member's reset of a fresh connection before
// any response byte (errMemberReset); other errors are returned as they
// are. A reset of a reused connection is not marked: a live engine's own
// idle close resets a request that reached it just before the close
// (docs/ROUTER.md#21-the-member-client), so it says nothing about the
// engine's health.
func (c *memberConn) resetError(err error) error {
	if !c.reused && (errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)) {
		return fmt.Errorf("%w: %w", errMemberReset, err)
	}
	return err
}

// memberBody is a member's response body as the proxy reads it. Each read
// gets the tier's idleTimeout; the body's end (EOF or error) and Close are
// reported to the exchange, and Close gives the connection back for reuse
// when the response was read to its end, or closes it.
type memberBody struct {
	c    *memberConn // nil before headers and after Close.
	ex   *exchange
	body io.ReadCloser
	stop func() bool // stops the cancellation's abort.
	keep bool        // the member did not ask to close the connection.
	eof  bool
}

// Read reads the member's body with the idle deadline set.
func (b *memberBody) Read(p []byte) (int, error) {
	if b.c == nil {
		return 0, errBodyClosed
	}
	b.ex.bodyRead()
	// As in send: deadline first, then the cancellation check.
	if err := b.c.conn.SetReadDeadline(time.Now().Add(b.ex.idleTimeout)); err != nil {
		b.end(err)
		return 0, err
	}
	if err := b.ex.in.Err(); err != nil { // the client's context, which the request's derives from.
		b.end(err)
		return 0, err
	}
	n, err := b.body.Read(p)
	b.ex.bodyBytes(p[:n])
	if err != nil {
		b.eof = err == io.EOF
		b.end(err)
	}
	return n, err
}

// end reports the body's end to the exchange. A body that failed (the
// client went away, the idle deadline passed, the member broke the
// response) has its connection closed first: the member sees the exchange
// end before its lease is free for another request, so the member never
// serves more requests than its ceiling, even for the moment it takes to
// notice an abandoned one (docs/ROUTER.md#3-terminal-paths).
func (b *memberBody) end(err error) {
	if err != io.EOF {
		_ = b.Close()
	}
	b.ex.bodyEnded(err)
}

// Close ends the body: the connection goes back to the idle pool when the
// body was read to its end and nothing else can touch it, otherwise it is
// closed. The exchange is told. Close is idempotent.
func (b *memberBody) Close() error {
	c := b.c
	if c == nil {
		return nil
	}
	b.c = nil
	if b.stop() && b.eof && b.keep && c.br.Buffered() == 0 {
		b.ex.rt.members.put(c)
	} else {
		c.close()
	}
	b.ex.bodyClosed()
	return nil
}

// memberConn is one connection to a member.
type memberConn struct {
	raw       net.Conn         // the TCP connection.
	peeker    *sockpeek.Peeker // of raw.
	conn      net.Conn         // raw, or the TLS client over it.
	limit     headLimit        // between conn and br: bounds what response heads read.
	br        *bufio.Reader
	head      []byte // scratch for request heads (and small bodies), kept between requests.
	addr      string
	idleSince time.Time
	reused    bool // it carried a request before.
}

// get returns an idle, live connection to route's member, or dials one by
// deadline. The caller owns it until put or close.
func (u *memberClient) get(ctx context.Context, route *memberRoute, deadline time.Time) (*memberConn, error) {
	for {
		c := u.take(route.addr)
		if c == nil {
			break
		}
		if u.clock.Since(c.idleSince) < u.idleTimeout && c.alive() {
			return c, nil
		}
		c.close()
	}
	return u.dial(ctx, route, deadline)
}

// take pops the most recently used idle connection to addr.
func (u *memberClient) take(addr string) *memberConn {
	u.mu.Lock()
	defer u.mu.Unlock()
	cs := u.idle[addr]
	if len(cs) == 0 {
		return nil
	}
	c := cs[len(cs)-1]
	cs[len(cs)-1] = nil
	u.idle[addr] = cs[:len(cs)-1]
	return c
}

// put keeps c for reuse, or closes it when its member has enough idle
// connections.
func (u *memberClient) put(c *memberConn) {
	c.idleSince = u.clock.Now()
	c.reused = true
	u.mu.Lock()
	cs := u.idle[c.addr]
	if len(cs) < maxIdlePerMember {
		u.idle[c.addr] = append(cs, c)
		c = nil
	}
	u.mu.Unlock()
	if c != nil {
		c.close()
	}
}

// closeIdleSince closes the idle connections that went idle before t.
func (u *memberClient) closeIdleSince(t time.Time) {
	u.closeIdle(func(c *memberConn) bool { return c.idleSince.Before(t) })
}

// closeIdleExcept closes every idle connection to an address not in keep:
// members that no tier uses any more.
func (u *memberClient) closeIdleExcept(keep map[string]bool) {
	u.closeIdle(func(c *memberConn) bool { return !keep[c.addr] })
}

// closeIdle closes the idle connections for which drop is true. The
// connections are closed outside the lock.
func (u *memberClient) closeIdle(drop func(*memberConn) bool) {
	var closing []*memberConn
	u.mu.Lock()
	for addr, cs := range u.idle {
		kept := cs[:0]
		for _, c := range cs {
			if drop(c) {
				closing = append(closing, c)
			} else {
				kept = append(kept, c)
			}
		}
		clear(cs[len(kept):])
		if len(kept) == 0 {
			delete(u.idle, addr)
		} else {
			u.idle[addr] = kept
		}
	}
	u.mu.Unlock()
	for _, c := range closing {
		c.close()
	}
}

// dial connects to route's member by deadline, with the TLS handshake for
// an https member. A refused connection is errMemberRefused, and
// errNotSent: not a byte of the request left.
func (u *memberClient) dial(ctx context.Context, route *memberRoute, deadline time.Time) (*memberConn, error) {
	d := net.Dialer{Deadline: deadline, KeepAlive: tcpKeepAlive}
	raw, err := d.DialContext(ctx, "tcp", route.addr)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			err = fmt.Errorf("%w: %w: %w", errNotSent, errMemberRefused, err)
		}
		return nil, err
	}
	c := &memberConn{raw: raw, peeker: sockpeek.NewPeeker(raw), conn: raw, addr: route.addr}
	if route.scheme == "https" {
		cfg := &tls.Config{} //nolint:gosec // MinVersion is Go's default (TLS 1.2).
		if u.tls != nil {
			cfg = u.tls.Clone()
		}
		if cfg.ServerName == "" {
			cfg.ServerName = route.hostname
		}
		tc := tls.Client(raw, cfg)
		if err := raw.SetDeadline(deadline); err != nil {
			_ = raw.Close()
			return nil, err
		}
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = raw.Close()
			return nil, err
		}
		c.conn = tc
	}
	c.limit = headLimit{r: c.conn, n: -1}
	c.br = bufio.NewReaderSize(&c.limit, connBufferSize)
	return c, nil
}

// headLimit is the reader between a connection and its bufio.Reader. While
// set, it lets through at most n more bytes and then fails with
// errHeaderTooLarge, so reading response heads cannot take more than the
// bound from the connection (the bufio.Reader's read-ahead included); with
// n negative it passes reads through. It lives in the memberConn: limiting
// adds neither an allocation nor a copy.
type headLimit struct {
	r io.Reader
	n int64 // bytes left; negative means no limit.
}

// set starts a budget of n bytes, or lifts the limit when n is negative.
func (l *headLimit) set(n int64) { l.n = n }

// Read reads from the connection within the budget.
func (l *headLimit) Read(p []byte) (int, error) {
	if l.n < 0 {
		return l.r.Read(p)
	}
	if l.n == 0 {
		return 0, errHeaderTooLarge
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	return n, err
}

// alive reports whether an idle connection can carry a request: nothing is
// buffered, and the member neither closed or reset the connection nor sent
// bytes nobody asked for since the last response. Where the socket cannot
// be peeked at, a connection the member closed is found when the request
// on it fails.
func (c *memberConn) alive() bool {
	if c.br.Buffered() > 0 || c.raw.SetReadDeadline(time.Time{}) != nil {
		return false
	}
	st := c.peeker.Peek()
	return st == sockpeek.Open || st == sockpeek.Unknown
}

// abort makes the connection's blocked and future reads and writes fail at
// once.
func (c *memberConn) abort() { _ = c.raw.SetDeadline(aLongTimeAgo) }

// close closes the connection.
func (c *memberConn) close() { _ = c.conn.Close() }

// writeRequest sends r's request line and headers for route followed by
// body, in one write, and returns how many bytes the connection took. The
// request target is r.URL's path, escaped, and query (rewrite set both),
// never r.RequestURI, the client's raw target. r's headers are sent as they
// are (hop-by-hop and forwarding headers were removed before) except Host,
// Content-Length and Transfer-Encoding, which the client writes itself,
// Connection and Upgrade (the router asks no engine to switch protocols),
// Expect (the router already holds the body) and an empty User-Agent
// (ReverseProxy's way of asking for none).
func (c *memberConn) writeRequest(r *http.Request, route *memberRoute, body []byte) (int64, error) {
	h := c.head[:0]
	h = append(h, r.Method...)
	h = append(h, ' ')
	h = append(h, r.URL.EscapedPath()...)
	if r.URL.RawQuery != "" {
		h = append(h, '?')
		h = append(h, r.URL.RawQuery...)
	}
	h = append(h, " HTTP/1.1\r\nHost: "...)
	h = append(h, route.host...)
	h = append(h, "\r\n"...)
	for k, vv := range r.Header {
		switch k {
		case "Host", "Content-Length", "Transfer-Encoding", "Connection", "Upgrade", "Expect":
			continue
		case "User-Agent":
			if len(vv) == 1 && vv[0] == "" {
				continue
			}
		}
		for _, v := range vv {
			h = append(h, k...)
			h = append(h, ": "...)
			h = append(h, v...)
			h = append(h, "\r\n"...)
		}
	}
	h = append(h, "Content-Length: "...)
	h = appendUint(h, uint64(len(body)))
	h = append(h, "\r\n\r\n"...)
	var (
		n   int64
		err error
	)
	if len(body) <= inlineBodySize {
		h = append(h, body...)
		var w int
		w, err = c.conn.Write(h)
		n = int64(w)
	} else {
		bufs := net.Buffers{h, body}
		n, err = bufs.WriteTo(c.conn)
	}
	if cap(h) <= maxHeadScratch {
		c.head = h
	}
	return n, err
}

// appendUint appends n in decimal.
func appendUint(b []byte, n uint64) []byte {
	var tmp [20]byte
	i := len(tmp)
	for {
		i--
		tmp[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			break
		}
	}
	return append(b, tmp[i:]...)
}

// readResponse reads the member's response headers, skipping at most
// maxInformational informational (1xx) responses.
func readResponse(br *bufio.Reader) (*http.Response, error) {
	for range maxInformational + 1 {
		resp, err := http.ReadResponse(br, nil)
		switch {
		case err != nil:
			return nil, err
		case resp.StatusCode == http.StatusSwitchingProtocols:
			return nil, errUpgrade
		case resp.StatusCode >= 200 || resp.StatusCode < 100:
			return resp, nil
		}
	}
	return nil, errTooManyInformational
}

// memberAddrs returns the addresses of the members of the table's served
// tiers: the connections worth keeping after a reconfiguration.
func (t *table) memberAddrs() map[string]bool {
	addrs := map[string]bool{}
	for _, ts := range t.served {
		for _, m := range ts.cfg.Load().members {
			addrs[m.addr] = true
		}
	}
	return addrs
}
