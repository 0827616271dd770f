package upstream

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
	"time"

	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/internal/sockpeek"
)

// Tuning of the connections. Members are engines on the same host:
// connections are cheap to keep and slow to churn.
const (
	// DefaultIdleTimeout is the idle timeout of a Client built without
	// WithIdleTimeout: below the 5 s after which uvicorn, vLLM's server,
	// closes an idle keep-alive connection, so the client closes its idle
	// connections first and none lingers in CLOSE_WAIT.
	DefaultIdleTimeout = 4 * time.Second
	// tcpKeepAlive is the keep-alive probe period of the connections.
	tcpKeepAlive = 30 * time.Second
	// maxIdlePerMember keeps one idle connection per concurrent request to
	// a member up to well past any engine's batch size, so a burst does not
	// close and redial connections.
	maxIdlePerMember = 1024
	// reaperChecksPerTimeout is how often per idle timeout the reaper looks
	// at the idle connections: a connection is closed at most an eighth of
	// the timeout late (4.5 s with the default, still before uvicorn's 5 s).
	reaperChecksPerTimeout = 8
	// connBufferSize is the size of each connection's read buffer.
	connBufferSize = 4 << 10
)

// Target is where a member is reached. It is read, never written, by the
// client.
type Target struct {
	// Addr is the host:port to dial, with the scheme's default port; idle
	// connections are kept by it.
	Addr string
	// Scheme is http or https; https dials TLS.
	Scheme string
	// Host is the endpoint's host[:port], the Host header.
	Host string
	// ServerName is the TLS server name when the client's TLS
	// configuration names none: the endpoint's host alone.
	ServerName string
}

// Client is an HTTP/1.1 client that does only what one attempt to an
// engine on the same host needs. It sends one request per connection at a
// time, written and read on the caller's goroutine (no goroutine per
// connection or request, no redirects, no proxies, no compression, no
// HTTP/2), and keeps idle connections per member address, which its reaper
// closes once they were idle for the idle timeout. Create it with New and
// stop it with Close. All methods are safe for concurrent use.
type Client struct {
	tls         *tls.Config // for https members; nil means the system roots.
	idleTimeout time.Duration
	clock       clock.WithTicker
	beforeWrite func(local net.Addr) // WithBeforeWrite; nil calls nothing.

	mu   sync.Mutex
	idle map[string][]*conn // by Target.Addr, most recently used last.

	stopOnce sync.Once
	stop     chan struct{} // closed by Close: the reaper returns.
	done     chan struct{} // closed when the reaper returned.
}

// Option configures a Client.
type Option func(*Client)

// WithTLSConfig sets the client configuration of connections to https
// members; its ServerName defaults to the Target's. Without it (or with
// nil), Go's defaults with the system's roots apply.
func WithTLSConfig(cfg *tls.Config) Option { return func(c *Client) { c.tls = cfg } }

// WithIdleTimeout sets how long a connection may stay idle before the
// reaper closes it; zero or negative keeps DefaultIdleTimeout.
func WithIdleTimeout(d time.Duration) Option {
	return func(c *Client) {
		if d > 0 {
			c.idleTimeout = d
		}
	}
}

// WithClock drives the idle timeout and the reaper's ticker with clk; nil
// keeps the real clock. Connection deadlines are real time whatever the
// clock: the kernel and Go's poller own them.
func WithClock(clk clock.WithTicker) Option {
	return func(c *Client) {
		if clk != nil {
			c.clock = clk
		}
	}
}

// WithBeforeWrite calls f with a reused connection's local address after
// its liveness check and before a request is written on it: the moment an
// engine's idle close can cross the request. It runs on the sending
// goroutine. Nil calls nothing.
func WithBeforeWrite(f func(local net.Addr)) Option { return func(c *Client) { c.beforeWrite = f } }

// New returns a client with no connections and starts its reaper. Close
// stops it.
func New(opts ...Option) *Client {
	c := &Client{idleTimeout: DefaultIdleTimeout, clock: clock.RealClock{}, idle: map[string][]*conn{},
		stop: make(chan struct{}), done: make(chan struct{})}
	for _, o := range opts {
		o(c)
	}
	go c.reap(c.clock.NewTicker(c.idleTimeout / reaperChecksPerTimeout))
	return c
}

// reap closes idle connections past their idle timeout on every tick of t,
// until Close.
func (c *Client) reap(t clock.Ticker) {
	defer close(c.done)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C():
			c.closeIdleSince(c.clock.Now().Add(-c.idleTimeout))
		}
	}
}

// Close closes every idle connection and stops the reaper, waiting for it
// to return. Connections in use are not touched; they are closed instead of
// kept when their attempts end. Close is idempotent.
func (c *Client) Close() {
	c.stopOnce.Do(func() { close(c.stop) })
	<-c.done
	c.closeIdle(func(*conn) bool { return true })
}

// CloseIdleExcept closes every idle connection to an address not in keep:
// members that nobody sends to any more.
func (c *Client) CloseIdleExcept(keep map[string]bool) {
	c.closeIdle(func(cn *conn) bool { return !keep[cn.addr] })
}

// get returns an idle, live connection to t, or dials one by deadline. The
// caller owns it until put or close.
func (c *Client) get(ctx context.Context, t *Target, deadline time.Time) (*conn, error) {
	for {
		cn := c.take(t.Addr)
		if cn == nil {
			break
		}
		if c.clock.Since(cn.idleSince) < c.idleTimeout && cn.alive() {
			return cn, nil
		}
		cn.close()
	}
	return c.dial(ctx, t, deadline)
}

// take pops the most recently used idle connection to addr.
func (c *Client) take(addr string) *conn {
	c.mu.Lock()
	defer c.mu.Unlock()
	cs := c.idle[addr]
	if len(cs) == 0 {
		return nil
	}
	cn := cs[len(cs)-1]
	cs[len(cs)-1] = nil
	c.idle[addr] = cs[:len(cs)-1]
	return cn
}

// put keeps cn for reuse, or closes it when its member has enough idle
// connections.
func (c *Client) put(cn *conn) {
	cn.idleSince = c.clock.Now()
	cn.reused = true
	c.mu.Lock()
	cs := c.idle[cn.addr]
	if len(cs) < maxIdlePerMember {
		c.idle[cn.addr] = append(cs, cn)
		cn = nil
	}
	c.mu.Unlock()
	if cn != nil {
		cn.close()
	}
}

// closeIdleSince closes the idle connections that went idle before t.
func (c *Client) closeIdleSince(t time.Time) {
	c.closeIdle(func(cn *conn) bool { return cn.idleSince.Before(t) })
}

// closeIdle closes the idle connections for which drop is true. The
// connections are closed outside the lock.
func (c *Client) closeIdle(drop func(*conn) bool) {
	var closing []*conn
	c.mu.Lock()
	for addr, cs := range c.idle {
		kept := cs[:0]
		for _, cn := range cs {
			if drop(cn) {
				closing = append(closing, cn)
			} else {
				kept = append(kept, cn)
			}
		}
		clear(cs[len(kept):])
		if len(kept) == 0 {
			delete(c.idle, addr)
		} else {
			c.idle[addr] = kept
		}
	}
	c.mu.Unlock()
	for _, cn := range closing {
		cn.close()
	}
}

// dial connects to t by deadline, with the TLS handshake for an https
// member. A refused connection is ErrRefused, and ErrNotSent: not a byte
// of the request left.
func (c *Client) dial(ctx context.Context, t *Target, deadline time.Time) (*conn, error) {
	d := net.Dialer{Deadline: deadline, KeepAlive: tcpKeepAlive}
	raw, err := d.DialContext(ctx, "tcp", t.Addr)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			err = fmt.Errorf("%w: %w: %w", ErrNotSent, ErrRefused, err)
		}
		return nil, err
	}
	cn := &conn{raw: raw, peeker: sockpeek.NewPeeker(raw), conn: raw, addr: t.Addr}
	if t.Scheme == "https" {
		cfg := &tls.Config{} //nolint:gosec // MinVersion is Go's default (TLS 1.2).
		if c.tls != nil {
			cfg = c.tls.Clone()
		}
		if cfg.ServerName == "" {
			cfg.ServerName = t.ServerName
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
		cn.conn = tc
	} else if sc, ok := raw.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			cn.rc = rc
		}
	}
	cn.limit = headLimit{r: cn.conn, n: -1}
	cn.br = bufio.NewReaderSize(&cn.limit, connBufferSize)
	return cn, nil
}
