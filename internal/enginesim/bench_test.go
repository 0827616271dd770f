package enginesim

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/utils/clock"
)

// benchChat is the proxy-overhead benchmark's request: tiny, non-streaming,
// one output token.
const benchChat = `{"model":"sim/model-1","messages":[{"role":"user","content":"Say hi"}],"max_tokens":1}`

// discardWriter is a reusable http.ResponseWriter that keeps nothing.
type discardWriter struct {
	h      http.Header
	status int
}

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d *discardWriter) WriteHeader(status int)      { d.status = status }

func checkStatus(b *testing.B, got, want int) {
	b.Helper()
	if got != want {
		b.Fatalf("status %d, want %d", got, want)
	}
}

// reusableBody is a request body that can be rewound between iterations.
type reusableBody struct{ bytes.Reader }

func (*reusableBody) Close() error { return nil }

func newBenchServer(b *testing.B) *Server {
	b.Helper()
	srv, err := NewServer(zeroLatencyConfig(), WithClock(clock.RealClock{}))
	if err != nil {
		b.Fatal(err)
	}
	return srv
}

// BenchmarkChatNonStreaming measures the simulator's own cost of a tiny
// non-streaming chat completion with zero latencies: the handler is called
// directly, with a reused request and a discarding writer, from parallel
// goroutines.
func BenchmarkChatNonStreaming(b *testing.B) {
	srv := newBenchServer(b)
	payload := []byte(benchChat)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		body := &reusableBody{}
		req := httptest.NewRequestWithContext(context.Background(), http.MethodPost, "/v1/chat/completions", nil)
		w := &discardWriter{h: make(http.Header)}
		for pb.Next() {
			body.Reset(payload)
			req.Body = body
			clear(w.h)
			srv.ServeHTTP(w, req)
			checkStatus(b, w.status, http.StatusOK)
		}
	})
}

// BenchmarkChatNonStreamingHTTP measures the same request end to end over
// loopback HTTP/1.1 with keep-alive, client included.
func BenchmarkChatNonStreamingHTTP(b *testing.B) {
	ts := httptest.NewServer(newBenchServer(b))
	defer ts.Close()
	client := ts.Client()
	client.Transport.(*http.Transport).MaxIdleConnsPerHost = 64
	url := ts.URL + "/v1/chat/completions"
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url, strings.NewReader(benchChat))
			if err != nil {
				b.Fatal(err)
			}
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			checkStatus(b, resp.StatusCode, http.StatusOK)
		}
	})
}
