package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// TestReadyOnceServing checks /readyz and the per-tier
// /readyz/{namespace}/{name} fail until the front door listens, and that
// other admin routes are never held back.
func TestReadyOnceServing(t *testing.T) {
	var serving atomic.Bool
	h := readyOnceServing(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }), &serving)
	status := func(path string) int {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequestWithContext(context.Background(), http.MethodGet, path, nil))
		return w.Code
	}
	for path, want := range map[string]int{"/readyz": 503, "/readyz/ns/llama": 503, "/healthz": 200, "/metrics": 200, "/readyzz": 200} {
		if got := status(path); got != want {
			t.Fatalf("%s before the front door listens = %d, want %d", path, got, want)
		}
	}
	serving.Store(true)
	for _, path := range []string{"/readyz", "/readyz/ns/llama"} {
		if got := status(path); got != http.StatusOK {
			t.Fatalf("%s once serving = %d", path, got)
		}
	}
}
