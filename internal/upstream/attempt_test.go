package upstream

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// failSafe bounds every wait of these tests; none is reached when they pass.
const failSafe = 10 * time.Second

// server is an httptest member counting the connections it accepted and
// reporting each connection state change on states (dropped when full).
func server(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int64, <-chan http.ConnState) {
	t.Helper()
	var conns atomic.Int64
	states := make(chan http.ConnState, 64)
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
		select {
		case states <- s:
		default:
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &conns, states
}

// targetOf returns the Target of an httptest server.
func targetOf(srv *httptest.Server) *Target {
	addr := srv.Listener.Addr().String()
	host, _, _ := net.SplitHostPort(addr)
	return &Target{Addr: addr, Scheme: "http", Host: addr, ServerName: host}
}

// do sends body to t and reads the whole response through one Attempt.
func do(t *testing.T, c *Client, tg *Target, body []byte) (int, string) {
	t.Helper()
	req := &Request{Method: http.MethodPost, Path: "/v1/chat/completions", Header: http.Header{}, Body: body,
		HeaderTimeout: failSafe, IdleTimeout: failSafe}
	var a Attempt
	if err := c.Send(t.Context(), &a, tg, req); err != nil {
		t.Fatalf("Send: %v", err)
	}
	head, err := a.ReadHead()
	if err != nil {
		t.Fatalf("ReadHead: %v", err)
	}
	b, err := io.ReadAll(&a)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	_ = a.Close()
	return head.Status, string(b)
}

// TestAttemptBodies proves request bodies reach the member byte for byte
// whether they go out in the head's write or after it, on one reused
// connection whose scratch buffer grows and shrinks between requests.
func TestAttemptBodies(t *testing.T) {
	got := make(chan []byte, 1)
	srv, conns, _ := server(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- b
		_, _ = io.WriteString(w, "{}")
	})
	c := New()
	defer c.Close()
	for _, size := range []int{64, inlineBodySize - 1, inlineBodySize, inlineBodySize + 1, 5 * maxHeadScratch, 64} {
		want := strings.Repeat("b", size)
		if status, reply := do(t, c, targetOf(srv), []byte(want)); status != http.StatusOK || reply != "{}" {
			t.Fatalf("%d-byte body: %d %s", size, status, reply)
		}
		if b := <-got; string(b) != want {
			t.Fatalf("%d-byte body: member read %d bytes, not the client's", size, len(b))
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("sequential requests used %d connections, want 1", n)
	}
}

// TestAttemptHeader proves what the member receives of a Request's header:
// its fields, less the ones the client writes or refuses itself, with
// Fields replacing (or, without values, removing) fields of their names.
func TestAttemptHeader(t *testing.T) {
	got := make(chan *http.Request, 1)
	srv, _, _ := server(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		got <- r
		_, _ = io.WriteString(w, "{}")
	})
	c := New()
	defer c.Close()
	h := http.Header{
		"X-Custom": {"a", "b"}, "X-Replaced": {"client"}, "X-Removed": {"client"}, "User-Agent": {""},
		"Connection": {"close"}, "Keep-Alive": {"1"}, "Te": {"gzip"}, "Trailer": {"X"}, "Upgrade": {"h2c"},
		"Proxy-Authorization": {"x"}, "Expect": {"100-continue"}, "Host": {"client.example"}, "Content-Length": {"99"},
	}
	req := &Request{Method: http.MethodPost, Path: "/v1/completions", RawQuery: "a=1", Header: h, Body: []byte("{}"),
		Fields:        []Field{{Name: "X-Replaced", Values: []string{"router"}}, {Name: "X-Removed"}, {Name: "Te", Values: []string{"trailers"}}},
		HeaderTimeout: failSafe, IdleTimeout: failSafe}
	tg := targetOf(srv)
	var a Attempt
	if err := c.Send(t.Context(), &a, tg, req); err != nil {
		t.Fatal(err)
	}
	if _, err := a.ReadHead(); err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, &a)
	_ = a.Close()
	r := <-got
	if r.RequestURI != "/v1/completions?a=1" || r.Host != tg.Host || r.ContentLength != 2 {
		t.Errorf("target %q host %q length %d", r.RequestURI, r.Host, r.ContentLength)
	}
	for name, want := range map[string]string{"X-Custom": "a,b", "X-Replaced": "router", "X-Removed": "", "User-Agent": "",
		"Connection": "", "Keep-Alive": "", "Te": "trailers", "Trailer": "", "Upgrade": "", "Proxy-Authorization": "", "Expect": ""} {
		if v := strings.Join(r.Header.Values(name), ","); v != want {
			t.Errorf("member got %s %q, want %q", name, v, want)
		}
	}
}

// TestAttemptReturnsConnection proves an attempt gives its connection back
// only when the body was read whole and the member allows keep-alive: a
// body closed early or a Connection: close response costs a new
// connection.
func TestAttemptReturnsConnection(t *testing.T) {
	srv, conns, _ := server(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.URL.Query().Get("close") != "" {
			w.Header().Set("Connection", "close")
		}
		_, _ = io.WriteString(w, strings.Repeat("x", 64<<10))
	})
	c := New()
	defer c.Close()
	tg := targetOf(srv)
	send := func(query string, whole bool) {
		t.Helper()
		req := &Request{Method: http.MethodPost, Path: "/", RawQuery: query, Header: http.Header{}, HeaderTimeout: failSafe, IdleTimeout: failSafe}
		var a Attempt
		if err := c.Send(t.Context(), &a, tg, req); err != nil {
			t.Fatal(err)
		}
		if _, err := a.ReadHead(); err != nil {
			t.Fatal(err)
		}
		if whole {
			_, _ = io.Copy(io.Discard, &a)
		} else {
			_, _ = a.Read(make([]byte, 10))
		}
		_ = a.Close()
		_ = a.Close() // idempotent.
		if _, err := a.Read(make([]byte, 1)); !errors.Is(err, ErrBodyClosed) {
			t.Fatalf("read after Close: %v, want ErrBodyClosed", err)
		}
	}
	send("", true)
	send("", true)
	if n := conns.Load(); n != 1 {
		t.Fatalf("two whole bodies used %d connections, want 1", n)
	}
	send("", false) // reuses it, then closes it.
	send("", true)
	if n := conns.Load(); n != 2 {
		t.Fatalf("after a body closed early: %d connections, want 2", n)
	}
	send("close=1", true) // reuses it; the member closes it.
	send("", true)
	if n := conns.Load(); n != 3 {
		t.Fatalf("after Connection: close: %d connections, want 3", n)
	}
}

// TestAttemptCancel proves the context given to Send ends a body read that
// waits for the member, and closes the connection.
func TestAttemptCancel(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	srv, _, states := server(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	c := New()
	defer c.Close()
	ctx, cancel := context.WithCancel(t.Context())
	req := &Request{Method: http.MethodPost, Path: "/", Header: http.Header{}, HeaderTimeout: failSafe, IdleTimeout: failSafe}
	var a Attempt
	if err := c.Send(ctx, &a, targetOf(srv), req); err != nil {
		t.Fatal(err)
	}
	if _, err := a.ReadHead(); err != nil {
		t.Fatal(err)
	}
	read := make(chan error, 1)
	go func() {
		_, err := a.Read(make([]byte, 16))
		read <- err
	}()
	cancel()
	select {
	case err := <-read:
		if err == nil {
			t.Fatal("the read succeeded after the cancellation")
		}
	case <-time.After(failSafe):
		t.Fatal("the read waited on after the cancellation")
	}
	waitState(t, states, http.StateClosed)
}

// TestWriteFailureNotSent proves an attempt reports a request as not sent
// (ErrNotSent) only when a fresh connection was reset or broken before its
// first byte was written: a byte written, a write deadline, or a reused
// connection (resent instead, errNotReceived) is not; and the request
// counts as sent only once written whole.
func TestWriteFailureNotSent(t *testing.T) {
	tests := []struct {
		desc        string
		n           int
		err         error
		reused      bool
		wantNotSent bool
		wantReset   bool
	}{
		{desc: "reset before the first byte", err: syscall.ECONNRESET, wantNotSent: true, wantReset: true},
		{desc: "broken pipe before the first byte", err: syscall.EPIPE, wantNotSent: true, wantReset: true},
		{desc: "reset after a byte", n: 1, err: syscall.ECONNRESET, wantReset: true},
		{desc: "write deadline", err: os.ErrDeadlineExceeded},
		{desc: "reused connection", err: syscall.ECONNRESET, reused: true},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			local, remote := net.Pipe()
			defer func() { _ = remote.Close() }()
			fc := &failingWriteConn{Conn: local, n: tt.n, err: tt.err}
			cn := &conn{raw: fc, conn: fc, reused: tt.reused}
			a := Attempt{client: &Client{}, target: &Target{Host: "gpu0"}, ctx: context.Background(), deadline: time.Now().Add(failSafe),
				req: &Request{Method: http.MethodPost, Path: "/v1/chat/completions", Body: []byte(`{"model":"llama"}`)}}
			err := a.write(cn)
			if err == nil {
				t.Fatal("write succeeded")
			}
			if errors.Is(err, ErrNotSent) != tt.wantNotSent || errors.Is(err, ErrReset) != tt.wantReset {
				t.Fatalf("error %v: not sent %v, reset %v; want %v, %v", err, errors.Is(err, ErrNotSent),
					errors.Is(err, ErrReset), tt.wantNotSent, tt.wantReset)
			}
			if a.Sent() {
				t.Fatal("the attempt counts the request as sent: nothing was written whole")
			}
		})
	}
}

// failingWriteConn is a connection whose writes take n bytes and fail
// with err.
type failingWriteConn struct {
	net.Conn
	n   int
	err error
}

// Write takes n bytes of p and fails.
func (c *failingWriteConn) Write(p []byte) (int, error) { return min(c.n, len(p)), c.err }

// rawMember serves one connection by hand: serve gets it after the
// request was read.
func rawMember(t *testing.T, serve func(c net.Conn)) *Target {
	t.Helper()
	ln, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
	})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer func() { _ = c.Close() }()
		req, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, req.Body)
		serve(c)
	}()
	addr := ln.Addr().String()
	return &Target{Addr: addr, Scheme: "http", Host: addr}
}

// TestReadHeadErrors proves how ReadHead classifies what a member sends
// instead of a response head, and that informational responses up to the
// bound are skipped.
func TestReadHeadErrors(t *testing.T) {
	const processing = "HTTP/1.1 102 Processing\r\n\r\n"
	tests := []struct {
		desc       string
		reply      string
		wantErr    error
		wantStatus int
	}{
		{desc: "1xx up to the bound", reply: strings.Repeat(processing, MaxInformational) + "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", wantStatus: http.StatusOK},
		{desc: "one 1xx too many", reply: strings.Repeat(processing, MaxInformational+1), wantErr: ErrTooManyInformational},
		{desc: "101", reply: "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n", wantErr: ErrSwitchingProtocols},
		{desc: "head above the bound", reply: "HTTP/1.1 200 OK\r\nX-Pad: " + strings.Repeat("p", MaxResponseHeadBytes), wantErr: ErrHeaderTooLarge},
		{desc: "closed without a byte", reply: "", wantErr: ErrClosed},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			tg := rawMember(t, func(c net.Conn) { _, _ = io.WriteString(c, tt.reply) })
			c := New()
			defer c.Close()
			req := &Request{Method: http.MethodPost, Path: "/", Header: http.Header{}, HeaderTimeout: failSafe, IdleTimeout: failSafe}
			var a Attempt
			if err := c.Send(t.Context(), &a, tg, req); err != nil {
				t.Fatal(err)
			}
			head, err := a.ReadHead()
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("ReadHead: %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil || head.Status != tt.wantStatus {
				t.Fatalf("ReadHead: %d, %v; want %d", head.Status, err, tt.wantStatus)
			}
			_ = a.Close()
		})
	}
}

// TestDialRefusedNotSent proves a refused connection is ErrNotSent and
// ErrRefused: the member cannot have seen the request.
func TestDialRefusedNotSent(t *testing.T) {
	ln, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	c := New()
	defer c.Close()
	var a Attempt
	err = c.Send(t.Context(), &a, &Target{Addr: addr, Scheme: "http", Host: addr},
		&Request{Method: http.MethodPost, Path: "/", HeaderTimeout: failSafe, IdleTimeout: failSafe})
	if !errors.Is(err, ErrNotSent) || !errors.Is(err, ErrRefused) {
		t.Fatalf("Send: %v, want ErrNotSent and ErrRefused", err)
	}
}

// TestAppendUint covers the request head's Content-Length formatting.
func TestAppendUint(t *testing.T) {
	for n, want := range map[uint64]string{0: "0", 7: "7", 10: "10", 1234567890: "1234567890", 1<<64 - 1: "18446744073709551615"} {
		if got := string(appendUint([]byte("x"), n)); got != "x"+want {
			t.Errorf("appendUint(%d) = %q, want %q", n, got, "x"+want)
		}
	}
}

// TestAttemptWait proves Wait waits for the body's next bytes without
// reading any, returns at once for a body with none to come, and leaves
// whatever ended the wait to the next Read: the bytes, the member's reset
// (reported as a reset, not as the end of file the socket reads after
// it), the idle deadline and the context's cancellation.
func TestAttemptWait(t *testing.T) {
	const streamHead = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
	const event = "data: 1\n\n"
	tests := []struct {
		desc    string
		head    string
		idle    time.Duration
		then    func(c net.Conn) // what the member does once the test lets it.
		cancel  bool
		want    string
		wantErr func(error) bool
	}{
		{desc: "an event", head: streamHead, then: func(c net.Conn) {
			_, _ = io.WriteString(c, "9\r\n"+event+"\r\n")
		}, want: event},
		{desc: "no body", head: "HTTP/1.1 204 No Content\r\nContent-Type: text/event-stream\r\n\r\n",
			wantErr: func(err error) bool { return err == io.EOF }},
		{desc: "reset", head: streamHead, then: func(c net.Conn) {
			_ = c.(*net.TCPConn).SetLinger(0)
			_ = c.Close()
		}, wantErr: func(err error) bool { return errors.Is(err, syscall.ECONNRESET) }},
		{desc: "idle deadline", head: streamHead, idle: 50 * time.Millisecond,
			wantErr: func(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }},
		{desc: "cancelled", head: streamHead, cancel: true,
			wantErr: func(err error) bool {
				return errors.Is(err, context.Canceled) || errors.Is(err, os.ErrDeadlineExceeded)
			}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			allow, finished := make(chan struct{}), make(chan struct{})
			defer close(finished)
			tg := rawMember(t, func(c net.Conn) {
				_, _ = io.WriteString(c, tt.head)
				select {
				case <-allow:
				case <-finished:
					return
				}
				if tt.then != nil {
					tt.then(c)
				}
				<-finished
			})
			c := New()
			defer c.Close()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			idle := cmp.Or(tt.idle, failSafe)
			req := &Request{Method: http.MethodPost, Path: "/", Header: http.Header{}, HeaderTimeout: failSafe, IdleTimeout: idle}
			var a Attempt
			if err := c.Send(ctx, &a, tg, req); err != nil {
				t.Fatal(err)
			}
			if _, err := a.ReadHead(); err != nil {
				t.Fatal(err)
			}
			waited := make(chan struct{})
			go func() {
				a.Wait()
				close(waited)
			}()
			if tt.head == streamHead && tt.idle == 0 && !tt.cancel {
				// Only the member's next move ends this wait.
				select {
				case <-waited:
					t.Fatal("Wait returned before the member sent anything")
				default:
				}
			}
			close(allow)
			if tt.cancel {
				cancel()
			}
			select {
			case <-waited:
			case <-time.After(failSafe):
				t.Fatal("Wait did not return")
			}
			if tt.want != "" && a.c.br.Buffered() == 0 {
				t.Fatal("Wait returned with nothing buffered")
			}
			buf := make([]byte, 64)
			n, err := a.Read(buf)
			if tt.want != "" {
				if err != nil || string(buf[:n]) != tt.want {
					t.Fatalf("Read after Wait: %q, %v; want %q", buf[:n], err, tt.want)
				}
				return
			}
			if err == nil || !tt.wantErr(err) {
				t.Fatalf("Read after Wait: %d, %v", n, err)
			}
		})
	}
}
