package adminserver

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

// recorder is a minimal http.ResponseWriter for calling handlers directly.
type recorder struct {
	header http.Header
	status int
	body   strings.Builder
}

func newRecorder() *recorder { return &recorder{header: http.Header{}, status: http.StatusOK} }

func mustRequest(t *testing.T, method, path string) *http.Request {
	t.Helper()
	r, err := http.NewRequestWithContext(context.Background(), method, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) { r.status = status }

func (r *recorder) Write(p []byte) (int, error) { return r.body.Write(p) }
