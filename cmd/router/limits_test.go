package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/adminapi"
)

// testBodyReadTimeout is the --body-read-timeout of the tests below: short,
// so that a test waiting for it ends quickly, and long enough for a
// complete request written at once on a loaded machine.
const testBodyReadTimeout = "300ms"

// slowBodyReadTimeout is the --body-read-timeout of the test that checks
// the admin API between two dribbled bytes: dribbledBytes round trips to
// the admin API must fit in it on a loaded machine, or the router times
// the body out while the test still writes it.
const slowBodyReadTimeout = "3s"

// dribbledBytes is how many body bytes slowBody sends, one at a time; its
// Content-Length announces more, so the body never completes.
const dribbledBytes = 8

// slowBody sends a request's headers announcing a 1000-byte body and then
// dribbles dribbledBytes of it, calling check between two bytes. It
// returns the connection, whose response is still to be read.
func slowBody(t *testing.T, addr string, check func()) net.Conn {
	t.Helper()
	conn, err := (&net.Dialer{}).DialContext(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	head := "POST /v1/chat/completions HTTP/1.1\r\nHost: router\r\nAuthorization: Bearer secret\r\n" +
		"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	body := `{"model":"llama","messages":[` + strings.Repeat(" ", dribbledBytes)
	for i := range dribbledBytes {
		if _, err := io.WriteString(conn, body[i:i+1]); err != nil {
			t.Fatal(err)
		}
		if check != nil {
			check()
		}
	}
	return conn
}

// rawResponse is what readRawResponse read.
type rawResponse struct {
	status int
	close  bool // the response asked to close the connection.
	body   string
}

// readRawResponse reads one response from conn, bounded by failSafe.
func readRawResponse(t *testing.T, conn net.Conn) rawResponse {
	t.Helper()
	if err := conn.SetReadDeadline(time.Now().Add(failSafe)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no response: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return rawResponse{status: resp.StatusCode, close: resp.Close, body: string(b)}
}

// activeLeases returns the reservations of every tier, from the admin API.
func activeLeases(t *testing.T, admin net.Addr) int {
	t.Helper()
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://"+admin.String()+"/admin/v1/capacity", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var v adminapi.CapacityView
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || len(v.Tiers) != 1 {
		t.Fatalf("capacity: %v %+v", err, v)
	}
	return v.Tiers[0].Active
}

// TestRunSlowBodyHoldsNoLease: a client that sends its headers and then
// dribbles its body holds no reservation while it does (the admin capacity
// view shows nothing active, the engine sees nothing), and the request ends
// with 400 invalid_request_body on a closed connection once
// --body-read-timeout passes.
func TestRunSlowBodyHoldsNoLease(t *testing.T) {
	finish, arrived, probed := make(chan struct{}), make(chan struct{}, 4), make(chan struct{}, 1)
	defer close(finish)
	up := engine(t, finish, arrived, probed)
	s, _, cancel, _ := startRouter(t, up.URL, "--body-read-timeout", slowBodyReadTimeout)
	defer cancel()
	waitReady(t, s, probed)

	checks := 0
	conn := slowBody(t, s.front.String(), func() {
		checks++
		if n := activeLeases(t, s.admin); n != 0 {
			t.Fatalf("%d reservations held while the body is still arriving", n)
		}
	})
	r := readRawResponse(t, conn)
	if r.status != http.StatusBadRequest || !strings.Contains(r.body, `"code":"invalid_request_body"`) || !r.close {
		t.Fatalf("slow body: %+v", r)
	}
	if _, err := conn.Read(make([]byte, 1)); err == nil {
		t.Fatal("the connection stayed open after the body timed out")
	}
	if checks != dribbledBytes || activeLeases(t, s.admin) != 0 {
		t.Fatalf("checks %d, active %d", checks, activeLeases(t, s.admin))
	}
	select {
	case <-arrived:
		t.Fatal("the slow request reached the engine")
	default:
	}
}

// TestRunStreamOutlivesBodyReadTimeout: the body read timeout ends with the
// body, so a stream lasting longer finishes whole. The stream is held until
// a slow body sent after it started has timed out, which proves the
// stream's own deadline has passed.
func TestRunStreamOutlivesBodyReadTimeout(t *testing.T) {
	finish, arrived, probed := make(chan struct{}), make(chan struct{}, 4), make(chan struct{}, 1)
	up := engine(t, finish, arrived, probed)
	s, _, cancel, _ := startRouter(t, up.URL, "--body-read-timeout", testBodyReadTimeout)
	defer cancel()
	waitReady(t, s, probed)
	resp := postChat(t, s.front, `{"model":"llama","stream":true}`)
	defer func() { _ = resp.Body.Close() }()
	<-arrived
	if r := readRawResponse(t, slowBody(t, s.front.String(), nil)); r.status != http.StatusBadRequest {
		t.Fatalf("the probe's slow body: %+v", r)
	}
	close(finish)
	got, err := io.ReadAll(resp.Body)
	if want := "data: 1\n\ndata: [DONE]\n\n"; err != nil || string(got) != want {
		t.Fatalf("the stream was cut: %q, %v; want %q", got, err, want)
	}
}

// TestRunMaxHeaderBytes: both listeners refuse a header block above
// maxHeaderBytes with 431 (net/http's default would take 1 MiB) and serve
// one below it.
func TestRunMaxHeaderBytes(t *testing.T) {
	finish, arrived, probed := make(chan struct{}), make(chan struct{}, 4), make(chan struct{}, 1)
	defer close(finish)
	up := engine(t, finish, arrived, probed)
	s, _, cancel, _ := startRouter(t, up.URL)
	defer cancel()
	client := &http.Client{Transport: &http.Transport{}}
	for _, url := range []string{"http://" + s.front.String() + "/v1/models", "http://" + s.admin.String() + "/healthz"} {
		for _, tt := range []struct {
			size int
			want int
		}{{maxHeaderBytes / 2, http.StatusOK}, {2 * maxHeaderBytes, http.StatusRequestHeaderFieldsTooLarge}} {
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
			req.Header.Set("Authorization", "Bearer secret")
			req.Header.Set("X-Padding", strings.Repeat("p", tt.size))
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Errorf("%s with %d header bytes: %d, want %d", url, tt.size, resp.StatusCode, tt.want)
			}
		}
	}
}

// TestServerLogsPanics proves a handler's panic is logged at ERROR with its
// value and stack but without the client's address, that an abort
// (http.ErrAbortHandler) is not logged, and that net/http's other lines
// are dropped.
func TestServerLogsPanics(t *testing.T) {
	var logs syncBuffer
	logger := slog.New(slog.NewJSONHandler(&logs, nil))
	srv := newServer(logger, http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/abort" {
			panic(http.ErrAbortHandler)
		}
		panic("boom")
	}), time.Minute)
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	client := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	for _, path := range []string{"/abort", "/panic"} {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://"+ln.Addr().String()+path, nil)
		resp, err := client.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			t.Fatalf("%s: got %d, want the connection closed", path, resp.StatusCode)
		}
	}
	srv.ErrorLog.Printf("http: TLS handshake error from 127.0.0.1:1: EOF")
	// net/http logs the panic before closing the connection the client saw
	// closed.
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("log lines %q, want the one panic", lines)
	}
	var line struct {
		Level, Msg, Panic string
	}
	if err := json.Unmarshal([]byte(lines[0]), &line); err != nil {
		t.Fatal(err)
	}
	if line.Level != "ERROR" || line.Msg != "panic serving a request" || !strings.HasPrefix(line.Panic, "boom\ngoroutine ") {
		t.Errorf("logged %+v, want the panic and its stack at ERROR", line)
	}
	if strings.Contains(lines[0], "127.0.0.1") {
		t.Errorf("logged %s, want no client address", lines[0])
	}
}
