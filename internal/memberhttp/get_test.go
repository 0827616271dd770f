package memberhttp

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestGet(t *testing.T) {
	const limit = 16
	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Accept") != "text/plain" {
			http.Error(w, "accept", http.StatusBadRequest)
			return
		}
		_, _ = w.Write([]byte(strings.Repeat("x", limit)))
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", "17")
		_, _ = w.Write([]byte(strings.Repeat("x", limit+1)))
	})
	mux.HandleFunc("/big-chunked", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(strings.Repeat("x", limit)))
		w.(http.Flusher).Flush()
		_, _ = w.Write([]byte("y"))
	})
	mux.HandleFunc("/status", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) })
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ok", http.StatusFound) })
	mux.HandleFunc("/hang", func(http.ResponseWriter, *http.Request) { <-release })
	srv := httptest.NewServer(mux)
	t.Cleanup(func() { close(release); srv.Close() })

	client := NewClient(time.Second)
	for _, tc := range []struct {
		path    string
		timeout time.Duration
		want    error
	}{
		{"/ok", time.Second, nil},
		{"/big", time.Second, ErrBodyTooLarge},
		{"/big-chunked", time.Second, ErrBodyTooLarge},
		{"/status", time.Second, ErrHTTPStatus},
		{"/redirect", time.Second, ErrHTTPStatus},
		{"/hang", 50 * time.Millisecond, ErrTimeout},
	} {
		t.Run(tc.path, func(t *testing.T) {
			body, err := Get(context.Background(), client, srv.URL+tc.path, "text/plain", tc.timeout, limit)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Get(%s) error = %v, want %v", tc.path, err, tc.want)
			}
			if err == nil && len(body) != limit {
				t.Fatalf("body length = %d, want %d", len(body), limit)
			}
			if err != nil && strings.Contains(err.Error(), srv.Listener.Addr().String()) {
				t.Fatalf("error %q names the address", err)
			}
		})
	}
}

func TestGetRefusedAndInvalid(t *testing.T) {
	l, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	client := NewClient(time.Second)
	if _, err := Get(context.Background(), client, "http://"+addr+"/", "", time.Second, 1); !errors.Is(err, ErrTransport) {
		t.Fatalf("refused connection: error = %v, want ErrTransport", err)
	}
	if _, err := Get(context.Background(), client, "http://[::1", "", time.Second, 1); !errors.Is(err, ErrInvalidURL) {
		t.Fatalf("invalid URL: error = %v, want ErrInvalidURL", err)
	}
}

func TestJoinURL(t *testing.T) {
	for _, tc := range []struct{ endpoint, path, want string }{
		{"http://127.0.0.1:8001", "/metrics", "http://127.0.0.1:8001/metrics"},
		{"http://127.0.0.1:8001/", "/v1/models", "http://127.0.0.1:8001/v1/models"},
		{"https://[::1]:8443", "/prom/metrics", "https://[::1]:8443/prom/metrics"},
		{"http://127.0.0.1:8001", "metrics", ""},
		{"http://127.0.0.1:8001", "", ""},
		{"ftp://127.0.0.1", "/metrics", ""},
		{"http://u:p@127.0.0.1", "/metrics", ""},
		{"http://127.0.0.1?q=1", "/metrics", ""},
		{"http://127.0.0.1#f", "/metrics", ""},
		{"/relative", "/metrics", ""},
	} {
		got, err := JoinURL(tc.endpoint, tc.path)
		if got != tc.want || (tc.want == "") != errors.Is(err, ErrInvalidURL) {
			t.Errorf("JoinURL(%q, %q) = %q, %v; want %q", tc.endpoint, tc.path, got, err, tc.want)
		}
	}
}
