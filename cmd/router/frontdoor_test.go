package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// dialFront opens a connection to the front door; it is closed when the
// test ends.
func dialFront(t *testing.T, addr net.Addr) net.Conn {
	t.Helper()
	conn, err := (&net.Dialer{Timeout: failSafe}).DialContext(context.Background(), "tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// modelsRequest is GET /v1/models with the tests' key.
const modelsRequest = "GET /v1/models HTTP/1.1\r\nHost: router\r\nAuthorization: Bearer secret\r\n\r\n"

// authenticatedConn opens a connection and authenticates it with a GET
// /v1/models, whose 200 it reads; the connection stays open.
func authenticatedConn(t *testing.T, addr net.Addr) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn := dialFront(t, addr)
	br := bufio.NewReader(conn)
	if _, err := io.WriteString(conn, modelsRequest); err != nil {
		t.Fatal(err)
	}
	if err := conn.SetReadDeadline(time.Now().Add(failSafe)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("authenticated GET /v1/models: %d, close %v", resp.StatusCode, resp.Close)
	}
	return conn, br
}

// waitClosed waits, at most failSafe, for the router to close conn: a
// read ends without a response byte.
func waitClosed(t *testing.T, conn net.Conn, what string) {
	t.Helper()
	if err := conn.SetReadDeadline(time.Now().Add(failSafe)); err != nil {
		t.Fatal(err)
	}
	n, err := conn.Read(make([]byte, 1))
	var ne net.Error
	if n > 0 || errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("%s: the router did not close the connection (%d bytes, %v)", what, n, err)
	}
}

// stillOpen checks the router has not closed conn: a short read times
// out.
func stillOpen(t *testing.T, conn net.Conn, what string) {
	t.Helper()
	if err := conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	_, err := conn.Read(make([]byte, 1))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("%s: the connection was closed (%v)", what, err)
	}
}

// TestRunConnectionLimits runs the command with 4 connections of which 2
// unauthenticated: a third silent connection closes the oldest silent one;
// connections that authenticate fill the rest and push the silent ones
// out; with every slot authenticated a new connection is closed at once,
// while the authenticated ones keep serving; the metrics count each.
func TestRunConnectionLimits(t *testing.T) {
	finish, arrived, probed := make(chan struct{}), make(chan struct{}, 4), make(chan struct{}, 1)
	defer close(finish)
	up := engine(t, finish, arrived, probed)
	s, _, cancel, _ := startRouter(t, up.URL, "--max-connections", "4", "--max-unauthenticated-connections", "2")
	defer cancel()

	u1, u2 := dialFront(t, s.front), dialFront(t, s.front)
	u3 := dialFront(t, s.front)
	waitClosed(t, u1, "the oldest of three silent connections")
	stillOpen(t, u2, "the second silent connection")
	a1, br1 := authenticatedConn(t, s.front) // arriving, it pushes u2 out.
	waitClosed(t, u2, "a silent connection, when a third unauthenticated one arrived")
	authenticatedConn(t, s.front)
	authenticatedConn(t, s.front) // four open: u3 and three authenticated.
	stillOpen(t, u3, "the last silent connection within the limits")
	authenticatedConn(t, s.front) // over the total: u3 goes.
	waitClosed(t, u3, "the silent connection, when the total was reached")

	x := dialFront(t, s.front)
	_, _ = io.WriteString(x, modelsRequest)
	waitClosed(t, x, "a new connection with every slot authenticated")
	// The authenticated connections keep their keep-alive.
	if _, err := io.WriteString(a1, modelsRequest); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br1, nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("an authenticated connection's second request: %v %v", resp, err)
	}
	_ = resp.Body.Close()

	metrics := scrape(t, s.admin)
	for _, want := range []string{
		"sluice_front_door_connections 4\n",
		"sluice_front_door_unauthenticated_connections 0\n",
		`sluice_front_door_connections_closed_total{reason="connection_limit"} 1` + "\n",
		`sluice_front_door_connections_closed_total{reason="unauthenticated_evicted"} 3` + "\n",
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// scrape reads the admin listener's /metrics.
func scrape(t *testing.T, admin net.Addr) string {
	t.Helper()
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://"+admin.String()+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRunUnauthenticatedConnectionClosed: every refusal a client without a
// key can get from the front door ends its connection after the response
// (401 on both route kinds, 404 for an unknown route, 405), so no
// unauthenticated connection idles in keep-alive.
func TestRunUnauthenticatedConnectionClosed(t *testing.T) {
	finish, arrived, probed := make(chan struct{}), make(chan struct{}, 4), make(chan struct{}, 1)
	defer close(finish)
	up := engine(t, finish, arrived, probed)
	s, _, cancel, _ := startRouter(t, up.URL)
	defer cancel()
	for _, tt := range []struct {
		request string
		status  int
	}{
		{"GET /v1/models HTTP/1.1\r\nHost: router\r\n\r\n", http.StatusUnauthorized},
		{"POST /v1/chat/completions HTTP/1.1\r\nHost: router\r\nContent-Length: 2\r\n\r\n{}", http.StatusUnauthorized},
		{"GET /v1/nothing HTTP/1.1\r\nHost: router\r\n\r\n", http.StatusNotFound},
		{"PUT /v1/models HTTP/1.1\r\nHost: router\r\n\r\n", http.StatusMethodNotAllowed},
	} {
		conn := dialFront(t, s.front)
		if _, err := io.WriteString(conn, tt.request); err != nil {
			t.Fatal(err)
		}
		r := readRawResponse(t, conn)
		if r.status != tt.status || !r.close {
			t.Errorf("%q: %d, close %v; want %d and Connection: close", tt.request, r.status, r.close, tt.status)
		}
		waitClosed(t, conn, tt.request)
	}
}

// TestRunClosesAfterChunkedRequest sends the request smuggling pair on one
// connection: a request with both Content-Length and Transfer-Encoding
// whose chunked body ends before the bytes of a second request (which a
// proxy trusting the Content-Length would take for the first request's
// body). The router answers the first request and closes the connection:
// the client reads exactly one response, then the end.
func TestRunClosesAfterChunkedRequest(t *testing.T) {
	finish, arrived, probed := make(chan struct{}), make(chan struct{}, 4), make(chan struct{}, 1)
	close(finish) // the engine answers at once.
	up := engine(t, finish, arrived, probed)
	s, _, cancel, _ := startRouter(t, up.URL)
	defer cancel()
	waitReady(t, s, probed)

	body := `{"model":"llama"}`
	chunked := strconv.FormatInt(int64(len(body)), 16) + "\r\n" + body + "\r\n0\r\n\r\n"
	smuggled := modelsRequest
	head := "POST /v1/chat/completions HTTP/1.1\r\nHost: router\r\nAuthorization: Bearer secret\r\n" +
		"Content-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(chunked)+len(smuggled)) + "\r\n" +
		"Transfer-Encoding: chunked\r\n\r\n"
	conn := dialFront(t, s.front)
	if _, err := io.WriteString(conn, head+chunked+smuggled); err != nil {
		t.Fatal(err)
	}
	if err := conn.SetReadDeadline(time.Now().Add(failSafe)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	rest, err := io.ReadAll(br)
	if resp.StatusCode != http.StatusOK || !resp.Close || len(rest) != 0 || err != nil {
		t.Fatalf("the chunked request: %d %q, close %v, then %q, %v; want 200 with Connection: close, then the end of the connection",
			resp.StatusCode, got, resp.Close, rest, err)
	}
}

// TestRunAdminConnectionsBounded: the admin listener, open on every
// interface of a node like the front door, holds at most
// maxAdminConnections; one more pushes out the oldest, and the probes
// still get their answer on a new connection while the others stay open.
func TestRunAdminConnectionsBounded(t *testing.T) {
	finish, arrived, probed := make(chan struct{}), make(chan struct{}, 4), make(chan struct{}, 1)
	defer close(finish)
	up := engine(t, finish, arrived, probed)
	s, _, cancel, _ := startRouter(t, up.URL)
	defer cancel()

	silent := make([]net.Conn, maxAdminConnections)
	for i := range silent {
		silent[i] = dialFront(t, s.admin)
	}
	dialFront(t, s.admin)
	waitClosed(t, silent[0], "the oldest admin connection, one over the bound")
	stillOpen(t, silent[1], "the second oldest admin connection")
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://"+s.admin.String()+"/readyz", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/readyz during the flood: %d", resp.StatusCode)
	}
	waitClosed(t, silent[1], "the second oldest admin connection, when the probe arrived")
	stillOpen(t, silent[len(silent)-1], "the newest silent admin connection")
}
