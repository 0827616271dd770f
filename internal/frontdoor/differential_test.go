package frontdoor_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/frontdoor"
)

// The differential table writes the same raw bytes to net/http's server and
// to frontdoor's, both with the same handler and bounds, and compares what a
// client reads back: the responses (status line, headers but Date, body,
// trailers), whether the server closed the connection, what the server
// logged and the ConnState sequence it reported.

const (
	// diffMaxHeaderBytes is small so that a header block over it is cheap
	// to write; net/http allows 4096 bytes of slack on top of it.
	diffMaxHeaderBytes = 4096
	// diffReadHeaderTimeout bounds a stalled client on both servers; it is
	// long so that a loaded machine never reaches it in an ordinary case.
	diffReadHeaderTimeout = 10 * time.Second
	// stepTimeout bounds each client step's wait for an answer.
	stepTimeout = 5 * time.Second
	// eventTimeout bounds every wait on a channel in these tests; it is
	// generous because the machine runs -race under load.
	eventTimeout = 10 * time.Second
	// readToClose as a step's read count reads responses until the server
	// closes the connection (or stepTimeout passes).
	readToClose = -1
	// maxResponsesPerStep bounds a readToClose step.
	maxResponsesPerStep = 8
)

// probeRequest is written after a case's steps to learn whether the server
// kept the connection open: an open connection answers it.
const probeRequest = "GET /probe HTTP/1.1\r\nHost: probe\r\n\r\n"

// step is one client action: write send (if any), then read read responses.
type step struct {
	send string
	read int
}

// diffCase is one row of the differential table.
type diffCase struct {
	name  string
	steps []step
	// head makes the client read every response as an answer to HEAD.
	head bool
	// noProbe skips the probe (the case already read to the close).
	noProbe bool
	// frontdoorWant, when set, is frontdoor's expected transcript where the
	// two servers legitimately differ; the comment on the row says why.
	frontdoorWant string
}

// one returns the steps of a case that writes raw and reads n responses.
func one(raw string, n int) []step { return []step{{send: raw, read: n}} }

// diffCases is the differential table.
var diffCases = []diffCase{
	// Ordinary requests.
	{name: "get", steps: one("GET /echo?q=1 HTTP/1.1\r\nHost: example.com\r\nX-A: 1\r\n\r\n", 1)},
	{name: "post content-length", steps: one("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", 1)},
	{name: "post content-length zero", steps: one("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", 1)},
	{name: "head", head: true, steps: one("HEAD /echo HTTP/1.1\r\nHost: x\r\n\r\n", 1)},
	{name: "head large body", head: true, steps: one("HEAD /large HTTP/1.1\r\nHost: x\r\n\r\n", 1)},
	{name: "head no body written", head: true, steps: one("HEAD /empty HTTP/1.1\r\nHost: x\r\n\r\n", 1)},
	{name: "options asterisk", steps: one("OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n", 1)},
	{name: "connect", steps: one("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n", 1)},

	// Chunked request bodies.
	{name: "chunked", steps: one("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", 1)},
	{name: "chunked extensions", steps: one("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5;name=value\r\nhello\r\n0;last\r\n\r\n", 1)},
	{name: "chunked trailers", steps: one("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n5\r\nhello\r\n0\r\nX-Sum: 42\r\n\r\n", 1)},
	{name: "chunked undeclared trailer", steps: one("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nX-Other: 1\r\n\r\n", 1)},
	{name: "chunked bad size", steps: one("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n", readToClose), noProbe: true},
	{name: "chunked overflowing size", steps: one("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffff\r\nhello\r\n0\r\n\r\n", readToClose), noProbe: true},
	{name: "chunked missing crlf after data", steps: one("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX0\r\n\r\n", readToClose), noProbe: true},
	{name: "chunked bare lf", steps: one("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\nhello\n0\n\n", readToClose), noProbe: true},

	// Request smuggling shapes: Content-Length and Transfer-Encoding together.
	{name: "smuggle CL.TE", steps: one("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n", 2)},
	{name: "smuggle TE.CL", steps: one("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 40\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n", 2)},
	{name: "smuggle TE chunked, identity", steps: one("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n", readToClose), noProbe: true},
	{name: "smuggle TE identity", steps: one("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: identity\r\nContent-Length: 5\r\n\r\nhello", readToClose), noProbe: true},
	{name: "smuggle TE xchunked", steps: one("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: xchunked\r\n\r\n0\r\n\r\n", readToClose), noProbe: true},
	{name: "smuggle TE twice", steps: one("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", readToClose), noProbe: true},
	{name: "smuggle TE on HTTP/1.0", steps: one("POST /echo HTTP/1.0\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", readToClose), noProbe: true},
	{name: "smuggle duplicate differing CL", steps: one("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", readToClose), noProbe: true},
	{name: "duplicate equal CL", steps: one("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello", 1)},
	{name: "CL list", steps: one("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5, 5\r\n\r\nhello", readToClose), noProbe: true},
	{name: "negative CL", steps: one("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\nhello", readToClose), noProbe: true},
	{name: "plus CL", steps: one("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: +5\r\n\r\nhello", readToClose), noProbe: true},
	{name: "hex CL", steps: one("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 0x5\r\n\r\nhello", readToClose), noProbe: true},

	// Header syntax.
	{name: "obs-fold", steps: one("GET /echo HTTP/1.1\r\nHost: x\r\nX-Folded: a\r\n b\r\n\r\n", 1)},
	{name: "header name with space", steps: one("GET /echo HTTP/1.1\r\nHost: x\r\nX Bad: 1\r\n\r\n", readToClose), noProbe: true},
	{name: "header name space before colon", steps: one("GET /echo HTTP/1.1\r\nHost: x\r\nX-Bad : 1\r\n\r\n", readToClose), noProbe: true},
	{name: "header name invalid byte", steps: one("GET /echo HTTP/1.1\r\nHost: x\r\nX-B\x01d: 1\r\n\r\n", readToClose), noProbe: true},
	{name: "header name utf8", steps: one("GET /echo HTTP/1.1\r\nHost: x\r\nX-Ünï: 1\r\n\r\n", readToClose), noProbe: true},
	{name: "header value NUL", steps: one("GET /echo HTTP/1.1\r\nHost: x\r\nX-Nul: a\x00b\r\n\r\n", readToClose), noProbe: true},
	{name: "header value bare CR", steps: one("GET /echo HTTP/1.1\r\nHost: x\r\nX-Cr: a\rb\r\n\r\n", readToClose), noProbe: true},
	{name: "header line without colon", steps: one("GET /echo HTTP/1.1\r\nHost: x\r\nNoColon\r\n\r\n", readToClose), noProbe: true},
	{name: "header lines bare LF", steps: one("GET /echo HTTP/1.1\nHost: x\nX-A: 1\n\n", 1)},
	{name: "header value utf8 and tab", steps: one("GET /echo HTTP/1.1\r\nHost: x\r\nX-V: \tcafé \t\r\n\r\n", 1)},

	// Host.
	{name: "missing host HTTP/1.1", steps: one("GET /echo HTTP/1.1\r\n\r\n", readToClose), noProbe: true},
	{name: "missing host HTTP/1.0", steps: one("GET /echo HTTP/1.0\r\n\r\n", readToClose), noProbe: true},
	{name: "empty host", steps: one("GET /echo HTTP/1.1\r\nHost:\r\n\r\n", 1)},
	{name: "two host headers", steps: one("GET /echo HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", readToClose), noProbe: true},
	{name: "malformed host", steps: one("GET /echo HTTP/1.1\r\nHost: a b\r\n\r\n", readToClose), noProbe: true},
	{name: "host with port and ipv6", steps: one("GET /echo HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n", 1)},
	{name: "absolute-form URI", steps: one("GET http://example.com/abs?x=1 HTTP/1.1\r\nHost: other\r\n\r\n", 1)},
	{name: "absolute-form URI without host header", steps: one("GET http://example.com/abs HTTP/1.1\r\n\r\n", readToClose), noProbe: true},

	// Protocol versions and keep-alive.
	{name: "HTTP/1.0 no keep-alive", steps: one("GET /echo HTTP/1.0\r\nHost: x\r\n\r\n", readToClose), noProbe: true},
	{name: "HTTP/1.0 keep-alive", steps: one("GET /echo HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\n\r\n", 1)},
	{name: "HTTP/1.0 keep-alive large body", steps: one("GET /large HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\n\r\n", readToClose), noProbe: true},
	{name: "connection close", steps: one("GET /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", readToClose), noProbe: true},
	{name: "connection close mixed case list", steps: one("GET /echo HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, CLOSE\r\n\r\n", readToClose), noProbe: true},
	{name: "HTTP/1.1 keep-alive two requests", steps: []step{
		{send: "GET /echo?n=1 HTTP/1.1\r\nHost: x\r\n\r\n", read: 1},
		{send: "GET /echo?n=2 HTTP/1.1\r\nHost: x\r\n\r\n", read: 1},
	}},
	{name: "pipelined two", steps: one("GET /echo?n=1 HTTP/1.1\r\nHost: x\r\n\r\nPOST /echo?n=2 HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc", 2)},
	{name: "pipelined three", steps: one("GET /echo?n=1 HTTP/1.1\r\nHost: x\r\n\r\nGET /large?n=2 HTTP/1.1\r\nHost: x\r\n\r\nGET /echo?n=3 HTTP/1.1\r\nHost: x\r\n\r\n", 3)},
	{name: "pipelined after close", steps: one("GET /echo?n=1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\nGET /echo?n=2 HTTP/1.1\r\nHost: x\r\n\r\n", readToClose), noProbe: true},
	{name: "pipelined bad second", steps: one("GET /echo?n=1 HTTP/1.1\r\nHost: x\r\n\r\nBAD\r\n\r\n", readToClose), noProbe: true},
	{name: "leading CRLF before request", steps: one("\r\n\r\nGET /echo HTTP/1.1\r\nHost: x\r\n\r\n", readToClose), noProbe: true},
	{name: "CRLF after POST body", steps: one("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nab\r\nGET /echo?n=2 HTTP/1.1\r\nHost: x\r\n\r\n", 2)},

	// Request lines.
	{name: "request line garbage", steps: one("GARBAGE\r\n\r\n", readToClose), noProbe: true},
	{name: "request line binary", steps: one("\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03\r\n\r\n", readToClose), noProbe: true},
	{name: "request line lowercase method", steps: one("get /echo HTTP/1.1\r\nHost: x\r\n\r\n", 1)},
	{name: "request line bad method token", steps: one("G(T /echo HTTP/1.1\r\nHost: x\r\n\r\n", readToClose), noProbe: true},
	{name: "request line extra spaces", steps: one("GET  /echo HTTP/1.1\r\nHost: x\r\n\r\n", readToClose), noProbe: true},
	{name: "request line relative path", steps: one("GET echo HTTP/1.1\r\nHost: x\r\n\r\n", readToClose), noProbe: true},
	{name: "PRI HTTP/2.0", steps: one("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", readToClose), noProbe: true},
	{name: "HTTP/2.0 GET", steps: one("GET /echo HTTP/2.0\r\nHost: x\r\n\r\n", readToClose), noProbe: true},
	{name: "HTTP/1.2", steps: one("GET /echo HTTP/1.2\r\nHost: x\r\n\r\n", 1)},
	{name: "HTTP/3.0", steps: one("GET /echo HTTP/3.0\r\nHost: x\r\n\r\n", readToClose), noProbe: true},
	{name: "HTTP/0.9", steps: one("GET /echo\r\n\r\n", readToClose), noProbe: true},
	{name: "lowercase http version", steps: one("GET /echo http/1.1\r\nHost: x\r\n\r\n", readToClose), noProbe: true},

	// Bounds.
	{name: "header block under MaxHeaderBytes slack", steps: one("GET /echo HTTP/1.1\r\nHost: x\r\nX-Big: "+strings.Repeat("a", 6000)+"\r\n\r\n", 1)},
	{name: "header block over MaxHeaderBytes", steps: one("GET /echo HTTP/1.1\r\nHost: x\r\nX-Big: "+strings.Repeat("a", 10000)+"\r\n\r\n", readToClose), noProbe: true},
	{name: "request line over MaxHeaderBytes", steps: one("GET /"+strings.Repeat("a", 10000)+" HTTP/1.1\r\nHost: x\r\n\r\n", readToClose), noProbe: true},

	// Expect.
	{name: "expect 100-continue handler reads", steps: []step{
		{send: "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n", read: 1},
		{send: "hello", read: 1},
	}},
	{name: "expect 100-continue handler does not read", steps: []step{
		{send: "POST /noread HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n", read: 1},
		{send: "hello", read: readToClose},
	}, noProbe: true},
	{name: "expect 100-continue body sent anyway", steps: one("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\nhello", 2)},
	{name: "expect 100-continue mixed case", steps: []step{
		{send: "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-Continue\r\n\r\n", read: 1},
		{send: "hello", read: 1},
	}},
	{name: "expect 100-continue no body", steps: one("GET /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n\r\n", 1)},
	{name: "expect 100-continue HTTP/1.0", steps: one("POST /echo HTTP/1.0\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\nhello", readToClose), noProbe: true},
	{name: "expect something else", steps: one("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: something-else\r\n\r\nhello", readToClose), noProbe: true},

	// Handler-side behaviour.
	{name: "sniffed content type", steps: one("GET /sniff HTTP/1.1\r\nHost: x\r\n\r\n", 1)},
	{name: "explicit empty content type", steps: one("GET /nosniff HTTP/1.1\r\nHost: x\r\n\r\n", 1)},
	{name: "small body auto content-length", steps: one("GET /small HTTP/1.1\r\nHost: x\r\n\r\n", 1)},
	{name: "large body chunked", steps: one("GET /large HTTP/1.1\r\nHost: x\r\n\r\n", 1)},
	{name: "empty body", steps: one("GET /empty HTTP/1.1\r\nHost: x\r\n\r\n", 1)},
	{name: "declared content-length", steps: one("GET /declared HTTP/1.1\r\nHost: x\r\n\r\n", 1)},
	{name: "declared content-length short write", steps: one("GET /short HTTP/1.1\r\nHost: x\r\n\r\n", readToClose), noProbe: true},
	{name: "declared content-length long write", steps: one("GET /long HTTP/1.1\r\nHost: x\r\n\r\n", 1)},
	{name: "204 with body attempt", steps: one("GET /204 HTTP/1.1\r\nHost: x\r\n\r\n", 1)},
	{name: "304 with body attempt", steps: one("GET /304 HTTP/1.1\r\nHost: x\r\n\r\n", 1)},
	{name: "handler sets transfer-encoding", steps: one("GET /te HTTP/1.1\r\nHost: x\r\n\r\n", 1)},
	{name: "handler sets connection close", steps: one("GET /conn-close HTTP/1.1\r\nHost: x\r\n\r\n", readToClose), noProbe: true},
	{name: "handler trailers declared", steps: one("GET /trailers HTTP/1.1\r\nHost: x\r\n\r\n", 1)},
	{name: "handler trailer prefix", steps: one("GET /trailer-prefix HTTP/1.1\r\nHost: x\r\n\r\n", 1)},
	{name: "handler trailers on HTTP/1.0", steps: one("GET /trailers HTTP/1.0\r\nHost: x\r\n\r\n", readToClose), noProbe: true},
	{name: "handler flush then write", steps: one("GET /flush HTTP/1.1\r\nHost: x\r\n\r\n", 1)},
	{name: "handler flush then write HTTP/1.0", steps: one("GET /flush HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\n\r\n", readToClose), noProbe: true},
	{name: "handler flush before any write", steps: one("GET /flush-empty HTTP/1.1\r\nHost: x\r\n\r\n", 1)},
	{name: "handler does not read large body", steps: one("POST /noread HTTP/1.1\r\nHost: x\r\nContent-Length: 1048576\r\n\r\n"+strings.Repeat("b", 1000), readToClose), noProbe: true},
	{name: "handler does not read small body", steps: one("POST /noread HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", 1)},
	{name: "handler does not read small chunked body", steps: one("POST /noread HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 1)},
	{name: "handler does not read bad chunked body", steps: one("POST /noread HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", readToClose), noProbe: true},
	{name: "early hints", steps: one("GET /early-hints HTTP/1.1\r\nHost: x\r\n\r\n", 2)},
	{name: "early hints HTTP/1.0", steps: one("GET /early-hints HTTP/1.0\r\nHost: x\r\n\r\n", readToClose), noProbe: true},
	{name: "superfluous WriteHeader", steps: one("GET /twice HTTP/1.1\r\nHost: x\r\n\r\n", 1)},
	{name: "panic ErrAbortHandler mid chunked body", steps: one("GET /abort HTTP/1.1\r\nHost: x\r\n\r\n", readToClose), noProbe: true},
	{name: "panic ErrAbortHandler before writing", steps: one("GET /abort-early HTTP/1.1\r\nHost: x\r\n\r\n", readToClose), noProbe: true},
	{name: "panic other value", steps: one("GET /panic HTTP/1.1\r\nHost: x\r\n\r\n", readToClose), noProbe: true},
	{name: "panic other value mid body", steps: one("GET /panic-mid HTTP/1.1\r\nHost: x\r\n\r\n", readToClose), noProbe: true},
	{name: "request context value", steps: one("GET /ctx HTTP/1.1\r\nHost: x\r\n\r\n", 1)},
	{name: "handler header value with CRLF and bad name", steps: one("GET /badheader HTTP/1.1\r\nHost: x\r\n\r\n", 1)},
	{name: "handler status without text", steps: one("GET /status599 HTTP/1.1\r\nHost: x\r\n\r\n", 1)},
	{name: "handler invalid status code", steps: one("GET /status42 HTTP/1.1\r\nHost: x\r\n\r\n", readToClose), noProbe: true},
	{name: "handler invalid content-length", steps: one("GET /bad-cl HTTP/1.1\r\nHost: x\r\n\r\n", 1)},
	{name: "handler flush with content-length", steps: one("GET /flush-cl HTTP/1.1\r\nHost: x\r\n\r\n", 1)},
	{name: "handler 1xx after final status", steps: one("GET /late-1xx HTTP/1.1\r\nHost: x\r\n\r\n", 1)},
	{name: "handler writes 100 itself", steps: one("POST /own-continue HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\nhello", 3)},
}

// diffHandler is the handler both servers run; its paths select behaviours.
func diffHandler(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/probe":
		_, _ = io.WriteString(w, "probe")
	case "/noread":
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "not read")
	case "/sniff":
		_, _ = io.WriteString(w, "<html><body>hi</body></html>")
	case "/nosniff":
		w.Header()["Content-Type"] = nil
		_, _ = io.WriteString(w, "<html><body>hi</body></html>")
	case "/small":
		_, _ = io.WriteString(w, "hello")
	case "/large":
		_, _ = w.Write(bytes.Repeat([]byte("x"), 10000))
	case "/empty":
	case "/declared":
		w.Header().Set("Content-Length", "5")
		_, _ = io.WriteString(w, "hello")
	case "/short":
		w.Header().Set("Content-Length", "10") //nolint:gosec // G113: the handler declares its length; net/http sets no Transfer-Encoding then.
		_, _ = io.WriteString(w, "hello")
	case "/long":
		w.Header().Set("Content-Length", "3")
		_, err := io.WriteString(w, "hello")
		w.Header().Set("X-Ignored", fmt.Sprint(err))
	case "/204":
		w.WriteHeader(http.StatusNoContent)
		_, _ = io.WriteString(w, "body")
	case "/304":
		w.Header().Set("Content-Length", "4")
		w.WriteHeader(http.StatusNotModified)
		_, _ = io.WriteString(w, "body")
	case "/te":
		w.Header().Set("Transfer-Encoding", "chunked") //nolint:gosec // G113: the case is a handler that sets its own framing header.
		_, _ = io.WriteString(w, "hello")
	case "/conn-close":
		w.Header().Set("Connection", "close")
		_, _ = io.WriteString(w, "bye")
	case "/trailers":
		w.Header().Set("Trailer", "X-Sum, X-Never")
		_, _ = io.WriteString(w, "body")
		w.Header().Set("X-Sum", "42")
	case "/trailer-prefix":
		_, _ = io.WriteString(w, "body")
		w.Header().Set(http.TrailerPrefix+"X-Late", "late")
	case "/flush":
		_, _ = io.WriteString(w, "first")
		w.(http.Flusher).Flush()
		_, _ = io.WriteString(w, "second")
	case "/flush-empty":
		w.(http.Flusher).Flush()
		_, _ = io.WriteString(w, "after")
	case "/early-hints":
		w.Header().Set("Link", "</style.css>; rel=preload; as=style")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "final")
	case "/twice":
		w.WriteHeader(http.StatusAccepted)
		w.WriteHeader(http.StatusTeapot)
	case "/abort":
		_, _ = io.WriteString(w, "partial")
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	case "/abort-early":
		panic(http.ErrAbortHandler)
	case "/panic":
		panic("boom")
	case "/panic-mid":
		_, _ = io.WriteString(w, "partial")
		w.(http.Flusher).Flush()
		panic("boom")
	case "/badheader":
		w.Header().Set("X-Injected", "a\r\nSet-Cookie: evil=1")
		w.Header()["Bad Name"] = []string{"v"}
		_, _ = io.WriteString(w, "ok")
	case "/status599":
		w.WriteHeader(599)
	case "/status42":
		w.WriteHeader(42)
	case "/bad-cl":
		w.Header().Set("Content-Length", "abc")
		_, _ = io.WriteString(w, "hello")
	case "/flush-cl":
		w.Header().Set("Content-Length", "10") //nolint:gosec // G113: the handler declares its length; net/http sets no Transfer-Encoding then.
		_, _ = io.WriteString(w, "hello")
		w.(http.Flusher).Flush()
		_, _ = io.WriteString(w, "world")
	case "/late-1xx":
		w.WriteHeader(http.StatusOK)
		w.WriteHeader(http.StatusEarlyHints)
		_, _ = io.WriteString(w, "ok")
	case "/own-continue":
		w.WriteHeader(http.StatusContinue)
		echo(w, r)
	case "/ctx":
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "err=%v conn=%v", r.Context().Err(), r.Context().Value(connKey{})) //nolint:gosec // G705: plain text to a test client.
	default:
		echo(w, r)
	}
}

// echo answers with what the server parsed, so that a difference in
// parsing shows in the body.
func echo(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	names := make([]string, 0, len(r.Header))
	for k := range r.Header {
		names = append(names, k)
	}
	sort.Strings(names)
	var hdr strings.Builder
	for _, k := range names {
		fmt.Fprintf(&hdr, "%s=%q;", k, r.Header[k])
	}
	w.Header().Set("Content-Type", "text/plain")
	//nolint:gosec // G705: plain text to a test client.
	fmt.Fprintf(w, "method=%s uri=%q url=%q proto=%s host=%q cl=%d te=%q close=%t hdr=%s body=%q bodyerr=%v trailer=%v\n",
		r.Method, r.RequestURI, r.URL.String(), r.Proto, r.Host, r.ContentLength, r.TransferEncoding, r.Close,
		hdr.String(), body, err, r.Trailer)
}

// connKey is the context key the servers' ConnContext sets.
type connKey struct{}

// logSink collects what a server logs, one message per Write.
type logSink struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logSink) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, string(p))
	return len(p), nil
}

func (l *logSink) messages() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.msgs...)
}

// stateLog collects the ConnState sequence of a server's connections.
type stateLog struct {
	mu      sync.Mutex
	states  []http.ConnState
	changed chan struct{}
}

func newStateLog() *stateLog { return &stateLog{changed: make(chan struct{}, 1)} }

func (s *stateLog) record(_ net.Conn, st http.ConnState) {
	s.mu.Lock()
	s.states = append(s.states, st)
	s.mu.Unlock()
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

func (s *stateLog) snapshot() []http.ConnState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]http.ConnState(nil), s.states...)
}

// waitClosed waits until as many connections closed as were opened.
func (s *stateLog) waitClosed(t *testing.T) []http.ConnState {
	t.Helper()
	deadline := time.NewTimer(eventTimeout)
	defer deadline.Stop()
	for {
		states := s.snapshot()
		var opened, closed int
		for _, st := range states {
			switch st {
			case http.StateNew:
				opened++
			case http.StateClosed, http.StateHijacked:
				closed++
			}
		}
		if opened == closed {
			return states
		}
		select {
		case <-s.changed:
		case <-deadline.C:
			t.Errorf("connections not closed after %v: states %v", eventTimeout, states)
			return states
		}
	}
}

// target is one server under test.
type target struct {
	name   string
	addr   string
	logs   *logSink
	states *stateLog
}

// startNetHTTP starts net/http's server with the differential bounds.
func startNetHTTP(t *testing.T, h http.Handler) *target {
	t.Helper()
	tg := &target{name: "net/http", logs: &logSink{}, states: newStateLog()}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: diffReadHeaderTimeout,
		MaxHeaderBytes:    diffMaxHeaderBytes,
		ConnContext: func(ctx context.Context, _ net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, "set")
		},
		ConnState: tg.states.record,
		ErrorLog:  log.New(tg.logs, "", 0),
	}
	tg.addr = serve(t, srv.Serve, srv.Close)
	return tg
}

// startFrontdoor starts frontdoor's server with the differential bounds.
func startFrontdoor(t *testing.T, h http.Handler) *target {
	t.Helper()
	tg := &target{name: "frontdoor", logs: &logSink{}, states: newStateLog()}
	srv := &frontdoor.Server{
		Handler:           h,
		ReadHeaderTimeout: diffReadHeaderTimeout,
		MaxHeaderBytes:    diffMaxHeaderBytes,
		ConnContext: func(ctx context.Context, _ net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, "set")
		},
		ConnState: tg.states.record,
		ErrorLog:  log.New(tg.logs, "", 0),
	}
	tg.addr = serve(t, srv.Serve, srv.Close)
	return tg
}

// serve runs serveFn on a loopback listener until the test ends, and checks
// that it returns http.ErrServerClosed once closeFn ran.
func serve(t *testing.T, serveFn func(net.Listener) error, closeFn func() error) string {
	t.Helper()
	ln, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- serveFn(ln) }()
	t.Cleanup(func() {
		_ = closeFn()
		select {
		case err := <-done:
			if !errors.Is(err, http.ErrServerClosed) {
				t.Errorf("Serve returned %v, want http.ErrServerClosed", err)
			}
		case <-time.After(eventTimeout):
			t.Errorf("Serve did not return within %v of Close", eventTimeout)
		}
	})
	return ln.Addr().String()
}

// transcript is what a client saw, in a form that compares as text.
type transcript struct {
	lines []string
	raw   []byte
}

func (tr *transcript) addf(format string, args ...any) {
	tr.lines = append(tr.lines, fmt.Sprintf(format, args...))
}

func (tr *transcript) String() string { return strings.Join(tr.lines, "\n") }

// readOne reads one response and its body and records it.
func readOne(br *bufio.Reader, head bool, tr *transcript) (body, end string) {
	req := &http.Request{Method: http.MethodGet}
	if head {
		req.Method = http.MethodHead
	}
	// http.ReadResponse reports a close before the status line as an
	// unexpected EOF; a peek tells it from a cut head.
	if _, err := br.Peek(1); err != nil {
		return "", "read: " + errKind(err, true)
	}
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return "", "read: " + errKind(err, false)
	}
	b, berr := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	resp.Header.Del("Date")
	tr.addf("%s %s", resp.Proto, resp.Status)
	names := make([]string, 0, len(resp.Header))
	for k := range resp.Header {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		tr.addf("  %s: %q", k, resp.Header[k])
	}
	tr.addf("  [te=%q cl=%d close=%t]", resp.TransferEncoding, resp.ContentLength, resp.Close)
	tr.addf("  body %q", b)
	if berr != nil {
		tr.addf("  body error: %s", errKind(berr, false))
		return string(b), "body: " + errKind(berr, false)
	}
	if len(resp.Trailer) > 0 {
		tr.addf("  trailer %v", resp.Trailer)
	}
	return string(b), ""
}

// errKind names a client-side read error: a close and a reset are the same
// thing to a client that reads (which one arrives depends on timing).
func errKind(err error, atStart bool) string {
	var ne net.Error
	switch {
	case errors.Is(err, io.EOF) && atStart, errors.Is(err, syscall.ECONNRESET) && atStart:
		return "closed"
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF):
		return "truncated"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout (connection left open)"
	default:
		return "malformed: " + err.Error()
	}
}

// runClient plays a case's steps against addr and returns the transcript.
func runClient(t *testing.T, addr string, c diffCase) *transcript {
	t.Helper()
	tr := &transcript{}
	conn, err := (&net.Dialer{}).DialContext(t.Context(), "tcp", addr)
	if err != nil {
		t.Errorf("dial %s: %v", addr, err)
		return tr
	}
	defer func() { _ = conn.Close() }()
	var raw bytes.Buffer
	defer func() { tr.raw = raw.Bytes() }()
	br := bufio.NewReader(io.TeeReader(conn, &raw))
	for i, s := range c.steps {
		if s.send != "" {
			_ = conn.SetWriteDeadline(time.Now().Add(stepTimeout))
			if _, err := io.WriteString(conn, s.send); err != nil {
				tr.addf("step %d: write: %s", i, errKind(err, true))
			}
		}
		_ = conn.SetReadDeadline(time.Now().Add(stepTimeout))
		for n := 0; n < maxResponsesPerStep && (s.read == readToClose || n < s.read); n++ {
			_, end := readOne(br, c.head, tr)
			if end != "" {
				tr.addf("step %d: %s", i, end)
				return tr
			}
		}
	}
	if c.noProbe {
		return tr
	}
	_ = conn.SetDeadline(time.Now().Add(stepTimeout))
	if _, err := io.WriteString(conn, probeRequest); err != nil {
		tr.addf("probe: write: %s", errKind(err, true))
		return tr
	}
	probe := &transcript{}
	body, end := readOne(br, false, probe)
	switch {
	case end == "read: closed":
		tr.addf("probe: connection closed")
	case end == "" && body == "probe":
		tr.addf("probe: connection open")
	default:
		tr.addf("probe: unexpected answer (%s):", end)
		tr.lines = append(tr.lines, probe.lines...)
	}
	return tr
}

// addrPattern matches a loopback address with its port in log lines.
var addrPattern = regexp.MustCompile(`127\.0\.0\.1:\d+`)

// normalizeLogs keeps each message's first line, without addresses, and
// notes whether a stack trace followed.
func normalizeLogs(msgs []string) []string {
	out := make([]string, 0, len(msgs))
	for _, m := range msgs {
		first, rest, _ := strings.Cut(m, "\n")
		first = addrPattern.ReplaceAllString(first, "ADDR")
		if strings.HasPrefix(rest, "goroutine ") {
			first += " [+stack]"
		}
		out = append(out, first)
	}
	return out
}

// observed is everything compared for one server.
type observed struct {
	client *transcript
	logs   []string
	states []http.ConnState
}

func (o observed) String() string {
	return fmt.Sprintf("%s\nlogs: %q\nstates: %v", o.client, o.logs, o.states)
}

// observe runs a case against one server.
func observe(t *testing.T, tg *target, c diffCase) observed {
	t.Helper()
	client := runClient(t, tg.addr, c)
	states := tg.states.waitClosed(t)
	return observed{client: client, logs: normalizeLogs(tg.logs.messages()), states: states}
}

func TestDifferential(t *testing.T) {
	t.Parallel()
	handler := http.HandlerFunc(diffHandler)
	for _, c := range diffCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ref := startNetHTTP(t, handler)
			fd := startFrontdoor(t, handler)
			var want observed
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				want = observe(t, ref, c)
			}()
			got := observe(t, fd, c)
			wg.Wait()
			if c.frontdoorWant != "" {
				if got.String() != c.frontdoorWant {
					t.Errorf("frontdoor:\n%s\nwant (documented difference):\n%s\nnet/http:\n%s", got, c.frontdoorWant, want)
				}
				return
			}
			if got.String() != want.String() {
				t.Errorf("frontdoor and net/http differ\nfrontdoor:\n%s\nnet/http:\n%s\nraw frontdoor:\n%q\nraw net/http:\n%q",
					got, want, truncate(got.client.raw), truncate(want.client.raw))
			}
			if testing.Verbose() {
				t.Logf("net/http:\n%s", want)
			}
		})
	}
}

// truncate shortens raw bytes for a failure message.
func truncate(b []byte) []byte {
	const limit = 1500
	if len(b) > limit {
		return append(b[:limit:limit], "..."...)
	}
	return b
}

// Hostile-client and lifecycle tests for frontdoor alone.

// startFD starts s on a loopback listener and returns its address and a
// channel that receives Serve's result; the test's end closes s.
func startFD(t *testing.T, s *frontdoor.Server) (string, <-chan error) {
	t.Helper()
	ln, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() { _ = s.Close() })
	return ln.Addr().String(), done
}

// dial connects to addr with a deadline for the whole test conversation.
func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := (&net.Dialer{}).DialContext(t.Context(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.SetDeadline(time.Now().Add(eventTimeout))
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// write writes s to conn or fails the test.
func write(t *testing.T, conn net.Conn, s string) {
	t.Helper()
	if _, err := io.WriteString(conn, s); err != nil {
		t.Fatalf("write: %v", err)
	}
}

// answer is a response as the lifecycle tests check it, its body read.
type answer struct {
	status int
	close  bool
	header http.Header
	body   string
}

// readResp reads one response to a GET and its whole body.
func readResp(t *testing.T, br *bufio.Reader) answer {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return answer{status: resp.StatusCode, close: resp.Close, header: resp.Header, body: string(b)}
}

// expectClosed reads from conn until the server closes it; anything the
// server sends first is returned.
func expectClosed(t *testing.T, r io.Reader) string {
	t.Helper()
	b, err := io.ReadAll(r)
	var ne net.Error
	switch {
	case err == nil, errors.Is(err, syscall.ECONNRESET):
	case errors.As(err, &ne) && ne.Timeout():
		t.Fatalf("connection still open after %v (read %q)", eventTimeout, b)
	default:
		t.Fatalf("read until close: %v (read %q)", err, b)
	}
	return string(b)
}

// recv waits for a value on ch within eventTimeout.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(eventTimeout):
		t.Fatalf("no %s within %v", what, eventTimeout)
		var zero T
		return zero
	}
}

// trickle writes one byte of s every interval until s is written, the
// connection fails or stop closes; it returns when it is done.
func trickle(conn net.Conn, s string, interval time.Duration, stop <-chan struct{}) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for i := 0; i < len(s); i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if _, err := conn.Write([]byte{s[i]}); err != nil {
				return
			}
		}
	}()
	return done
}

func TestSlowlorisHeaderClosedByReadHeaderTimeout(t *testing.T) {
	t.Parallel()
	ran := make(chan struct{}, 1)
	addr, _ := startFD(t, &frontdoor.Server{
		Handler:           http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran <- struct{}{} }),
		ReadHeaderTimeout: 100 * time.Millisecond,
	})
	conn := dial(t, addr)
	write(t, conn, "GET / HTTP/1.1\r\nHost: x\r\n")
	stop := make(chan struct{})
	trickled := trickle(conn, strings.Repeat("X-Slow: 1\r\n", 1000), 10*time.Millisecond, stop)
	start := time.Now()
	got := expectClosed(t, conn)
	close(stop)
	<-trickled
	// net/http closes a connection whose header read timed out without a
	// word (isCommonNetReadError), or with a 400 when the deadline cut a
	// header line in two (the parser then reports a malformed line).
	if got != "" && !strings.HasPrefix(got, "HTTP/1.1 400 Bad Request\r\n") {
		t.Errorf("server answered a timed-out header with %q; net/http sends nothing or a 400", got)
	}
	select {
	case <-ran:
		t.Error("handler ran for a request whose header never ended")
	default:
	}
	t.Logf("closed after %v", time.Since(start))
}

func TestSlowBodyEndedByReadTimeout(t *testing.T) {
	t.Parallel()
	readErr := make(chan error, 1)
	addr, _ := startFD(t, &frontdoor.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, err := io.ReadAll(r.Body)
			readErr <- err
		}),
		ReadTimeout: 200 * time.Millisecond,
	})
	conn := dial(t, addr)
	// The body trickles steadily: ReadTimeout bounds the whole request,
	// not each read, so a steady trickle is cut too.
	write(t, conn, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nab")
	stop := make(chan struct{})
	trickled := trickle(conn, strings.Repeat("c", 998), 10*time.Millisecond, stop)
	defer func() { close(stop); <-trickled }()
	err := recv(t, readErr, "body read result")
	if err == nil {
		t.Fatal("handler read the whole trickled body; ReadTimeout did not cut it")
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("body read error %v, want a deadline error (as net/http)", err)
	}
	expectClosed(t, conn)
}

func TestIdleKeepAliveClosedByIdleTimeout(t *testing.T) {
	t.Parallel()
	addr, _ := startFD(t, &frontdoor.Server{
		Handler:     http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }),
		IdleTimeout: 100 * time.Millisecond,
		ReadTimeout: time.Hour,
	})
	conn := dial(t, addr)
	br := bufio.NewReader(conn)
	write(t, conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	a := readResp(t, br)
	if a.status != http.StatusOK || a.body != "ok" || a.close {
		t.Fatalf("got %d %q close=%t", a.status, a.body, a.close)
	}
	if rest := expectClosed(t, br); rest != "" {
		t.Errorf("idle close sent %q", rest)
	}
}

func TestConnStateSequence(t *testing.T) {
	t.Parallel()
	states := newStateLog()
	addr, _ := startFD(t, &frontdoor.Server{
		Handler:   http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }),
		ConnState: states.record,
	})
	conn := dial(t, addr)
	br := bufio.NewReader(conn)
	write(t, conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	readResp(t, br)
	write(t, conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	readResp(t, br)
	_ = conn.Close()
	got := states.waitClosed(t)
	want := []http.ConnState{http.StateNew, http.StateActive, http.StateIdle, http.StateActive, http.StateIdle, http.StateClosed}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("ConnState sequence %v, want %v", got, want)
	}
}

func TestConnContextReachesRequest(t *testing.T) {
	t.Parallel()
	type key struct{}
	var sawConn net.Conn
	var mu sync.Mutex
	addr, _ := startFD(t, &frontdoor.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, r.Context().Value(key{})) //nolint:gosec // G705: plain text to a test client.
		}),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			mu.Lock()
			sawConn = c
			mu.Unlock()
			return context.WithValue(ctx, key{}, "conn-value")
		},
	})
	conn := dial(t, addr)
	write(t, conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	if got := readResp(t, bufio.NewReader(conn)).body; got != "conn-value" {
		t.Errorf("handler saw %q, want the ConnContext value", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if sawConn == nil || sawConn.RemoteAddr().String() != conn.LocalAddr().String() {
		t.Errorf("ConnContext got conn %v, want the client's connection", sawConn)
	}
}

func TestBaseContextCancelEndsRequestContext(t *testing.T) {
	t.Parallel()
	base, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan struct{})
	ended := make(chan error, 1)
	addr, _ := startFD(t, &frontdoor.Server{
		Handler: http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			close(started)
			select {
			case <-r.Context().Done():
				ended <- r.Context().Err()
			case <-time.After(eventTimeout):
				ended <- nil
			}
		}),
		BaseContext: func(net.Listener) context.Context { return base },
	})
	conn := dial(t, addr)
	write(t, conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	recv(t, started, "handler start")
	cancel()
	if err := recv(t, ended, "handler end"); err == nil {
		t.Error("request context did not end when BaseContext's context was cancelled")
	}
}

// waitingHandler signals when it starts and when watchDelay has passed, then
// reports how r.Context() ended (nil: it did not end within eventTimeout).
type waitingHandler struct {
	watchDelay time.Duration
	started    chan struct{}
	pastWatch  chan struct{}
	ended      chan error
}

func newWaitingHandler(watchDelay time.Duration) *waitingHandler {
	return &waitingHandler{
		watchDelay: watchDelay,
		started:    make(chan struct{}),
		pastWatch:  make(chan struct{}),
		ended:      make(chan error, 1),
	}
}

func (h *waitingHandler) ServeHTTP(_ http.ResponseWriter, r *http.Request) {
	close(h.started)
	ctx := r.Context()
	if h.watchDelay > 0 {
		// Simulates a long request: the handler works past WatchAfter.
		select {
		case <-time.After(h.watchDelay):
		case <-ctx.Done():
		}
		close(h.pastWatch)
	}
	select {
	case <-ctx.Done():
		h.ended <- ctx.Err()
	case <-time.After(eventTimeout):
		h.ended <- nil
	}
}

func TestClientGoneEndsContextAfterWatchAfter(t *testing.T) {
	t.Parallel()
	const watchAfter = 10 * time.Millisecond
	h := newWaitingHandler(10 * watchAfter)
	addr, _ := startFD(t, &frontdoor.Server{Handler: h, WatchAfter: watchAfter})
	conn := dial(t, addr)
	write(t, conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	recv(t, h.pastWatch, "handler past WatchAfter")
	closedAt := time.Now()
	_ = conn.Close()
	err := recv(t, h.ended, "handler end")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("request context ended with %v, want context.Canceled after the client closed", err)
	}
	t.Logf("context ended %v after the client closed", time.Since(closedAt))
}

func TestClientGoneBeforeWatchAfterEndsContext(t *testing.T) {
	t.Parallel()
	const watchAfter = 200 * time.Millisecond
	h := newWaitingHandler(0)
	addr, _ := startFD(t, &frontdoor.Server{Handler: h, WatchAfter: watchAfter})
	conn := dial(t, addr)
	write(t, conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	recv(t, h.started, "handler start")
	closedAt := time.Now()
	_ = conn.Close()
	err := recv(t, h.ended, "handler end")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("request context ended with %v, want context.Canceled after the client closed", err)
	}
	t.Logf("context ended %v after the client closed (WatchAfter %v)", time.Since(closedAt), watchAfter)
}

func TestClientGoneAfterBodyReadEndsContext(t *testing.T) {
	t.Parallel()
	const watchAfter = 10 * time.Millisecond
	bodyRead := make(chan string, 1)
	ended := make(chan error, 1)
	addr, _ := startFD(t, &frontdoor.Server{
		Handler: http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			bodyRead <- string(b)
			select {
			case <-r.Context().Done():
				ended <- r.Context().Err()
			case <-time.After(eventTimeout):
				ended <- nil
			}
		}),
		WatchAfter: watchAfter,
	})
	conn := dial(t, addr)
	write(t, conn, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
	if got := recv(t, bodyRead, "body read"); got != "hello" {
		t.Fatalf("handler read %q", got)
	}
	_ = conn.Close()
	if err := recv(t, ended, "handler end"); !errors.Is(err, context.Canceled) {
		t.Fatalf("request context ended with %v, want context.Canceled once the body was read and the client closed", err)
	}
}

func TestPipelinedInOneWriteBehindSlowRequest(t *testing.T) {
	t.Parallel()
	const watchAfter = 10 * time.Millisecond
	addr, _ := startFD(t, &frontdoor.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/slow" {
				// Work past WatchAfter while the next request waits in the
				// connection's buffer.
				select {
				case <-time.After(10 * watchAfter):
				case <-r.Context().Done():
				}
			}
			_, _ = fmt.Fprintf(w, "%s err=%v", r.URL.Path, r.Context().Err()) //nolint:gosec // G705: plain text to a test client.
		}),
		WatchAfter: watchAfter,
	})
	conn := dial(t, addr)
	br := bufio.NewReader(conn)
	write(t, conn, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\nGET /next HTTP/1.1\r\nHost: x\r\n\r\nGET /last HTTP/1.1\r\nHost: x\r\n\r\n")
	for _, want := range []string{"/slow err=<nil>", "/next err=<nil>", "/last err=<nil>"} {
		if got := readResp(t, br).body; got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
}

func TestPipelinedRequestDoesNotEndContext(t *testing.T) {
	t.Parallel()
	const watchAfter = 10 * time.Millisecond
	started := make(chan struct{})
	pastWatch := make(chan struct{})
	secondSent := make(chan struct{})
	addr, _ := startFD(t, &frontdoor.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/slow" {
				_, _ = io.WriteString(w, "second")
				return
			}
			close(started)
			ctx := r.Context()
			// Work past WatchAfter, so that the connection is watched when
			// the pipelined request arrives.
			select {
			case <-time.After(10 * watchAfter):
			case <-ctx.Done():
			}
			close(pastWatch)
			select {
			case <-secondSent:
			case <-ctx.Done():
			}
			// A window in which a watcher mistaking the pipelined bytes for
			// the client going away would end the context.
			select {
			case <-time.After(10 * watchAfter):
				_, _ = fmt.Fprintf(w, "alive err=%v", ctx.Err())
			case <-ctx.Done():
				_, _ = fmt.Fprintf(w, "ended err=%v", ctx.Err())
			}
		}),
		WatchAfter: watchAfter,
	})
	conn := dial(t, addr)
	br := bufio.NewReader(conn)
	write(t, conn, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
	recv(t, started, "handler start")
	recv(t, pastWatch, "handler past WatchAfter")
	write(t, conn, "GET /fast HTTP/1.1\r\nHost: x\r\n\r\n")
	close(secondSent)
	if got := readResp(t, br).body; got != "alive err=<nil>" {
		t.Errorf("first request: %q, want its context alive while a pipelined request waits", got)
	}
	a := readResp(t, br)
	if a.status != http.StatusOK || a.body != "second" {
		t.Errorf("pipelined request: %d %q, want 200 \"second\"", a.status, a.body)
	}
}

func TestShutdownWaitsForInFlightAndClosesIdle(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	release := make(chan struct{})
	states := newStateLog()
	srv := &frontdoor.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/block" {
				close(started)
				<-release
			}
			_, _ = io.WriteString(w, "done")
		}),
		ConnState: states.record,
	}
	addr, served := startFD(t, srv)

	idle := dial(t, addr)
	idleBr := bufio.NewReader(idle)
	write(t, idle, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	readResp(t, idleBr)

	busy := dial(t, addr)
	busyBr := bufio.NewReader(busy)
	write(t, busy, "GET /block HTTP/1.1\r\nHost: x\r\n\r\n")
	recv(t, started, "handler start")

	shutdown := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
		defer cancel()
		shutdown <- srv.Shutdown(ctx)
	}()
	if err := recv(t, served, "Serve's return"); !errors.Is(err, http.ErrServerClosed) {
		t.Errorf("Serve returned %v, want http.ErrServerClosed", err)
	}
	if rest := expectClosed(t, idleBr); rest != "" {
		t.Errorf("idle connection got %q at shutdown", rest)
	}
	if c, err := (&net.Dialer{Timeout: eventTimeout}).DialContext(t.Context(), "tcp", addr); err == nil {
		_ = c.Close()
		t.Error("listener still accepts after Shutdown")
	}
	select {
	case err := <-shutdown:
		t.Fatalf("Shutdown returned %v while a request was in flight", err)
	default:
	}
	close(release)
	a := readResp(t, busyBr)
	if a.status != http.StatusOK || a.body != "done" {
		t.Errorf("in-flight request: %d %q, want 200 \"done\"", a.status, a.body)
	}
	// net/http announces the close on a response finished during shutdown.
	if !a.close {
		t.Errorf("in-flight response during shutdown lacks Connection: close (headers %v)", a.header)
	}
	expectClosed(t, busyBr)
	if err := recv(t, shutdown, "Shutdown's return"); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	states.waitClosed(t)
}

func TestShutdownContextExpires(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	release := make(chan struct{})
	defer close(release)
	srv := &frontdoor.Server{
		Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
			close(started)
			<-release
		}),
	}
	addr, _ := startFD(t, srv)
	conn := dial(t, addr)
	write(t, conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	recv(t, started, "handler start")
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := srv.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown with a request in flight and an expiring context returned %v, want context.DeadlineExceeded", err)
	}
}

func TestCloseClosesEverything(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	release := make(chan struct{})
	defer close(release)
	srv := &frontdoor.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/block" {
				close(started)
				<-release
			}
		}),
	}
	addr, served := startFD(t, srv)
	idle := dial(t, addr)
	idleBr := bufio.NewReader(idle)
	write(t, idle, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	readResp(t, idleBr)
	busy := dial(t, addr)
	write(t, busy, "GET /block HTTP/1.1\r\nHost: x\r\n\r\n")
	recv(t, started, "handler start")
	if err := srv.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := recv(t, served, "Serve's return"); !errors.Is(err, http.ErrServerClosed) {
		t.Errorf("Serve returned %v, want http.ErrServerClosed", err)
	}
	expectClosed(t, idleBr)
	if got := expectClosed(t, busy); got != "" {
		t.Errorf("busy connection got %q at Close", got)
	}
	if c, err := (&net.Dialer{Timeout: eventTimeout}).DialContext(t.Context(), "tcp", addr); err == nil {
		_ = c.Close()
		t.Error("listener still accepts after Close")
	}
}

func TestWriteErrorEndsContext(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	result := make(chan string, 1)
	addr, _ := startFD(t, &frontdoor.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			close(started)
			chunk := bytes.Repeat([]byte("z"), 64<<10)
			give := time.After(eventTimeout)
			var err error
			for err == nil {
				select {
				case <-give:
					result <- "writes never failed after the client reset"
					return
				default:
				}
				if _, err = w.Write(chunk); err == nil {
					err = http.NewResponseController(w).Flush()
				}
			}
			select {
			case <-r.Context().Done():
				result <- ""
			case <-time.After(eventTimeout):
				result <- fmt.Sprintf("write failed (%v) but the request context did not end", err)
			}
		}),
		// Long enough that only the write error can end the context.
		WatchAfter: time.Hour,
	})
	conn := dial(t, addr)
	write(t, conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	recv(t, started, "handler start")
	if err := conn.(*net.TCPConn).SetLinger(0); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close()
	if msg := recv(t, result, "handler result"); msg != "" {
		t.Error(msg)
	}
}

func TestResponseControllerSetWriteDeadline(t *testing.T) {
	t.Parallel()
	result := make(chan error, 1)
	addr, _ := startFD(t, &frontdoor.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			rc := http.NewResponseController(w)
			if err := rc.SetWriteDeadline(time.Now().Add(100 * time.Millisecond)); err != nil {
				result <- fmt.Errorf("SetWriteDeadline: %w", err)
				return
			}
			chunk := bytes.Repeat([]byte("z"), 64<<10)
			give := time.After(eventTimeout)
			for {
				select {
				case <-give:
					result <- errors.New("writes to a client that does not read never failed")
					return
				default:
				}
				_, err := w.Write(chunk)
				if err == nil {
					err = rc.Flush()
				}
				if err != nil {
					result <- err
					return
				}
			}
		}),
	})
	conn := dial(t, addr)
	write(t, conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	// The client reads nothing, so the server's writes fill the buffers.
	err := recv(t, result, "handler result")
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("write past the deadline failed with %v, want os.ErrDeadlineExceeded", err)
	}
}

func TestResponseControllerSetReadDeadline(t *testing.T) {
	t.Parallel()
	result := make(chan error, 1)
	addr, _ := startFD(t, &frontdoor.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rc := http.NewResponseController(w)
			if err := rc.SetReadDeadline(time.Now().Add(100 * time.Millisecond)); err != nil {
				result <- fmt.Errorf("SetReadDeadline: %w", err)
				return
			}
			_, err := io.ReadAll(r.Body)
			result <- err
		}),
	})
	conn := dial(t, addr)
	write(t, conn, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nab")
	err := recv(t, result, "handler result")
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("body read past the read deadline failed with %v, want os.ErrDeadlineExceeded", err)
	}
}
