package router

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sluice-dev/sluice/internal/source/sourcetest"
)

// BenchmarkProxy measures a small non-streaming request sent directly to an
// httptest member and through the router to the same member, serially
// (latency at concurrency 1) and with b.RunParallel (throughput). The
// router's added cost per request is the difference of the two ns/op, and
// its added allocations the difference of allocs/op; client, router and
// member share the process and its cores, as they share a node.
func BenchmarkProxy(b *testing.B) {
	const reqBody = `{"model":"llama","messages":[{"role":"user","content":"Say hi."}],"max_tokens":8}`
	const respBody = `{"id":"cmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hi."}}]}`
	member := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, respBody)
	}))
	defer member.Close()
	front, client := benchFront(b, member.URL, 256)
	do := func(b *testing.B, url string) {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url, strings.NewReader(reqBody))
		if err != nil {
			b.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK || n != int64(len(respBody)) {
			b.Fatalf("status %d, %d bytes", resp.StatusCode, n)
		}
	}
	for _, target := range []struct{ name, url string }{
		{"direct", member.URL + pathChatCompletions},
		{"router", front.URL + pathChatCompletions},
	} {
		b.Run(target.name+"/serial", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				do(b, target.url)
			}
		})
		b.Run(target.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					do(b, target.url)
				}
			})
		})
	}
}

// BenchmarkProxyStream measures a streamed chat completion (streamEvents
// SSE events, each written and flushed on its own, then data: [DONE]) sent
// directly to an httptest member and through the router, serially. The
// router's added cost per stream is the difference of the two ns/op and
// allocs/op.
func BenchmarkProxyStream(b *testing.B) {
	const (
		reqBody      = `{"model":"llama","messages":[{"role":"user","content":"Say hi."}],"stream":true}`
		event        = "data: {\"id\":\"cmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"token\"}}]}\n\n"
		done         = "data: [DONE]\n\n"
		streamEvents = 64
	)
	member := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		f := w.(http.Flusher)
		for range streamEvents {
			_, _ = io.WriteString(w, event)
			f.Flush()
		}
		_, _ = io.WriteString(w, done)
	}))
	defer member.Close()
	front, client := benchFront(b, member.URL, 16)
	const want = streamEvents*len(event) + len(done)
	for _, target := range []struct{ name, url string }{
		{"direct", member.URL + pathChatCompletions},
		{"router", front.URL + pathChatCompletions},
	} {
		b.Run(target.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, target.url, strings.NewReader(reqBody))
				if err != nil {
					b.Fatal(err)
				}
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				n, _ := io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusOK || n != int64(want) {
					b.Fatalf("status %d, %d bytes, want %d", resp.StatusCode, n, want)
				}
			}
		})
	}
}

// benchConnKey is the context key of a benchmark connection's
// authenticated flag.
type benchConnKey struct{}

// benchFront serves a RoundRobin tier of two members at memberURL through a
// router and returns its front door and a client keeping up to idle
// connections; both are closed when the benchmark ends. Its server keeps a
// per-connection authenticated flag that the router's Authenticated
// callback sets, as cmd/router's connection limits do: a context lookup
// and an atomic load per request.
func benchFront(b *testing.B, memberURL string, idle int) (*httptest.Server, *http.Client) {
	b.Helper()
	rt := New(Options{Authenticated: func(r *http.Request) {
		if a, _ := r.Context().Value(benchConnKey{}).(*atomic.Bool); a != nil && !a.Load() {
			a.Store(true)
		}
	}})
	b.Cleanup(rt.Close)
	rt.Tiers().Apply(sourcetest.Snapshot(sourcetest.Tier("ns/llama", []string{"llama"}, "RoundRobin",
		[]sourcetest.Member{{ID: "gpu0", Endpoint: memberURL}, {ID: "gpu1", Endpoint: memberURL}})))
	front := httptest.NewUnstartedServer(rt)
	front.Config.ConnContext = func(ctx context.Context, _ net.Conn) context.Context {
		return context.WithValue(ctx, benchConnKey{}, new(atomic.Bool))
	}
	front.Start()
	b.Cleanup(front.Close)
	transport := &http.Transport{MaxIdleConnsPerHost: idle, DisableCompression: true}
	b.Cleanup(transport.CloseIdleConnections)
	return front, &http.Client{Transport: transport}
}
