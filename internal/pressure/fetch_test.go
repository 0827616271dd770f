package pressure

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// exactBody returns a valid vLLM exposition padded with comment lines to
// exactly n bytes.
func exactBody(t *testing.T, n int) string {
	t.Helper()
	const head = "vllm:num_requests_running 1\nvllm:num_requests_waiting 0\n"
	var b strings.Builder
	b.WriteString(head)
	for b.Len() < n {
		line := "# " + strings.Repeat("x", min(1000, n-b.Len()-3)) + "\n"
		if n-b.Len() < 3 {
			t.Fatalf("cannot pad to %d bytes", n)
		}
		b.WriteString(line)
	}
	if b.Len() != n {
		t.Fatalf("body is %d bytes, want %d", b.Len(), n)
	}
	return b.String()
}

func TestHTTPCollector(t *testing.T) {
	vllm := string(readFixture(t, "vllm.txt"))
	tests := []struct {
		name    string
		handler http.HandlerFunc
		engine  Engine
		wantErr error
		running float64
	}{
		{
			name:    "fixture",
			handler: func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(vllm)) },
			engine:  EngineVLLM,
			running: 12,
		},
		{
			name: "exactly MaxBodyBytes is accepted",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				_, _ = w.Write([]byte(exactBody(t, MaxBodyBytes)))
			},
			engine:  EngineVLLM,
			running: 1,
		},
		{
			name: "one byte over MaxBodyBytes with Content-Length",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				body := exactBody(t, MaxBodyBytes+1)
				w.Header().Set("Content-Length", strconv.Itoa(len(body)))
				_, _ = w.Write([]byte(body))
			},
			engine:  EngineVLLM,
			wantErr: ErrBodyTooLarge,
		},
		{
			name: "one byte over MaxBodyBytes, chunked",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				body := exactBody(t, MaxBodyBytes+1)
				_, _ = w.Write([]byte(body[:1024]))
				w.(http.Flusher).Flush()
				_, _ = w.Write([]byte(body[1024:]))
			},
			engine:  EngineVLLM,
			wantErr: ErrBodyTooLarge,
		},
		{
			name:    "server error",
			handler: func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "boom", http.StatusInternalServerError) },
			engine:  EngineVLLM,
			wantErr: ErrHTTPStatus,
		},
		{
			name: "redirects are not followed",
			handler: func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, "http://127.0.0.1:1/metrics", http.StatusFound)
			},
			engine:  EngineVLLM,
			wantErr: ErrHTTPStatus,
		},
		{
			name:    "garbage body",
			handler: func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("{not metrics")) },
			engine:  EngineVLLM,
			wantErr: ErrParse,
		},
		{
			name:    "wrong engine",
			handler: func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(vllm)) },
			engine:  EngineTGI,
			wantErr: ErrMissingSeries,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			defer srv.Close()
			tel, err := HTTPCollector{}.Collect(context.Background(), Target{MetricsURL: srv.URL + "/metrics", Engine: tc.engine})
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error = %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				if strings.Contains(err.Error(), "127.0.0.1") || strings.Contains(err.Error(), "boom") {
					t.Fatalf("error %q leaks the address or body", err)
				}
				return
			}
			if tel.Running == nil || *tel.Running != tc.running {
				t.Fatalf("running = %s, want %v", show(tel.Running), tc.running)
			}
		})
	}
}

// TestHTTPCollectorTimeout waits out the real FetchTimeout against a server
// that never answers.
func TestHTTPCollectorTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)

	start := time.Now()
	_, err := HTTPCollector{}.Collect(context.Background(), Target{MetricsURL: srv.URL, Engine: EngineVLLM})
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("error = %v, want ErrTimeout", err)
	}
	if elapsed := time.Since(start); elapsed < FetchTimeout {
		t.Fatalf("returned after %v, before FetchTimeout", elapsed)
	}
}

// TestHTTPCollectorTimeoutMidBody covers a server that sends headers and then
// trickles: the timeout covers the body too.
func TestHTTPCollectorTimeoutMidBody(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("vllm:num_requests_running 1\n"))
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)

	_, err := HTTPCollector{}.Collect(context.Background(), Target{MetricsURL: srv.URL, Engine: EngineVLLM})
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("error = %v, want ErrTimeout", err)
	}
}

func TestHTTPCollectorCancelAndRefused(t *testing.T) {
	entered := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		close(entered)
		<-r.Context().Done()
	}))
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-entered
		cancel()
	}()
	_, err := HTTPCollector{}.Collect(ctx, Target{MetricsURL: srv.URL, Engine: EngineVLLM})
	if !errors.Is(err, ErrTransport) {
		t.Fatalf("cancelled: error = %v, want ErrTransport", err)
	}
	url := srv.URL
	srv.Close()

	_, err = HTTPCollector{}.Collect(context.Background(), Target{MetricsURL: url, Engine: EngineVLLM})
	if !errors.Is(err, ErrTransport) {
		t.Fatalf("refused: error = %v, want ErrTransport", err)
	}
	if strings.Contains(err.Error(), "127.0.0.1") {
		t.Fatalf("error %q leaks the address", err)
	}
}

func TestMetricsURL(t *testing.T) {
	tests := []struct {
		endpoint, path, want string
		wantErr              bool
	}{
		{endpoint: "http://127.0.0.1:8001", want: "http://127.0.0.1:8001/metrics"},
		{endpoint: "http://127.0.0.1:8001/", path: "/stats/prometheus", want: "http://127.0.0.1:8001/stats/prometheus"},
		{endpoint: "https://[::1]:8443", path: "/metrics", want: "https://[::1]:8443/metrics"},
		{endpoint: "http://localhost:8001", path: "metrics", wantErr: true},
		{endpoint: "ftp://127.0.0.1", wantErr: true},
		{endpoint: "127.0.0.1:8001", wantErr: true},
		{endpoint: "http://user@127.0.0.1:8001", wantErr: true},
		{endpoint: "http://127.0.0.1:8001?x=1", wantErr: true},
		{endpoint: "http://127.0.0.1:8001#frag", wantErr: true},
	}
	for _, tc := range tests {
		got, err := MetricsURL(tc.endpoint, tc.path)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("MetricsURL(%q, %q) = %q, %v", tc.endpoint, tc.path, got, err)
		}
		if err != nil && !errors.Is(err, ErrInvalidMetricsURL) {
			t.Errorf("MetricsURL(%q, %q) error = %v, want ErrInvalidMetricsURL", tc.endpoint, tc.path, err)
		}
	}
}
