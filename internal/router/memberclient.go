package router

import (
	"bufio"
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
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
	// idleConnTimeout closes a connection that stayed idle that long
	// instead of reusing it.
	idleConnTimeout = 90 * time.Second
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

// memberClient is the router's HTTP/1.1 client for members. It is deliberately
// small: one request per connection at a time, written and read on the
// serving goroutine (no per-connection goroutines, no retries, no
// redirects, no proxies, no compression), with idle connections kept per
// member address. Deadlines on the connection bound the wait for response
// headers and each body read; a request's cancellation sets a deadline in
// the past.
type memberClient struct {
	tls *tls.Config // for https members; nil means the system roots.

	mu   sync.Mutex
	idle map[string][]*memberConn // by memberRoute.addr, most recently used last.
}

// newMemberClient returns an upstream with no connections.
func newMemberClient(tlsConfig *tls.Config) *memberClient {
	return &memberClient{tls: tlsConfig, idle: map[string][]*memberConn{}}
}

// memberConn is one connection to a member.
type memberConn struct {
	raw       net.Conn // the TCP connection.
	conn      net.Conn // raw, or the TLS client over it.
	br        *bufio.Reader
	head      []byte // scratch for request heads (and small bodies), kept between requests.
	addr      string
	idleSince time.Time
}

// get returns an idle, live connection to route's member, or dials one by
// deadline. The caller owns it until put or close.
func (u *memberClient) get(ctx context.Context, route *memberRoute, deadline time.Time) (*memberConn, error) {
	for {
		c := u.take(route.addr)
		if c == nil {
			break
		}
		if time.Since(c.idleSince) < idleConnTimeout && c.alive() {
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
	c.idleSince = time.Now()
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

// closeIdle closes every idle connection.
func (u *memberClient) closeIdle() {
	u.mu.Lock()
	idle := u.idle
	u.idle = map[string][]*memberConn{}
	u.mu.Unlock()
	for _, cs := range idle {
		for _, c := range cs {
			c.close()
		}
	}
}

// dial connects to route's member by deadline, with the TLS handshake for
// an https member.
func (u *memberClient) dial(ctx context.Context, route *memberRoute, deadline time.Time) (*memberConn, error) {
	d := net.Dialer{Deadline: deadline, KeepAlive: tcpKeepAlive}
	raw, err := d.DialContext(ctx, "tcp", route.addr)
	if err != nil {
		return nil, err
	}
	c := &memberConn{raw: raw, conn: raw, addr: route.addr}
	if route.tls {
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
	c.br = bufio.NewReaderSize(c.conn, connBufferSize)
	return c, nil
}

// alive reports whether an idle connection can carry a request: nothing is
// buffered, and the member neither closed the connection nor sent anything
// since the last response (see peerClosed).
func (c *memberConn) alive() bool {
	if c.br.Buffered() > 0 || c.raw.SetReadDeadline(time.Time{}) != nil {
		return false
	}
	return !peerClosed(c.raw)
}

// abort makes the connection's blocked and future reads and writes fail at
// once.
func (c *memberConn) abort() { _ = c.raw.SetDeadline(aLongTimeAgo) }

// close closes the connection.
func (c *memberConn) close() { _ = c.conn.Close() }

// writeRequest sends r's request line and headers for route, with the
// router's request id, followed by the body, in one write. Hop-by-hop
// headers, Expect (the router already holds the body), Host,
// Content-Length, forwarding headers and the client's own request id are
// not forwarded; stripAuth drops Authorization as well.
func (c *memberConn) writeRequest(r *http.Request, route *memberRoute, requestID string, body []byte, stripAuth bool) error {
	uri := r.RequestURI
	if !strings.HasPrefix(uri, "/") {
		uri = r.URL.RequestURI()
	}
	h := c.head[:0]
	h = append(h, r.Method...)
	h = append(h, ' ')
	h = append(h, uri...)
	h = append(h, " HTTP/1.1\r\nHost: "...)
	h = append(h, route.host...)
	h = append(h, "\r\n"...)
	conn := r.Header["Connection"]
	for k, vv := range r.Header {
		if skipRequestHeader(k, conn, stripAuth) {
			continue
		}
		for _, v := range vv {
			h = append(h, k...)
			h = append(h, ": "...)
			h = append(h, v...)
			h = append(h, "\r\n"...)
		}
	}
	h = append(h, "X-Request-Id: "...)
	h = append(h, requestID...)
	h = append(h, "\r\nContent-Length: "...)
	h = appendUint(h, uint64(len(body)))
	h = append(h, "\r\n\r\n"...)
	var err error
	if len(body) <= inlineBodySize {
		h = append(h, body...)
		_, err = c.conn.Write(h)
	} else {
		bufs := net.Buffers{h, body}
		_, err = bufs.WriteTo(c.conn)
	}
	if cap(h) <= maxHeadScratch {
		c.head = h
	}
	return err
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

// skipRequestHeader reports whether the client's header k is not forwarded.
// Forwarding headers a client sent are dropped: the router adds none, and
// a member must not trust what a client claims about its own address.
func skipRequestHeader(k string, connection []string, stripAuth bool) bool {
	switch k {
	case "Host", "Content-Length", "Expect", headerRequestID,
		"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto":
		return true
	case "Authorization":
		return stripAuth
	}
	return hopByHop(k, connection)
}

// hopHeaders are the hop-by-hop headers of RFC 9110 §7.6.1 and their
// historic companions, which a proxy never forwards.
var hopHeaders = map[string]bool{
	"Connection":          true,
	"Proxy-Connection":    true,
	"Keep-Alive":          true,
	"Proxy-Authenticate":  true,
	"Proxy-Authorization": true,
	"Te":                  true,
	"Trailer":             true,
	"Transfer-Encoding":   true,
	"Upgrade":             true,
}

// hopByHop reports whether k is a hop-by-hop header, by the fixed list or
// because a Connection header value names it.
func hopByHop(k string, connection []string) bool {
	if hopHeaders[k] {
		return true
	}
	for _, v := range connection {
		for tok := range strings.SplitSeq(v, ",") {
			if http.CanonicalHeaderKey(strings.TrimSpace(tok)) == k {
				return true
			}
		}
	}
	return false
}
