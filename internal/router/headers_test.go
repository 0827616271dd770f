package router

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apierror/apierrortest"
	"github.com/sluice-dev/sluice/internal/source/sourcetest"
)

// maxRecordedBody bounds the request body a recording engine reads.
const maxRecordedBody = 1 << 20

// engineRequest is what a recording engine read of one request: its
// request line as sent and its headers.
type engineRequest struct {
	line   string
	header textproto.MIMEHeader
}

// recordingEngine starts a raw engine that reads requests one after the
// other on each connection, reports each one's request line and headers,
// and answers it with head (a status line and headers, each ending in
// CRLF) and the body "{}". It returns the engine's URL.
func recordingEngine(t *testing.T, head string) (string, <-chan engineRequest) {
	t.Helper()
	got := make(chan engineRequest, 64)
	engine := newRawEngine(t, func(c net.Conn, br *bufio.Reader) {
		tp := textproto.NewReader(br)
		for {
			line, err := tp.ReadLine()
			if err != nil {
				return
			}
			h, err := tp.ReadMIMEHeader()
			if err != nil {
				return
			}
			n, err := strconv.Atoi(h.Get("Content-Length"))
			if err != nil || n < 0 || n > maxRecordedBody {
				return
			}
			if _, err := io.CopyN(io.Discard, br, int64(n)); err != nil {
				return
			}
			select {
			case got <- engineRequest{line: line, header: h}:
			default:
				t.Error("the recording engine got more requests than it keeps")
				return
			}
			if _, err := io.WriteString(c, head+"Content-Length: 2\r\n\r\n{}"); err != nil {
				return
			}
		}
	})
	return engine.url, got
}

// rawExchange sends request, written as given, on a new connection to addr
// and reads the response whole.
func rawExchange(t *testing.T, addr, request string) (reply, []byte) {
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
	return reply{StatusCode: resp.StatusCode, Header: resp.Header}, body
}

// rawPost is a POST of body to target with the extra header lines (each
// ending in CRLF).
func rawPost(target, headers, body string) string {
	return "POST " + target + " HTTP/1.1\r\nHost: router.test\r\nContent-Type: application/json\r\n" + headers +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
}

// engineOK is a plain engine response head.
const engineOK = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"

// TestForwardedTarget proves the engine's request line carries the route
// the router matched, in its normalised form, never the client's raw
// target: percent-encoded slashes and letters are decoded, the query is
// re-encoded from its parsed pairs, and targets whose decoded path is not a
// route (double slashes, dot segments) are answered 404 without reaching
// the engine (net/http hands them to the router uncleaned).
func TestForwardedTarget(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	url, got := recordingEngine(t, engineOK)
	f.apply(sourcetest.Tier("ns/llama", []string{"llama"}, "", []sourcetest.Member{{ID: "gpu0", Endpoint: url}}))
	tests := []struct {
		desc   string
		target string
		want   string // the engine's request line; empty: not forwarded, 404.
	}{
		{desc: "encoded slashes", target: "/v1%2Fchat%2Fcompletions", want: "POST /v1/chat/completions HTTP/1.1"},
		{desc: "encoded slashes, lower case", target: "/v1%2fembeddings", want: "POST /v1/embeddings HTTP/1.1"},
		{desc: "encoded letter", target: "/v1/chat/%63ompletions", want: "POST /v1/chat/completions HTTP/1.1"},
		{desc: "absolute form", target: "http://router.test/v1%2Fresponses", want: "POST /v1/responses HTTP/1.1"},
		{desc: "plain", target: "/v1/completions", want: "POST /v1/completions HTTP/1.1"},
		{desc: "query re-encoded", target: "/v1/completions?b=%7e&a=1", want: "POST /v1/completions?a=1&b=~ HTTP/1.1"},
		{desc: "query with a raw byte", target: "/v1/completions?x=\xff", want: "POST /v1/completions?x=%FF HTTP/1.1"},
		{desc: "query pair that does not parse", target: "/v1/completions?a=1;b=2&c=3", want: "POST /v1/completions?c=3 HTTP/1.1"},
		{desc: "query of no pair that parses", target: "/v1/completions?%zz", want: "POST /v1/completions HTTP/1.1"},
		{desc: "double slash", target: "//v1/chat/completions"},
		{desc: "dot segment", target: "/v1/./chat/completions"},
		{desc: "dot-dot segment", target: "/v1/x/../chat/completions"},
		{desc: "encoded dot segment", target: "/v1/%2e/chat/completions"},
		{desc: "trailing slash", target: "/v1/chat/completions/"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			resp, body := rawExchange(t, f.front.Listener.Addr().String(), rawPost(tt.target, "", chat("llama")))
			if tt.want == "" {
				if resp.StatusCode != http.StatusNotFound || apierrortest.Code(t, body) != "not_found" {
					t.Fatalf("got %d %s, want 404 not_found", resp.StatusCode, body)
				}
				select {
				case r := <-got:
					t.Fatalf("the engine got %q", r.line)
				default:
				}
				return
			}
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("got %d %s, want 200", resp.StatusCode, body)
			}
			select {
			case r := <-got:
				if r.line != tt.want {
					t.Fatalf("the engine got %q, want %q", r.line, tt.want)
				}
			case <-time.After(failSafe):
				t.Fatal("the engine got nothing")
			}
			f.outcome()
		})
	}
	f.assertIdle("ns/llama")
}

// TestHopByHopRequestHeaders proves no engine sees the headers of the
// client's connection: Connection and every header it names, Keep-Alive,
// Proxy-Connection, Proxy-Authorization, Trailer, and above all an upgrade
// (Connection: Upgrade, Upgrade), which ReverseProxy alone would forward.
// A request asking for an upgrade is served as a plain request, even one
// whose Upgrade value ReverseProxy would refuse as a protocol error. TE
// reaches the engine as "trailers" only when the client's named trailers,
// whether or not Connection names TE, as RFC 9110 §10.1.4 asks it to.
func TestHopByHopRequestHeaders(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	url, got := recordingEngine(t, engineOK)
	f.apply(sourcetest.Tier("ns/llama", []string{"llama"}, "", []sourcetest.Member{{ID: "gpu0", Endpoint: url}}))
	tests := []struct {
		desc    string
		headers string
		wantTE  string
	}{
		{desc: "h2c upgrade", headers: "Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n"},
		{desc: "websocket upgrade", headers: "Connection: keep-alive, Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"},
		{desc: "upgrade ReverseProxy refuses", headers: "Connection: upgrade\r\nUpgrade: \x80\r\n"},
		{desc: "upgrade header alone", headers: "Upgrade: h2c\r\n"},
		{desc: "hop-by-hop", headers: "Connection: X-Hop, TE\r\nX-Hop: 1\r\nKeep-Alive: timeout=5\r\nProxy-Connection: keep-alive\r\n" +
			"Proxy-Authorization: Basic Zm9vOmJhcg==\r\nTE: trailers\r\nTrailer: X-Checksum\r\n", wantTE: "trailers"},
		{desc: "TE trailers", headers: "Connection: TE\r\nTE: gzip, trailers\r\n", wantTE: "trailers"},
		{desc: "TE trailers, no Connection", headers: "TE: trailers\r\n", wantTE: "trailers"},
		{desc: "TE without trailers", headers: "Connection: TE\r\nTE: gzip\r\n"},
	}
	dropped := []string{"Connection", "Upgrade", "Http2-Settings", "X-Hop", "Keep-Alive", "Proxy-Connection", "Proxy-Authorization", "Trailer"}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			resp, body := rawExchange(t, f.front.Listener.Addr().String(),
				rawPost("/v1/chat/completions", tt.headers+"X-End-To-End: kept\r\n", chat("llama")))
			if resp.StatusCode != http.StatusOK || string(body) != "{}" {
				t.Fatalf("got %d %s, want the engine's 200 as a plain response", resp.StatusCode, body)
			}
			var r engineRequest
			select {
			case r = <-got:
			case <-time.After(failSafe):
				t.Fatal("the engine got nothing")
			}
			if r.line != "POST /v1/chat/completions HTTP/1.1" {
				t.Errorf("request line %q", r.line)
			}
			for _, name := range dropped {
				if v, ok := r.header[name]; ok {
					t.Errorf("the engine got %s: %q", name, v)
				}
			}
			if got := r.header.Get("Te"); got != tt.wantTE {
				t.Errorf("the engine got TE %q, want %q", got, tt.wantTE)
			}
			if got := r.header.Get("X-End-To-End"); got != "kept" {
				t.Errorf("the engine got X-End-To-End %q, want kept: end-to-end headers pass", got)
			}
			if o := f.outcome(); o.End != EndComplete {
				t.Errorf("outcome %+v", o)
			}
		})
	}
	f.assertIdle("ns/llama")
}

// engineIdentifying is an engine response head with every header the
// router strips or drops, a spoofed router header and one header that
// passes.
const engineIdentifying = engineOK +
	"Server: vllm/0.9\r\n" +
	"X-Powered-By: uvicorn\r\n" +
	"Via: 1.1 engine\r\n" +
	"Set-Cookie: session=abc\r\n" +
	"Set-Cookie: track=1\r\n" +
	"Set-Cookie2: old=1\r\n" +
	"Alt-Svc: h2=\":8443\"\r\n" +
	"Connection: keep-alive, X-Conn-Private\r\n" +
	"X-Conn-Private: secret\r\n" +
	"Keep-Alive: timeout=5\r\n" +
	"Proxy-Connection: keep-alive\r\n" +
	"Upgrade: h2c\r\n" +
	"X-Sluice-Member: spoofed\r\n" +
	"X-Engine-Note: kept\r\n"

// TestEngineResponseHeaders proves what the client sees of the engine's
// response headers: the identifying and tracking ones are stripped unless
// PassEngineHeaders (--pass-engine-headers) names them, hop-by-hop ones
// never pass, the router's own headers replace the engine's, and every
// other header passes.
func TestEngineResponseHeaders(t *testing.T) {
	hopByHop := []string{"Connection", "X-Conn-Private", "Keep-Alive", "Proxy-Connection", "Upgrade"}
	tests := []struct {
		desc string
		pass []string
		want map[string][]string // the stripped headers that reach the client.
	}{
		{desc: "defaults strip"},
		{desc: "allowlist lets named ones through", pass: []string{"Server", "Set-Cookie"},
			want: map[string][]string{"Server": {"vllm/0.9"}, "Set-Cookie": {"session=abc", "track=1"}}},
		{desc: "allowlist of every stripped header", pass: StrippedEngineHeaders(),
			want: map[string][]string{"Server": {"vllm/0.9"}, "X-Powered-By": {"uvicorn"}, "Via": {"1.1 engine"},
				"Set-Cookie": {"session=abc", "track=1"}, "Set-Cookie2": {"old=1"}, "Alt-Svc": {`h2=":8443"`}}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			f := newFixture(t, fixtureOptions{passHeaders: tt.pass})
			url, _ := recordingEngine(t, engineIdentifying)
			f.apply(sourcetest.Tier("ns/llama", []string{"llama"}, "", []sourcetest.Member{{ID: "gpu0", Endpoint: url}}))
			resp, body := rawExchange(t, f.front.Listener.Addr().String(), rawPost("/v1/chat/completions", "", chat("llama")))
			if resp.StatusCode != http.StatusOK || string(body) != "{}" {
				t.Fatalf("got %d %s", resp.StatusCode, body)
			}
			for _, name := range StrippedEngineHeaders() {
				if got := resp.Header.Values(name); !slices.Equal(got, tt.want[name]) {
					t.Errorf("%s = %q, want %q", name, got, tt.want[name])
				}
			}
			for _, name := range hopByHop {
				if v, ok := resp.Header[name]; ok {
					t.Errorf("the client got the engine's hop-by-hop %s: %q", name, v)
				}
			}
			if got := resp.Header.Values(headerMember); !slices.Equal(got, []string{"gpu0"}) {
				t.Errorf("X-Sluice-Member = %q, want the router's value only", got)
			}
			if got := resp.Header.Get("X-Engine-Note"); got != "kept" {
				t.Errorf("X-Engine-Note = %q, want kept", got)
			}
			f.outcome()
			f.assertIdle("ns/llama")
		})
	}
}

// TestParsePassEngineHeaders covers --pass-engine-headers: names are
// canonicalised and deduplicated; a name that is not a header name, or not
// a header the router strips, is an error naming no more than its length
// or the stripped set.
func TestParsePassEngineHeaders(t *testing.T) {
	tests := []struct {
		list    string
		want    []string
		wantErr string
	}{
		{list: "", want: nil},
		{list: "  ", want: nil},
		{list: "server", want: []string{"Server"}},
		{list: "Server, set-cookie ,SET-COOKIE2", want: []string{"Server", "Set-Cookie", "Set-Cookie2"}},
		{list: "via,Via", want: []string{"Via"}},
		{list: "x-powered-by,alt-svc", want: []string{"X-Powered-By", "Alt-Svc"}},
		{list: "Server,,Via", wantErr: "an empty name"},
		{list: "Server,", wantErr: "an empty name"},
		{list: "Set Cookie", wantErr: "not a header name (10 bytes)"},
		{list: "Server:", wantErr: "not a header name"},
		{list: "Sérver", wantErr: "not a header name"},
		{list: strings.Repeat("x", maxHeaderNameLength+1), wantErr: "not a header name (65 bytes)"},
		{list: "Content-Type", wantErr: "Content-Type is not stripped"},
		{list: "Sever", wantErr: "Sever is not stripped, it passes already (stripped: Server, X-Powered-By, Via, Set-Cookie, Set-Cookie2, Alt-Svc)"},
	}
	for _, tt := range tests {
		t.Run(tt.list, func(t *testing.T) {
			got, err := ParsePassEngineHeaders(tt.list)
			if tt.wantErr != "" {
				if !errors.Is(err, ErrPassEngineHeader) || !strings.Contains(err.Error(), tt.wantErr) || got != nil {
					t.Fatalf("ParsePassEngineHeaders(%q) = %q, %v; want an ErrPassEngineHeader saying %q", tt.list, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got, tt.want) {
				t.Fatalf("ParsePassEngineHeaders(%q) = %q, %v; want %q", tt.list, got, err, tt.want)
			}
		})
	}
}
