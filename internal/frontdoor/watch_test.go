package frontdoor_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/frontdoor"
)

// countingListener counts the reads of the connections it accepts.
type countingListener struct {
	net.Listener
	reads atomic.Int64
}

// Accept returns the next connection, its reads counted.
func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, reads: &l.reads}, nil
}

// countingConn counts its reads.
type countingConn struct {
	net.Conn
	reads *atomic.Int64
}

// Read reads from the connection and counts the call.
func (c *countingConn) Read(p []byte) (int, error) {
	c.reads.Add(1)
	return c.Conn.Read(p)
}

// TestQuickRequestsStartNoWatch checks that a request answered before
// WatchAfter costs its connection one read, the one that brought it: no
// watch of the client starts. net/http's server reads twice per request
// (its background read, then the next request).
func TestQuickRequestsStartNoWatch(t *testing.T) {
	const requests = 20
	ln, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &countingListener{Listener: ln}
	s := &frontdoor.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			_, _ = io.WriteString(w, "ok")
		}),
		WatchAfter: time.Hour,
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(cl) }()
	t.Cleanup(func() {
		_ = s.Close()
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve returned %v, want http.ErrServerClosed", err)
		}
	})

	conn := dial(t, ln.Addr().String())
	br := bufio.NewReader(conn)
	for i := range requests {
		method := http.MethodGet
		body := ""
		if i%2 == 1 {
			method, body = http.MethodPost, `{"n":1}`
		}
		if _, err := fmt.Fprintf(conn, "%s /v1/x HTTP/1.1\r\nHost: h\r\nContent-Length: %d\r\n\r\n%s", method, len(body), body); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(b) != "ok" {
			t.Fatalf("request %d: %d %q", i, resp.StatusCode, b)
		}
	}
	// Each request's read, and the one waiting for the next request.
	if got := cl.reads.Load(); got > requests+1 {
		t.Fatalf("%d quick requests took %d reads of their connection, want at most %d: a watch read the client", requests, got, requests+1)
	}
}

// TestConcurrentSmallBodiesKeepTheirBytes checks that responses held back
// until the handler ends (small bodies without a Content-Length, given one
// by the server) each carry their own bytes while many connections answer
// at once: the buffer that holds one goes back to the pool only after its
// bytes were written.
func TestConcurrentSmallBodiesKeepTheirBytes(t *testing.T) {
	const clients, requests = 32, 100
	s := &frontdoor.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, strings.Repeat(r.URL.Query().Get("v"), 512)) //nolint:gosec // the test's own client reads it back.
	})}
	addr, served := startFD(t, s)
	t.Cleanup(func() {
		_ = s.Close()
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve returned %v, want http.ErrServerClosed", err)
		}
	})
	errs := make(chan error, clients)
	for c := range clients {
		conn := dial(t, addr)
		go func() {
			br := bufio.NewReader(conn)
			for i := range requests {
				v := string(rune('a' + (c*requests+i)%26))
				if _, err := fmt.Fprintf(conn, "GET /?v=%s HTTP/1.1\r\nHost: h\r\n\r\n", v); err != nil {
					errs <- err
					return
				}
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					errs <- err
					return
				}
				b, err := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				if err != nil || string(b) != strings.Repeat(v, 512) || resp.ContentLength != 512 {
					errs <- fmt.Errorf("client %d request %d: %d bytes, Content-Length %d, want 512 of %q (%v)", c, i, len(b), resp.ContentLength, v, err)
					return
				}
			}
			errs <- nil
		}()
	}
	for range clients {
		if err := recv(t, errs, "a client's requests"); err != nil {
			t.Fatal(err)
		}
	}
}
