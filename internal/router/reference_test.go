package router

import (
	"bufio"
	"context"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/textproto"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/source/sourcetest"
)

// referenceProxy is net/http's ReverseProxy in front of target, as a proxy
// built on it in Rewrite mode forwards: to the target's host, adding no
// forwarding headers, over a Transport that asks for no compression.
func referenceProxy(t *testing.T, target string) *httptest.Server {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	transport := &http.Transport{DisableCompression: true}
	t.Cleanup(transport.CloseIdleConnections)
	srv := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(u) },
		Transport: transport,
	})
	t.Cleanup(srv.Close)
	return srv
}

// rawResponse is a response as a client reads it off the wire.
type rawResponse struct {
	status  int
	header  http.Header
	body    string
	trailer http.Header
	chunked bool
}

// rawRoundTrip sends request, written as given, on a new connection to
// addr and reads the response whole, trailers included.
func rawRoundTrip(t *testing.T, addr, request string) rawResponse {
	t.Helper()
	c, err := (&net.Dialer{}).DialContext(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	if err := c.SetDeadline(time.Now().Add(failSafe)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(c, request); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("reading the response: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the response body: %v", err)
	}
	return rawResponse{status: resp.StatusCode, header: resp.Header, body: string(body), trailer: resp.Trailer,
		chunked: slices.Contains(resp.TransferEncoding, "chunked")}
}

// withoutFields returns a copy of h without the named fields.
func withoutFields[H ~map[string][]string](h H, names ...string) http.Header {
	out := http.Header(maps.Clone(h))
	for _, name := range names {
		delete(out, name)
	}
	return out
}

// TestResponseHeadersAsReverseProxy proves the client gets what net/http's
// ReverseProxy would give it of a member's response (RFC 9110 §7.6.1, RFC
// 9112 §7): the fields a Connection field names and the hop-by-hop fields
// (Keep-Alive, TE, Upgrade, Proxy-*) dropped, end-to-end fields in order,
// Content-Length passed through, a body without a length sent chunked,
// announced trailers announced and sent as trailers, unannounced ones sent
// under http.TrailerPrefix. The router's own fields and Date aside, both
// answers are the same.
func TestResponseHeadersAsReverseProxy(t *testing.T) {
	const ok = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
	tests := []struct {
		desc  string
		reply string // the member's whole response.
	}{
		{desc: "Content-Length passes", reply: ok + "X-Multi: a\r\nX-Multi: b\r\nContent-Length: 2\r\n\r\n{}"},
		{desc: "Connection names fields", reply: ok + "Connection: X-A, x-b\r\nX-A: 1\r\nX-B: 2\r\nX-C: 3\r\nContent-Length: 2\r\n\r\n{}"},
		{desc: "hop-by-hop fields", reply: ok + "Keep-Alive: timeout=5\r\nTE: trailers\r\nUpgrade: h2c\r\nProxy-Connection: keep-alive\r\n" +
			"Proxy-Authenticate: Basic\r\nContent-Length: 2\r\n\r\n{}"},
		{desc: "close-delimited body", reply: ok + "Connection: close\r\n\r\n{\"a\":1}"},
		{desc: "chunked body", reply: ok + "Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"},
		{desc: "announced trailer", reply: ok + "Transfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n2\r\n{}\r\n0\r\nX-Sum: 42\r\n\r\n"},
		{desc: "unannounced trailer", reply: ok + "Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\nX-Late: 7\r\n\r\n"},
		{desc: "announced and unannounced trailers", reply: ok + "Transfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n2\r\n{}\r\n0\r\nX-Sum: 42\r\nX-Late: 7\r\n\r\n"},
		{desc: "error status", reply: "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 3\r\nContent-Length: 2\r\n\r\n{}"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			engine := newRawEngine(t, func(c net.Conn, br *bufio.Reader) {
				if readRequest(br) == nil {
					_, _ = io.WriteString(c, tt.reply)
				}
			})
			f := newFixture(t, fixtureOptions{})
			f.apply(sourcetest.Tier("ns/llama", []string{"llama"}, "", []sourcetest.Member{{ID: "gpu0", Endpoint: engine.url}}))
			ref := referenceProxy(t, engine.url)
			request := rawPost(pathChatCompletions, "", chat("llama"))
			want := rawRoundTrip(t, ref.Listener.Addr().String(), request)
			got := rawRoundTrip(t, f.front.Listener.Addr().String(), request)
			f.outcome()
			ignored := []string{"Date", headerRequestID, headerTier, headerMember}
			if got.status != want.status || got.body != want.body || got.chunked != want.chunked {
				t.Errorf("router: %d %q chunked %v; ReverseProxy: %d %q chunked %v",
					got.status, got.body, got.chunked, want.status, want.body, want.chunked)
			}
			if g, w := withoutFields(got.header, ignored...), withoutFields(want.header, "Date"); !equalHeaders(g, w) {
				t.Errorf("router header %v\nReverseProxy header %v", g, w)
			}
			if !equalHeaders(got.trailer, want.trailer) {
				t.Errorf("router trailer %v, ReverseProxy trailer %v", got.trailer, want.trailer)
			}
			f.assertIdle("ns/llama")
		})
	}
}

// equalHeaders reports whether a and b hold the same fields and values,
// a Trailer field's names compared in any order.
func equalHeaders(a, b http.Header) bool {
	norm := func(h http.Header) http.Header {
		h = withoutFields(h)
		if v := h.Values("Trailer"); v != nil {
			var names []string
			for _, line := range v {
				for n := range strings.SplitSeq(line, ",") {
					names = append(names, strings.TrimSpace(n))
				}
			}
			slices.Sort(names)
			h["Trailer"] = names
		}
		return h
	}
	a, b = norm(a), norm(b)
	return maps.EqualFunc(a, b, slices.Equal)
}

// TestRequestHeadersAsReverseProxy proves a member gets the request
// header fields net/http's ReverseProxy in Rewrite mode would send it
// (RFC 9110 §7.6.1, §10.1.4): the fields a Connection field names and the
// hop-by-hop fields dropped, TE sent as "trailers" only when the client's
// named trailers, the client's forwarding fields (Forwarded,
// X-Forwarded-*) dropped, an empty User-Agent not sent, end-to-end fields
// in order. The router's X-Request-Id and the body's length (the model is
// replaced) aside, both requests carry the same fields. Where the router
// departs from ReverseProxy on purpose (an upgrade, Expect, the query) its
// own tests hold the rule (TestHopByHopRequestHeaders, TestMemberHeaders,
// TestForwardedTarget).
func TestRequestHeadersAsReverseProxy(t *testing.T) {
	tests := []struct {
		desc    string
		headers string
	}{
		{desc: "end-to-end fields", headers: "X-Multi: a\r\nX-Multi: b\r\nUser-Agent: curl/8\r\nAuthorization: Bearer k\r\n"},
		{desc: "Connection names fields", headers: "Connection: X-A, x-b\r\nX-A: 1\r\nX-B: 2\r\nX-C: 3\r\n"},
		{desc: "hop-by-hop fields", headers: "Keep-Alive: timeout=5\r\nProxy-Connection: keep-alive\r\nProxy-Authorization: Basic Zm9v\r\n" +
			"Proxy-Authenticate: Basic\r\nTrailer: X-Sum\r\n"},
		{desc: "TE trailers named in Connection", headers: "Connection: TE\r\nTE: trailers\r\n"},
		{desc: "TE trailers among others", headers: "TE: gzip, Trailers;q=1, deflate\r\n"},
		{desc: "TE without trailers", headers: "TE: gzip\r\n"},
		{desc: "forwarding fields", headers: "Forwarded: for=192.0.2.1\r\nX-Forwarded-For: 192.0.2.1\r\nX-Forwarded-Host: a.example\r\n" +
			"X-Forwarded-Proto: https\r\n"},
		{desc: "empty User-Agent", headers: "User-Agent: \r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			engineURL, got := recordingEngine(t, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n")
			f := newFixture(t, fixtureOptions{})
			f.apply(sourcetest.Tier("ns/llama", []string{"llama"}, "", []sourcetest.Member{{ID: "gpu0", Endpoint: engineURL}}))
			ref := referenceProxy(t, engineURL)
			request := rawPost(pathChatCompletions, tt.headers, chat("llama"))
			recv := func(addr string) textproto.MIMEHeader {
				t.Helper()
				if r := rawRoundTrip(t, addr, request); r.status != http.StatusOK {
					t.Fatalf("status %d", r.status)
				}
				select {
				case r := <-got:
					return r.header
				case <-time.After(failSafe):
					t.Fatal("the engine got nothing")
					return nil
				}
			}
			want := withoutFields(recv(ref.Listener.Addr().String()), "Content-Length")
			have := withoutFields(recv(f.front.Listener.Addr().String()), "Content-Length", headerRequestID)
			f.outcome()
			if !equalHeaders(have, want) {
				t.Errorf("the engine got from the router %v\nfrom ReverseProxy %v", have, want)
			}
		})
	}
}
