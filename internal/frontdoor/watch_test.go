package frontdoor_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
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
