package router

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/apierror/apierrortest"
	"github.com/sluice-dev/sluice/internal/source/sourcetest"
	"github.com/sluice-dev/sluice/internal/upstream"
)

// memberServer is an httptest member counting the connections it accepted.
func memberServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	srv, conns, _ := memberServerStates(t, h)
	return srv, conns
}

// memberServerStates is memberServer that also reports each connection
// state change on the returned channel, dropping them when it is full.
func memberServerStates(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int64, <-chan http.ConnState) {
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

// TestMemberHeaders proves what crosses the router in each direction: end
// to end headers and the query unchanged; hop-by-hop headers, headers a
// Connection header names, Expect and client-sent forwarding headers
// dropped.
func TestMemberHeaders(t *testing.T) {
	type seen struct {
		header http.Header
		uri    string
	}
	got := make(chan seen, 1)
	srv, _ := memberServer(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		got <- seen{r.Header.Clone(), r.RequestURI}
		h := w.Header()
		h.Set("Connection", "X-Resp-Hop")
		h.Set("X-Resp-Hop", "1")
		h.Set("Keep-Alive", "timeout=5")
		h["X-Engine"] = []string{"a", "b"}
		_, _ = io.WriteString(w, "{}")
	})
	f := newFixture(t, fixtureOptions{})
	f.apply(sourcetest.Tier("ns/llama", []string{"llama"}, "", []sourcetest.Member{{ID: "gpu0", Endpoint: srv.URL}}))
	resp, err := f.post(t.Context(), pathChatCompletions+"?api-version=1&x=%2F", chat("llama"), http.Header{
		"Connection":        {"X-Hop"},
		"X-Hop":             {"1"},
		"Keep-Alive":        {"timeout=5"},
		"Proxy-Connection":  {"keep-alive"},
		"Upgrade":           {"h2c"},
		"Forwarded":         {"for=192.0.2.1"},
		"X-Forwarded-For":   {"192.0.2.1"},
		"X-Forwarded-Host":  {"example.com"},
		"X-Forwarded-Proto": {"https"},
		"X-Custom":          {"a", "b"},
		"Expect":            {"100-continue"},
	})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	s := <-got
	if s.uri != pathChatCompletions+"?api-version=1&x=%2F" {
		t.Errorf("member got request target %q, want the route and the query as parsed and re-encoded", s.uri)
	}
	for _, k := range []string{"X-Hop", "Keep-Alive", "Proxy-Connection", "Upgrade", "Forwarded",
		"X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "Expect"} {
		if v, ok := s.header[k]; ok {
			t.Errorf("member got %s: %q", k, v)
		}
	}
	if v := s.header.Values("X-Custom"); len(v) != 2 || v[0] != "a" || v[1] != "b" {
		t.Errorf("member got X-Custom %q, want both values in order", v)
	}
	if v := s.header.Get("Content-Type"); v != "application/json" {
		t.Errorf("member got Content-Type %q", v)
	}
	if _, ok := resp.Header["X-Resp-Hop"]; ok {
		t.Error("client got the member's Connection-named header")
	}
	if _, ok := resp.Header["Keep-Alive"]; ok {
		t.Error("client got the member's Keep-Alive")
	}
	if v := resp.Header.Values("X-Engine"); len(v) != 2 || v[0] != "a" || v[1] != "b" {
		t.Errorf("client got X-Engine %q, want both values in order", v)
	}
	f.outcome()
}

// TestMemberConnections proves the router keeps member connections for
// reuse, notices an idle connection the member closed and dials again
// instead of failing the request, and does not reuse a connection the
// member asked to close.
func TestMemberConnections(t *testing.T) {
	srv, conns, states := memberServerStates(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, "{}")
	})
	f := newFixture(t, fixtureOptions{})
	f.apply(sourcetest.Tier("ns/llama", []string{"llama"}, "", []sourcetest.Member{{ID: "gpu0", Endpoint: srv.URL}}))
	post := func(step string) {
		t.Helper()
		resp, body := f.mustPost(pathChatCompletions, chat("llama"), nil)
		if resp.StatusCode != http.StatusOK || string(body) != "{}" {
			t.Fatalf("%s: %d %s", step, resp.StatusCode, body)
		}
		if o := f.outcome(); o.End != EndComplete {
			t.Fatalf("%s: outcome %+v", step, o)
		}
	}
	for range 3 {
		post("sequential request")
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("three sequential requests used %d connections, want 1", n)
	}
	// Once the member's connection is idle, the member closes it (before
	// it is idle, it would finish the response and close it later, a race
	// no client can see coming) and answers later requests with
	// Connection: close.
	for idle := 0; idle < 3; {
		if <-states == http.StateIdle {
			idle++
		}
	}
	srv.Config.SetKeepAlivesEnabled(false)
	post("after the member closed the idle connection")
	post("after a Connection: close response")
	if n := conns.Load(); n != 3 {
		t.Fatalf("connections = %d, want 3 (one redial each)", n)
	}
	f.assertIdle("ns/llama")
}

// TestMemberBodies proves request bodies reach the member byte for byte
// (with the served model in place of the alias) whether they go out in the head's write or after it, on one reused
// connection whose scratch buffer grows and shrinks between requests.
func TestMemberBodies(t *testing.T) {
	got := make(chan []byte, 1)
	srv, conns := memberServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- b
		_, _ = io.WriteString(w, "{}")
	})
	f := newFixture(t, fixtureOptions{})
	f.apply(sourcetest.Tier("ns/llama", []string{"llama"}, "", []sourcetest.Member{{ID: "gpu0", Endpoint: srv.URL}}))
	// body returns a body of size bytes naming the served model; the
	// client sends it with the alias, which the router replaces.
	body := func(size int) string {
		const head, tail = `{"model":"served/model","prompt":"`, `"}`
		var b strings.Builder
		b.WriteString(head)
		for i := 0; b.Len() < size-len(tail); i++ {
			b.WriteByte(byte('a' + i%26))
		}
		b.WriteString(tail)
		return b.String()
	}
	// Around the member client's 16 KiB bound of a body written with the
	// head, and above its 32 KiB bound of the head buffer a connection keeps.
	const inline, scratch = 16 << 10, 32 << 10
	for _, size := range []int{64, inline - 1, inline, inline + 1, 5 * scratch, 64} {
		want := body(size)
		resp, reply := f.mustPost(pathChatCompletions, strings.Replace(want, `"served/model"`, `"llama"`, 1), nil)
		if resp.StatusCode != http.StatusOK || string(reply) != "{}" {
			t.Fatalf("%d-byte body: %d %s", len(want), resp.StatusCode, reply)
		}
		if b := <-got; string(b) != want {
			t.Fatalf("%d-byte body: member read %d bytes, not the client's", len(want), len(b))
		}
		f.outcome()
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("sequential requests used %d connections, want 1", n)
	}
	f.assertIdle("ns/llama")
}

// TestHTTPSMember proves a member behind https is reached with the router's
// TLS configuration, and that an untrusted certificate fails the exchange
// as upstream_unavailable.
func TestHTTPSMember(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, `{"tls":true}`)
	}))
	t.Cleanup(srv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	endpoint := srv.URL // https://127.0.0.1:port; the certificate names 127.0.0.1.

	f := newFixture(t, fixtureOptions{tls: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}})
	f.apply(sourcetest.Tier("ns/llama", []string{"llama"}, "", []sourcetest.Member{{ID: "gpu0", Endpoint: endpoint}}))
	resp, body := f.mustPost(pathChatCompletions, chat("llama"), nil)
	if resp.StatusCode != http.StatusOK || string(body) != `{"tls":true}` {
		t.Fatalf("trusted member: %d %s", resp.StatusCode, body)
	}
	if o := f.outcome(); o.End != EndComplete {
		t.Fatalf("outcome %+v", o)
	}

	untrusted := newFixture(t, fixtureOptions{})
	untrusted.apply(sourcetest.Tier("ns/llama", []string{"llama"}, "", []sourcetest.Member{{ID: "gpu0", Endpoint: endpoint}}))
	resp, body = untrusted.mustPost(pathChatCompletions, chat("llama"), nil)
	if resp.StatusCode != http.StatusBadGateway || apierrortest.Code(t, body) != "upstream_unavailable" {
		t.Fatalf("untrusted member: %d %s, want 502 upstream_unavailable", resp.StatusCode, body)
	}
	if o := untrusted.outcome(); o.End != EndUnavailable {
		t.Fatalf("outcome %+v", o)
	}
	untrusted.assertIdle("ns/llama")
}

// TestInformationalAndTrailers proves 1xx responses before the final one are
// skipped, and the member's trailers reach the client.
func TestInformationalAndTrailers(t *testing.T) {
	srv, _ := memberServer(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Set("Trailer", "X-Tokens")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
		w.Header().Set("X-Tokens", "42")
	})
	f := newFixture(t, fixtureOptions{})
	f.apply(sourcetest.Tier("ns/llama", []string{"llama"}, "", []sourcetest.Member{{ID: "gpu0", Endpoint: srv.URL}}))
	resp, err := f.post(t.Context(), pathChatCompletions, chat("llama"), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || string(body) != "data: [DONE]\n\n" {
		t.Fatalf("got %d %q %v", resp.StatusCode, body, err)
	}
	if got := resp.Trailer.Get("X-Tokens"); got != "42" {
		t.Fatalf("trailer X-Tokens = %q, want 42 (trailers %v)", got, resp.Trailer)
	}
	if o := f.outcome(); o.End != EndComplete || o.Status != http.StatusOK {
		t.Fatalf("outcome %+v", o)
	}
}

// TestSwitchingProtocolsIsRefused proves a member that answers 101 (no
// inference request asks to upgrade) fails the exchange with 502 and its
// connection is not kept.
func TestSwitchingProtocolsIsRefused(t *testing.T) {
	srv, conns := memberServer(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.Header.Get("X-Upgrade") == "" {
			_, _ = io.WriteString(w, "{}")
			return
		}
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(err)
		}
		_, _ = buf.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		_ = buf.Flush()
		_ = conn.Close()
	})
	f := newFixture(t, fixtureOptions{})
	f.apply(sourcetest.Tier("ns/llama", []string{"llama"}, "", []sourcetest.Member{{ID: "gpu0", Endpoint: srv.URL}}))
	resp, body := f.mustPost(pathChatCompletions, chat("llama"), http.Header{"X-Upgrade": {"1"}})
	if resp.StatusCode != http.StatusBadGateway || apierrortest.Code(t, body) != "upstream_unavailable" {
		t.Fatalf("got %d %s, want 502 upstream_unavailable", resp.StatusCode, body)
	}
	if o := f.outcome(); o.End != EndUnavailable || o.ProtocolError != ProtocolSwitchingProtocols {
		t.Fatalf("outcome %+v, want upstream_unavailable with protocol error switching_protocols", o)
	}
	if resp, _ := f.mustPost(pathChatCompletions, chat("llama"), nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("next request: %d", resp.StatusCode)
	}
	f.outcome()
	if n := conns.Load(); n != 2 {
		t.Fatalf("connections = %d, want 2: the upgraded one must not be reused", n)
	}
	f.assertIdle("ns/llama")
}

// TestIdleReaper proves the router's timer closes a member connection once
// it was idle for MemberIdleTimeout, on the router's clock, without waiting
// for another request, and that Router.Close may be called twice.
func TestIdleReaper(t *testing.T) {
	const idle = 4 * time.Second
	srv, conns, states := memberServerStates(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, "{}")
	})
	fc := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	rt := New(Options{Clock: fc, MemberIdleTimeout: idle})
	rt.Tiers().Apply(sourcetest.Snapshot(sourcetest.Tier("ns/llama", []string{"llama"}, "", []sourcetest.Member{{ID: "gpu0", Endpoint: srv.URL}})))
	front := httptest.NewServer(rt)
	t.Cleanup(front.Close)
	post := func() {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, front.URL+pathChatCompletions, strings.NewReader(chat("llama")))
		resp, err := front.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	post()
	waitState(t, states, http.StateIdle)
	// The reaper checks eight times per idle timeout; stepping past the
	// timeout in such steps makes it close the connection.
	const checks = 8
	for range checks + 1 {
		fc.Step(idle / checks)
	}
	waitState(t, states, http.StateClosed)
	post()
	if n := conns.Load(); n != 2 {
		t.Fatalf("connections = %d, want 2: the reaped one must not be reused", n)
	}

	rt.Close() // stops the reaper (upstream's TestReaperStops).
	rt.Close() // idempotent.
}

// waitState waits for a member connection to reach state.
func waitState(t *testing.T, states <-chan http.ConnState, state http.ConnState) {
	t.Helper()
	deadline := time.After(failSafe)
	for {
		select {
		case s := <-states:
			if s == state {
				return
			}
		case <-deadline:
			t.Fatalf("no member connection reached %s", state)
		}
	}
}

// TestCloseIdleOnReconfigure proves Apply closes the idle connections of a
// member no tier uses any more and keeps those of the members that stay.
func TestCloseIdleOnReconfigure(t *testing.T) {
	handler := func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, "{}")
	}
	gone, _, goneStates := memberServerStates(t, handler)
	kept, keptConns, keptStates := memberServerStates(t, handler)
	f := newFixture(t, fixtureOptions{})
	f.apply(sourcetest.Tier("ns/llama", []string{"llama"}, v1alpha1.StrategyRoundRobin,
		[]sourcetest.Member{{ID: "gpu0", Endpoint: gone.URL}, {ID: "gpu1", Endpoint: kept.URL}}))
	for range 2 {
		if resp, _ := f.mustPost(pathChatCompletions, chat("llama"), nil); resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
		f.outcome()
	}
	waitState(t, goneStates, http.StateIdle)
	waitState(t, keptStates, http.StateIdle)
	f.apply(sourcetest.Tier("ns/llama", []string{"llama"}, v1alpha1.StrategyRoundRobin, []sourcetest.Member{{ID: "gpu1", Endpoint: kept.URL}}))
	waitState(t, goneStates, http.StateClosed)
	if resp, _ := f.mustPost(pathChatCompletions, chat("llama"), nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	f.outcome()
	if n := keptConns.Load(); n != 1 {
		t.Fatalf("the remaining member saw %d connections, want its one kept", n)
	}
}

// TestInformationalBounds proves the router reads at most upstream.MaxInformational
// 1xx responses (an engine sending them without end gets 502) and that the
// response header deadline covers them (an engine that sends some and then
// nothing gets 504 at the deadline).
func TestInformationalBounds(t *testing.T) {
	const processing = "HTTP/1.1 102 Processing\r\n\r\n"
	tests := []struct {
		desc       string
		serve      func(c net.Conn, br *bufio.Reader, stalled <-chan struct{})
		wantStatus int
		wantEnd    End
		wantProto  ProtocolError
	}{
		{
			desc: "the limit, then the final response",
			serve: func(c net.Conn, br *bufio.Reader, _ <-chan struct{}) {
				if readRequest(br) != nil {
					return
				}
				_, _ = io.WriteString(c, strings.Repeat(processing, upstream.MaxInformational)+"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
			},
			wantStatus: http.StatusOK, wantEnd: EndComplete,
		},
		{
			desc: "1xx without end",
			serve: func(c net.Conn, br *bufio.Reader, _ <-chan struct{}) {
				if readRequest(br) != nil {
					return
				}
				// Bounded for the test's sake: far more than any limit,
				// until the router hangs up.
				for range 100_000 {
					if _, err := io.WriteString(c, processing); err != nil {
						return
					}
				}
			},
			wantStatus: http.StatusBadGateway, wantEnd: EndUnavailable, wantProto: ProtocolTooManyInformational,
		},
		{
			desc: "1xx, then silence",
			serve: func(c net.Conn, br *bufio.Reader, stalled <-chan struct{}) {
				if readRequest(br) != nil {
					return
				}
				_, _ = io.WriteString(c, strings.Repeat(processing, upstream.MaxInformational))
				<-stalled
			},
			wantStatus: http.StatusGatewayTimeout, wantEnd: EndHeaderTimeout,
		},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			stalled := make(chan struct{})
			engine := newRawEngine(t, func(c net.Conn, br *bufio.Reader) { tt.serve(c, br, stalled) })
			t.Cleanup(func() { close(stalled) })
			f := newFixture(t, fixtureOptions{})
			f.apply(sourcetest.Tier("ns/llama", []string{"llama"}, "", []sourcetest.Member{{ID: "gpu0", Endpoint: engine.url}},
				timeouts(200*time.Millisecond, time.Minute)))
			resp, body := f.mustPost(pathChatCompletions, chat("llama"), nil)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status %d %s, want %d", resp.StatusCode, body, tt.wantStatus)
			}
			if o := f.outcome(); o.End != tt.wantEnd || o.Ejection != "" || o.ProtocolError != tt.wantProto {
				t.Fatalf("outcome %+v, want end %s, protocol error %q and no ejection", o, tt.wantEnd, tt.wantProto)
			}
			f.assertIdle("ns/llama")
		})
	}
}

// readRequest reads one request and its body from br.
func readRequest(br *bufio.Reader) error {
	req, err := http.ReadRequest(br)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, req.Body)
	return err
}

// hostileLimit bounds, for the test's sake, what a member whose response
// heads never end writes: far more than any bound.
const hostileLimit = 16 << 20

// writeCounted writes head and then chunk repeatedly to c, in pieces of at
// most 4 KiB, until the connection fails or hostileLimit bytes went out, and
// returns how many bytes the connection took. halfway is called once, when
// half of upstream.MaxResponseHeadBytes went out.
func writeCounted(c net.Conn, head string, chunk []byte, halfway func()) int64 {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4 << 10) // keep the kernel's share of the count small.
	}
	var total int64
	next := []byte(head)
	for total < hostileLimit {
		if len(next) == 0 {
			next = chunk
		}
		piece := next[:min(len(next), 4<<10)]
		next = next[len(piece):]
		n, err := c.Write(piece)
		total += int64(n)
		if err != nil {
			return total
		}
		if halfway != nil && total >= upstream.MaxResponseHeadBytes/2 {
			halfway()
			halfway = nil
		}
	}
	return total
}

// TestResponseHeaderBounds proves the bytes of a member's response heads
// are bounded: a member sending an endless header line, or endless 1xx
// responses with big headers, gets its exchange ended with 502 long before
// the header timeout, its connection closed after the router read at most
// the bound (counted on the member's side, kernel buffers included), its
// lease released once; another tier is served meanwhile. Heads of exactly
// upstream.MaxResponseHeadBytes, 1xx ones included, are read; one byte more fails.
func TestResponseHeaderBounds(t *testing.T) {
	line := bytes.Repeat([]byte("a"), 4<<10)
	var continues bytes.Buffer
	continues.WriteString("HTTP/1.1 100 Continue\r\n")
	for i := range 256 {
		fmt.Fprintf(&continues, "X-Pad-%d: %s\r\n", i, line[:4000])
	}
	continues.WriteString("\r\n")
	// exactHead returns a final response head of exactly size bytes.
	exactHead := func(size int) string {
		const pre, post = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Pad: ", "\r\n\r\n"
		return pre + strings.Repeat("p", size-len(pre)-len(post)) + post
	}
	informational := func(size int) string {
		const pre, post = "HTTP/1.1 100 Continue\r\nX-Pad: ", "\r\n\r\n"
		return pre + strings.Repeat("p", size-len(pre)-len(post)) + post
	}
	tests := []struct {
		desc       string
		head       string // written after the request, then chunk repeated.
		chunk      []byte
		wantStatus int
		hostile    bool
	}{
		{desc: "endless header line", head: "HTTP/1.1 200 OK\r\nX-Endless: ", chunk: line, wantStatus: http.StatusBadGateway, hostile: true},
		{desc: "endless 100 Continue with big headers", chunk: continues.Bytes(), wantStatus: http.StatusBadGateway, hostile: true},
		{desc: "final head at the bound", head: exactHead(upstream.MaxResponseHeadBytes) + "{}", wantStatus: http.StatusOK},
		{desc: "final head one byte over", head: exactHead(upstream.MaxResponseHeadBytes+1) + "{}", wantStatus: http.StatusBadGateway},
		{desc: "1xx and final head at the bound together", head: informational(upstream.MaxResponseHeadBytes/2) + exactHead(upstream.MaxResponseHeadBytes/2) + "{}", wantStatus: http.StatusOK},
		{desc: "1xx and final head each under, together over", head: informational(upstream.MaxResponseHeadBytes/2) + exactHead(upstream.MaxResponseHeadBytes/2+1) + "{}", wantStatus: http.StatusBadGateway},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			halfway, resume := make(chan struct{}), make(chan struct{})
			written := make(chan int64, 1)
			engine := newRawEngine(t, func(c net.Conn, br *bufio.Reader) {
				if readRequest(br) != nil {
					return
				}
				if tt.chunk == nil {
					_, _ = io.WriteString(c, tt.head)
					_, _ = io.Copy(io.Discard, br) // until the router closes or the test ends.
					return
				}
				written <- writeCounted(c, tt.head, tt.chunk, func() {
					close(halfway)
					<-resume
				})
			})
			other := newUpstream(t, "gpu1", nil)
			f := newFixture(t, fixtureOptions{})
			f.apply(
				sourcetest.Tier("ns/llama", []string{"llama"}, "", []sourcetest.Member{{ID: "gpu0", Endpoint: engine.url}}, timeouts(time.Minute, time.Minute)),
				sourcetest.Tier("ns/other", []string{"other"}, "", []sourcetest.Member{{ID: "gpu1", Endpoint: other.srv.URL}}))
			start := time.Now()
			type result struct {
				status int
				body   []byte
				err    error
			}
			done := make(chan result, 1)
			go func() {
				resp, err := f.post(context.Background(), pathChatCompletions, chat("llama"), nil)
				if err != nil {
					done <- result{err: err}
					return
				}
				defer func() { _ = resp.Body.Close() }()
				body, err := io.ReadAll(resp.Body)
				done <- result{status: resp.StatusCode, body: body, err: err}
			}()
			if tt.hostile {
				select {
				case <-halfway:
				case <-time.After(failSafe):
					t.Fatal("the member never wrote half the bound")
				}
				// The hostile member holds its exchange: another tier is served.
				if resp, body := f.mustPost(pathChatCompletions, chat("other"), nil); resp.StatusCode != http.StatusOK {
					t.Fatalf("other tier: %d %q", resp.StatusCode, body)
				}
				if o := f.outcome(); o.Tier != "ns/other" || o.End != EndComplete {
					t.Fatalf("other tier outcome %+v", o)
				}
				close(resume)
			}
			var r result
			select {
			case r = <-done:
			case <-time.After(failSafe):
				t.Fatal("no answer")
			}
			if r.err != nil || r.status != tt.wantStatus {
				t.Fatalf("got %d %q, %v; want %d", r.status, r.body, r.err, tt.wantStatus)
			}
			wantEnd := EndComplete
			if tt.wantStatus == http.StatusBadGateway {
				wantEnd = EndUnavailable
				if code := apierrortest.Code(t, r.body); code != "upstream_unavailable" {
					t.Fatalf("code %q, want upstream_unavailable", code)
				}
				if elapsed := time.Since(start); elapsed > 20*time.Second {
					t.Fatalf("502 after %v, want well before the 1 minute header timeout", elapsed)
				}
			}
			if o := f.outcome(); o.Tier != "ns/llama" || o.End != wantEnd || o.Status != tt.wantStatus || o.Ejection != "" {
				t.Fatalf("outcome %+v, want end %s, status %d, no ejection", o, wantEnd, tt.wantStatus)
			}
			if got := f.releaseCalls("ns/llama", "gpu0"); got != 1 {
				t.Fatalf("release calls = %d, want 1", got)
			}
			f.assertIdle("ns/llama")
			if tt.hostile {
				select {
				case n := <-written:
					// The bound, the member's 4 KiB send buffer and what
					// loopback's receive buffer took before the close.
					if n > 1<<20 {
						t.Fatalf("the member wrote %d bytes before the router hung up, want at most 1 MiB", n)
					}
					t.Logf("the member wrote %d bytes before its writes failed", n)
				case <-time.After(failSafe):
					t.Fatal("the member's writes never failed: the router kept reading")
				}
			}
		})
	}
}
