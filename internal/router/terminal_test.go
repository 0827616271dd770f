package router

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/apierror/apierrortest"
	"github.com/sluice-dev/sluice/internal/source/sourcetest"
)

// sseEvents is an SSE stream an upstream sends, event by event.
var sseEvents = []string{
	"data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\n",
	"data: {\"choices\":[{\"delta\":{\"content\":\"lo\"}}]}\n\n",
	"data: [DONE]\n\n",
}

// writeEvents writes SSE events, flushing each.
func writeEvents(w http.ResponseWriter, events ...string) {
	for _, e := range events {
		_, _ = io.WriteString(w, e)
		w.(http.Flusher).Flush()
	}
}

// sseHeaders starts an SSE response.
func sseHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
}

// terminalCase is one way an admitted exchange can end. run drives the
// client side and checks what the client got; the matrix then checks the
// lease, the counts and the members.
type terminalCase struct {
	name       string
	mutate     []func(*v1alpha1.ReplicaTierSpec)
	upstream   func(w http.ResponseWriter, r *http.Request)
	run        func(t *testing.T, f *fixture, gpu0 *fakeMember)
	wantEnd    End
	wantStatus int
	// wantProtocol is the outcome's ProtocolError.
	wantProtocol ProtocolError
}

func terminalCases() []terminalCase {
	return []terminalCase{
		{
			name: "success",
			run: func(t *testing.T, f *fixture, _ *fakeMember) {
				resp, body := f.mustPost(pathChatCompletions, chat("llama"), nil)
				if resp.StatusCode != http.StatusOK || string(body) != `{"id":"ok","member":"gpu0"}` {
					t.Fatalf("got %d %q", resp.StatusCode, body)
				}
				checkLabels(t, resp.Header, "gpu0")
			},
			wantEnd: EndComplete, wantStatus: http.StatusOK,
		},
		{
			name: "stream ending in [DONE]",
			upstream: func(w http.ResponseWriter, _ *http.Request) {
				sseHeaders(w)
				writeEvents(w, sseEvents...)
			},
			run: func(t *testing.T, f *fixture, _ *fakeMember) {
				resp, body := f.mustPost(pathChatCompletions, chat("llama"), nil)
				if resp.StatusCode != http.StatusOK || string(body) != strings.Join(sseEvents, "") {
					t.Fatalf("got %d %q, want the upstream's bytes", resp.StatusCode, body)
				}
				checkLabels(t, resp.Header, "gpu0")
			},
			wantEnd: EndComplete, wantStatus: http.StatusOK,
		},
		{
			name: "upstream 4xx relayed",
			upstream: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("X-Engine", "yes")
				w.WriteHeader(http.StatusBadRequest)
				_, _ = io.WriteString(w, `{"object":"error","message":"engine says no"}`)
			},
			run: func(t *testing.T, f *fixture, _ *fakeMember) {
				resp, body := f.mustPost(pathChatCompletions, chat("llama"), nil)
				if resp.StatusCode != http.StatusBadRequest || string(body) != `{"object":"error","message":"engine says no"}` ||
					resp.Header.Get("X-Engine") != "yes" {
					t.Fatalf("got %d %q %v, want the engine's response unchanged", resp.StatusCode, body, resp.Header)
				}
				checkLabels(t, resp.Header, "gpu0")
			},
			wantEnd: EndComplete, wantStatus: http.StatusBadRequest,
		},
		{
			name: "upstream 5xx relayed",
			upstream: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "text/plain")
				w.WriteHeader(http.StatusInternalServerError)
				_, _ = io.WriteString(w, "engine crashed")
			},
			run: func(t *testing.T, f *fixture, _ *fakeMember) {
				resp, body := f.mustPost(pathChatCompletions, chat("llama"), nil)
				if resp.StatusCode != http.StatusInternalServerError || string(body) != "engine crashed" {
					t.Fatalf("got %d %q, want the engine's response unchanged", resp.StatusCode, body)
				}
			},
			wantEnd: EndComplete, wantStatus: http.StatusInternalServerError,
		},
		{
			name:   "response header timeout",
			mutate: []func(*v1alpha1.ReplicaTierSpec){timeouts(100*time.Millisecond, time.Minute)},
			upstream: func(_ http.ResponseWriter, r *http.Request) {
				<-r.Context().Done() // never answers; the router hangs up.
			},
			run: func(t *testing.T, f *fixture, _ *fakeMember) {
				resp, body := f.mustPost(pathChatCompletions, chat("llama"), nil)
				if resp.StatusCode != http.StatusGatewayTimeout || apierrortest.Code(t, body) != "upstream_timeout" {
					t.Fatalf("got %d %q, want 504 upstream_timeout", resp.StatusCode, body)
				}
				checkLabels(t, resp.Header, "gpu0")
			},
			wantEnd: EndHeaderTimeout, wantStatus: http.StatusGatewayTimeout,
		},
		{
			name:   "idle timeout mid-stream",
			mutate: []func(*v1alpha1.ReplicaTierSpec){timeouts(time.Minute, 100*time.Millisecond)},
			upstream: func(w http.ResponseWriter, r *http.Request) {
				sseHeaders(w)
				writeEvents(w, sseEvents[0])
				<-r.Context().Done() // stalls; the router hangs up.
			},
			run: func(t *testing.T, f *fixture, _ *fakeMember) {
				resp, err := f.post(context.Background(), pathChatCompletions, chat("llama"), nil)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = resp.Body.Close() }()
				first := make([]byte, len(sseEvents[0]))
				if _, err := io.ReadFull(resp.Body, first); err != nil || string(first) != sseEvents[0] {
					t.Fatalf("first event %q, %v", first, err)
				}
				if rest, err := io.ReadAll(resp.Body); err == nil {
					t.Fatalf("the stream ended cleanly with %q; want it aborted", rest)
				}
			},
			wantEnd: EndIdleTimeout, wantStatus: http.StatusOK,
		},
		{
			name: "client cancel before headers",
			upstream: func(_ http.ResponseWriter, r *http.Request) {
				<-r.Context().Done()
			},
			run: func(t *testing.T, f *fixture, gpu0 *fakeMember) {
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() {
					resp, err := f.post(ctx, pathChatCompletions, chat("llama"), nil)
					if err == nil {
						_ = resp.Body.Close()
					}
					done <- err
				}()
				gpu0.waitArrival(t)
				cancel()
				if err := <-done; !errors.Is(err, context.Canceled) {
					t.Fatalf("client error = %v, want context.Canceled", err)
				}
			},
			wantEnd: EndClientGone, wantStatus: StatusClientClosedRequest,
		},
		{
			name: "client disconnect mid-stream",
			upstream: func(w http.ResponseWriter, r *http.Request) {
				sseHeaders(w)
				writeEvents(w, sseEvents[0])
				<-r.Context().Done()
			},
			run: func(t *testing.T, f *fixture, _ *fakeMember) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				resp, err := f.post(ctx, pathChatCompletions, chat("llama"), nil)
				if err != nil {
					t.Fatal(err)
				}
				first := make([]byte, len(sseEvents[0]))
				if _, err := io.ReadFull(resp.Body, first); err != nil {
					t.Fatal(err)
				}
				cancel()
				_ = resp.Body.Close()
			},
			wantEnd: EndClientGone, wantStatus: http.StatusOK,
		},
		{
			name: "malformed SSE relayed",
			upstream: func(w http.ResponseWriter, _ *http.Request) {
				sseHeaders(w)
				writeEvents(w, "data: {\"broken json\n\n", "event: ???\ndata\n: comment\n", "data: [DON")
			},
			run: func(t *testing.T, f *fixture, _ *fakeMember) {
				resp, body := f.mustPost(pathChatCompletions, chat("llama"), nil)
				want := "data: {\"broken json\n\nevent: ???\ndata\n: comment\ndata: [DON"
				if resp.StatusCode != http.StatusOK || string(body) != want {
					t.Fatalf("got %d %q, want the upstream's bytes", resp.StatusCode, body)
				}
			},
			wantEnd: EndMalformed, wantStatus: http.StatusOK,
		},
		{
			name: "event after [DONE]",
			upstream: func(w http.ResponseWriter, _ *http.Request) {
				sseHeaders(w)
				writeEvents(w, append(sseEvents[:3:3], sseEvents[0])...)
			},
			run: func(t *testing.T, f *fixture, _ *fakeMember) {
				resp, body := f.mustPost(pathChatCompletions, chat("llama"), nil)
				if want := strings.Join(sseEvents, "") + sseEvents[0]; resp.StatusCode != http.StatusOK || string(body) != want {
					t.Fatalf("got %d %q, want the upstream's bytes", resp.StatusCode, body)
				}
			},
			wantEnd: EndMalformed, wantStatus: http.StatusOK,
		},
		{
			name: "non-2xx event stream not inspected",
			upstream: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = io.WriteString(w, "engine overloaded\n")
			},
			run: func(t *testing.T, f *fixture, _ *fakeMember) {
				resp, body := f.mustPost(pathChatCompletions, chat("llama"), nil)
				if resp.StatusCode != http.StatusServiceUnavailable || string(body) != "engine overloaded\n" {
					t.Fatalf("got %d %q, want the engine's response unchanged", resp.StatusCode, body)
				}
			},
			wantEnd: EndComplete, wantStatus: http.StatusServiceUnavailable,
		},
		{
			name: "non-SSE 2xx body not inspected",
			upstream: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "text/plain; charset=utf-8")
				_, _ = io.WriteString(w, "not an event stream\n")
			},
			run: func(t *testing.T, f *fixture, _ *fakeMember) {
				resp, body := f.mustPost(pathChatCompletions, chat("llama"), nil)
				if resp.StatusCode != http.StatusOK || string(body) != "not an event stream\n" {
					t.Fatalf("got %d %q, want the engine's response unchanged", resp.StatusCode, body)
				}
			},
			wantEnd: EndComplete, wantStatus: http.StatusOK,
		},
		{
			name: "body shorter than its Content-Length",
			upstream: func(w http.ResponseWriter, _ *http.Request) {
				conn, _, err := http.NewResponseController(w).Hijack()
				if err != nil {
					panic(err)
				}
				_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"id\":")
				_ = conn.Close() // a FIN: the body ends 94 bytes early.
			},
			run: func(t *testing.T, f *fixture, _ *fakeMember) {
				// The head and the bytes relayed reach the client before
				// the abort.
				resp, err := f.post(context.Background(), pathChatCompletions, chat("llama"), nil)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = resp.Body.Close() }()
				body, err := io.ReadAll(resp.Body)
				if err == nil || resp.StatusCode != http.StatusOK || !strings.HasPrefix(`{"id":`, string(body)) {
					t.Fatalf("got %d %q, %v; want a prefix of the member's bytes and an aborted response", resp.StatusCode, body, err)
				}
			},
			wantEnd: EndTruncated, wantStatus: http.StatusOK,
		},
		{
			name: "body of known length ends before its first byte",
			upstream: func(w http.ResponseWriter, _ *http.Request) {
				conn, _, err := http.NewResponseController(w).Hijack()
				if err != nil {
					panic(err)
				}
				_, _ = io.WriteString(conn, knownLengthHead)
				_ = conn.Close() // a FIN: nothing of the body was sent.
			},
			run:     expectUnsentAnswer(http.StatusBadGateway, "upstream_unavailable"),
			wantEnd: EndUnavailable, wantStatus: http.StatusBadGateway,
		},
		{
			name: "reset before the first byte of a body of known length",
			upstream: func(w http.ResponseWriter, _ *http.Request) {
				conn, _, err := http.NewResponseController(w).Hijack()
				if err != nil {
					panic(err)
				}
				_, _ = io.WriteString(conn, knownLengthHead)
				if tcp, ok := conn.(*net.TCPConn); ok {
					_ = tcp.SetLinger(0)
				}
				_ = conn.Close()
			},
			run:     expectUnsentAnswer(http.StatusBadGateway, "upstream_unavailable"),
			wantEnd: EndUnavailable, wantStatus: http.StatusBadGateway,
		},
		{
			name:   "body of known length stalls before its first byte",
			mutate: []func(*v1alpha1.ReplicaTierSpec){timeouts(time.Minute, 100*time.Millisecond)},
			upstream: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("X-Engine-Trace", "abc")
				w.Header().Set("Content-Length", "100")
				w.WriteHeader(http.StatusOK)
				w.(http.Flusher).Flush()
				<-r.Context().Done() // the router hangs up at the idle timeout.
			},
			run:     expectUnsentAnswer(http.StatusGatewayTimeout, "upstream_timeout"),
			wantEnd: EndHeaderTimeout, wantStatus: http.StatusGatewayTimeout,
		},
		{
			name: "response without a body",
			upstream: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("X-Engine-Trace", "abc")
				w.WriteHeader(http.StatusNoContent)
			},
			run: func(t *testing.T, f *fixture, _ *fakeMember) {
				resp, body := f.mustPost(pathChatCompletions, chat("llama"), nil)
				if resp.StatusCode != http.StatusNoContent || len(body) != 0 || resp.Header.Get("X-Engine-Trace") != "abc" {
					t.Fatalf("got %d %v %q, want the member's 204 and headers", resp.StatusCode, resp.Header, body)
				}
				checkLabels(t, resp.Header, "gpu0")
			},
			wantEnd: EndComplete, wantStatus: http.StatusNoContent,
		},
		{
			name: "chunked stream without its terminating chunk",
			upstream: func(w http.ResponseWriter, _ *http.Request) {
				sseHeaders(w)
				writeEvents(w, sseEvents[0])
				panic(http.ErrAbortHandler) // net/http closes the connection: no terminating chunk.
			},
			run: func(t *testing.T, f *fixture, _ *fakeMember) {
				resp, err := f.post(context.Background(), pathChatCompletions, chat("llama"), nil)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = resp.Body.Close() }()
				body, err := io.ReadAll(resp.Body)
				if err == nil || string(body) != sseEvents[0] {
					t.Fatalf("got %q, %v; want the first event and an aborted stream", body, err)
				}
			},
			wantEnd: EndTruncated, wantStatus: http.StatusOK,
		},
		{
			name: "stream truncated without [DONE]",
			upstream: func(w http.ResponseWriter, _ *http.Request) {
				sseHeaders(w)
				writeEvents(w, sseEvents[:2]...)
			},
			run: func(t *testing.T, f *fixture, _ *fakeMember) {
				resp, body := f.mustPost(pathChatCompletions, chat("llama"), nil)
				if resp.StatusCode != http.StatusOK || string(body) != strings.Join(sseEvents[:2], "") {
					t.Fatalf("got %d %q, want the upstream's bytes", resp.StatusCode, body)
				}
			},
			wantEnd: EndTruncated, wantStatus: http.StatusOK,
		},
		{
			name: "reset before headers",
			upstream: func(w http.ResponseWriter, _ *http.Request) {
				resetConnection(w)
			},
			run: func(t *testing.T, f *fixture, _ *fakeMember) {
				resp, body := f.mustPost(pathChatCompletions, chat("llama"), nil)
				if resp.StatusCode != http.StatusBadGateway || apierrortest.Code(t, body) != "upstream_unavailable" {
					t.Fatalf("got %d %q, want 502 upstream_unavailable", resp.StatusCode, body)
				}
			},
			wantEnd: EndUnavailable, wantStatus: http.StatusBadGateway,
		},
		{
			name: "endless response header line",
			upstream: func(w http.ResponseWriter, _ *http.Request) {
				writeHijacked(w, "HTTP/1.1 200 OK\r\nX-Endless: ", bytes.Repeat([]byte("a"), 4<<10))
			},
			run: func(t *testing.T, f *fixture, _ *fakeMember) {
				resp, body := f.mustPost(pathChatCompletions, chat("llama"), nil)
				if resp.StatusCode != http.StatusBadGateway || apierrortest.Code(t, body) != "upstream_unavailable" {
					t.Fatalf("got %d %q, want 502 upstream_unavailable", resp.StatusCode, body)
				}
			},
			wantEnd: EndUnavailable, wantStatus: http.StatusBadGateway, wantProtocol: ProtocolHeadTooLarge,
		},
		{
			name: "endless 1xx responses with big headers",
			upstream: func(w http.ResponseWriter, _ *http.Request) {
				writeHijacked(w, "", []byte("HTTP/1.1 100 Continue\r\nX-Pad: "+strings.Repeat("p", 16<<10)+"\r\n\r\n"))
			},
			run: func(t *testing.T, f *fixture, _ *fakeMember) {
				resp, body := f.mustPost(pathChatCompletions, chat("llama"), nil)
				if resp.StatusCode != http.StatusBadGateway || apierrortest.Code(t, body) != "upstream_unavailable" {
					t.Fatalf("got %d %q, want 502 upstream_unavailable", resp.StatusCode, body)
				}
			},
			wantEnd: EndUnavailable, wantStatus: http.StatusBadGateway, wantProtocol: ProtocolHeadTooLarge,
		},
		{
			name: "reset mid-body",
			upstream: func(w http.ResponseWriter, _ *http.Request) {
				sseHeaders(w)
				writeEvents(w, sseEvents[0])
				resetConnection(w)
			},
			run: func(t *testing.T, f *fixture, _ *fakeMember) {
				resp, err := f.post(context.Background(), pathChatCompletions, chat("llama"), nil)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = resp.Body.Close() }()
				body, err := io.ReadAll(resp.Body)
				if err == nil || !strings.HasPrefix(sseEvents[0], string(body)) {
					t.Fatalf("got %q, %v; want a prefix of the first event and an aborted stream", body, err)
				}
			},
			wantEnd: EndUpstreamError, wantStatus: http.StatusOK,
		},
		{
			name: "abort in the copy path",
			run: func(t *testing.T, f *fixture, _ *fakeMember) {
				req := httptest.NewRequestWithContext(context.Background(), http.MethodPost, pathChatCompletions, strings.NewReader(chat("llama")))
				w := &abortingWriter{header: http.Header{}}
				defer func() {
					if p := recover(); p != http.ErrAbortHandler { //nolint:errorlint // The panic value is compared, as net/http does.
						t.Fatalf("panic = %v, want http.ErrAbortHandler", p)
					}
				}()
				f.rt.ServeHTTP(w, req)
				t.Fatal("ServeHTTP returned; want the abort to propagate")
			},
			wantEnd: EndAborted, wantStatus: http.StatusOK,
		},
	}
}

// knownLengthHead is the head of a response with a body of known length
// and a header of the member's own.
const knownLengthHead = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Engine-Trace: abc\r\nContent-Length: 100\r\n\r\n"

// expectUnsentAnswer checks that the client got the router's own error,
// with the router's headers and none of the member's, for a response whose
// body failed before its first byte.
func expectUnsentAnswer(status int, code string) func(*testing.T, *fixture, *fakeMember) {
	return func(t *testing.T, f *fixture, _ *fakeMember) {
		resp, body := f.mustPost(pathChatCompletions, chat("llama"), nil)
		if resp.StatusCode != status || apierrortest.Code(t, body) != code {
			t.Fatalf("got %d %q, want %d %s", resp.StatusCode, body, status, code)
		}
		if resp.Header.Get("X-Engine-Trace") != "" || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("headers %v: want the router's error headers, none of the member's", resp.Header)
		}
		checkLabels(t, resp.Header, "gpu0")
	}
}

// abortingWriter is a client connection whose body writes abort the handler,
// as net/http does when a connection breaks mid-response.
type abortingWriter struct {
	header http.Header
}

func (w *abortingWriter) Header() http.Header { return w.header }
func (w *abortingWriter) WriteHeader(int)     {}
func (w *abortingWriter) Flush()              {}
func (w *abortingWriter) Write([]byte) (int, error) {
	panic(http.ErrAbortHandler)
}

// writeHijacked hijacks the connection and writes head, then chunk over and
// over, until the router hangs up (writeCounted).
func writeHijacked(w http.ResponseWriter, head string, chunk []byte) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(err)
	}
	defer func() { _ = conn.Close() }()
	writeCounted(conn, head, chunk, nil)
}

// resetConnection hijacks the connection and resets it (RST, not FIN).
func resetConnection(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(err)
	}
	if tcp, ok := conn.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0)
	}
	_ = conn.Close()
}

// closeConnection closes the client's connection, the request read and
// unanswered, as an engine dying mid-request does: a FIN, no reset.
func closeConnection(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(err)
	}
	_ = conn.Close()
}

// checkLabels checks the router's response headers.
func checkLabels(t *testing.T, h http.Header, member string) {
	t.Helper()
	if got := h.Values(headerTier); len(got) != 1 || got[0] != "ns/llama" {
		t.Errorf("%s = %q, want ns/llama", headerTier, got)
	}
	if got := h.Values(headerMember); len(got) != 1 || got[0] != member {
		t.Errorf("%s = %q, want %s", headerMember, got, member)
	}
	if got := h.Values(headerRequestID); len(got) != 1 || !safeRequestID(got[0]) {
		t.Errorf("%s = %q, want one generated id", headerRequestID, got)
	}
}

// closedAddress returns an http URL on which nothing listens.
func closedAddress(t *testing.T) string {
	t.Helper()
	l, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return "http://" + addr
}

// TestTerminalPaths proves, for RoundRobin and Capacity, that every way an
// exchange ends releases the lease exactly once, leaves every count at
// zero, reaches exactly one member once, and gives the client the
// documented answer. A request its member never saw (connection refused)
// does not end there: it is admitted again (TestNotSentReadmitted).
func TestTerminalPaths(t *testing.T) {
	for _, strategy := range []v1alpha1.Strategy{v1alpha1.StrategyRoundRobin, v1alpha1.StrategyCapacity} {
		for _, tc := range terminalCases() {
			t.Run(string(strategy)+"/"+tc.name, func(t *testing.T) {
				f := newFixture(t, fixtureOptions{})
				pool := &upstreamPool{}
				gpu0, gpu1 := newUpstream(t, "gpu0", pool), newUpstream(t, "gpu1", pool)
				if tc.upstream != nil {
					gpu0.handle(tc.upstream)
				}
				f.apply(sourcetest.Tier("ns/llama", []string{"llama"}, strategy,
					[]sourcetest.Member{{ID: "gpu0", Endpoint: gpu0.srv.URL, Max: 2}, {ID: "gpu1", Endpoint: gpu1.srv.URL, Max: 2}}, tc.mutate...))

				tc.run(t, f, gpu0)

				o := f.outcome()
				if o.Result != ResultAdmitted || o.Member != "gpu0" || o.End != tc.wantEnd || o.Status != tc.wantStatus {
					t.Errorf("outcome = %+v, want gpu0 admitted, end %s, status %d", o, tc.wantEnd, tc.wantStatus)
				}
				if (strategy == v1alpha1.StrategyCapacity) != (o.Selection != nil) {
					t.Errorf("selection = %v, want one exactly for Capacity", o.Selection)
				}
				if o.ProtocolError != tc.wantProtocol {
					t.Errorf("protocol error %q, want %q", o.ProtocolError, tc.wantProtocol)
				}
				checkTerminalEvidence(t, f, o, strategy)
				if got := f.releaseCalls("ns/llama", "gpu0"); got != 1 || f.totalReleases() != 1 {
					t.Errorf("release calls = %d (total %d), want exactly 1", got, f.totalReleases())
				}
				f.assertIdle("ns/llama")
				if got := gpu0.requests.Load() + gpu1.requests.Load(); got != 1 || gpu1.requests.Load() != 0 {
					t.Errorf("upstream requests: gpu0 %d, gpu1 %d; want 1 on gpu0 only", gpu0.requests.Load(), gpu1.requests.Load())
				}
			})
		}
	}
}

// TestStreamFlushesEachEvent proves the first SSE event reaches the client
// before the member sends the second, and that the client receives exactly
// the member's bytes.
func TestStreamFlushesEachEvent(t *testing.T) {
	for _, strategy := range []v1alpha1.Strategy{v1alpha1.StrategyRoundRobin, v1alpha1.StrategyCapacity} {
		t.Run(string(strategy), func(t *testing.T) {
			f := newFixture(t, fixtureOptions{})
			gpu0, gpu1 := newUpstream(t, "gpu0", nil), newUpstream(t, "gpu1", nil)
			next := make(chan struct{})
			gpu0.handle(func(w http.ResponseWriter, _ *http.Request) {
				sseHeaders(w)
				writeEvents(w, sseEvents[0])
				<-next
				writeEvents(w, sseEvents[1:]...)
			})
			f.apply(sourcetest.Tier("ns/llama", []string{"llama"}, strategy,
				[]sourcetest.Member{{ID: "gpu0", Endpoint: gpu0.srv.URL, Max: 2}, {ID: "gpu1", Endpoint: gpu1.srv.URL, Max: 2}}))

			resp, err := f.post(context.Background(), pathChatCompletions, chat("llama")+"\n", nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = resp.Body.Close() }()
			var got bytes.Buffer
			first := make([]byte, len(sseEvents[0]))
			if _, err := io.ReadFull(resp.Body, first); err != nil {
				t.Fatal(err)
			}
			got.Write(first)
			close(next) // only now may the member send the rest.
			if _, err := got.ReadFrom(resp.Body); err != nil {
				t.Fatal(err)
			}
			if got.String() != strings.Join(sseEvents, "") {
				t.Fatalf("client got %q, want %q", got.String(), strings.Join(sseEvents, ""))
			}
			if o := f.outcome(); o.End != EndComplete {
				t.Fatalf("outcome = %+v", o)
			}
			if seen := gpu0.seen[0]; string(seen.body) != chat("served/model")+"\n" || seen.path != pathChatCompletions {
				t.Fatalf("member got %s %q, want the request body with the served model", seen.path, seen.body)
			}
			f.assertIdle("ns/llama")
		})
	}
}

// TestFailedBodyClosesMemberConnectionBeforeRelease proves that when a
// response body fails (the idle deadline passes, the client goes away) the
// member's connection is closed before the lease is released: at the
// release the member has already seen its request end, so a request
// admitted into the freed slot never finds the member still serving the
// abandoned one (the chaos soak's strict overshoot check,
// docs/RELIABILITY.md#no-ceiling-overshoot).
func TestFailedBodyClosesMemberConnectionBeforeRelease(t *testing.T) {
	// closeBound bounds how long the release waits for the member to see
	// its connection closed; the close comes before the release, so the
	// wait ends as soon as the member's server notices. It only turns a
	// wrong order into a failure.
	const closeBound = 5 * time.Second
	for _, tc := range []struct {
		name    string
		mutate  func(*v1alpha1.ReplicaTierSpec)
		cancel  bool
		wantEnd End
	}{
		{name: "idle timeout", mutate: timeouts(time.Minute, 100*time.Millisecond), wantEnd: EndIdleTimeout},
		{name: "client gone", mutate: timeouts(time.Minute, time.Minute), cancel: true, wantEnd: EndClientGone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			memberGone := make(chan struct{})
			var closedFirst atomic.Bool
			f := newFixture(t, fixtureOptions{onRelease: func(string, string) {
				select {
				case <-memberGone:
					closedFirst.Store(true)
				case <-time.After(closeBound):
				}
			}})
			gpu0 := newUpstream(t, "gpu0", nil)
			gpu0.handle(func(w http.ResponseWriter, r *http.Request) {
				sseHeaders(w)
				writeEvents(w, sseEvents[0])
				<-r.Context().Done() // the member's server saw the connection close.
				close(memberGone)
			})
			f.apply(sourcetest.Tier("ns/llama", []string{"llama"}, v1alpha1.StrategyRoundRobin,
				[]sourcetest.Member{{ID: "gpu0", Endpoint: gpu0.srv.URL, Max: 1}}, tc.mutate))

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			resp, err := f.post(ctx, pathChatCompletions, chat("llama"), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = resp.Body.Close() }()
			first := make([]byte, len(sseEvents[0]))
			if _, err := io.ReadFull(resp.Body, first); err != nil {
				t.Fatalf("first event: %v", err)
			}
			if tc.cancel {
				cancel()
			}
			_, _ = io.ReadAll(resp.Body)
			if o := f.outcome(); o.End != tc.wantEnd {
				t.Fatalf("end = %s, want %s", o.End, tc.wantEnd)
			}
			if !closedFirst.Load() {
				t.Fatal("the lease was released while the member still served the request")
			}
			f.assertIdle("ns/llama")
		})
	}
}
