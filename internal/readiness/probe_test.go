package readiness

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/memberhttp"
)

const served = "meta-llama/Llama-3.1-70B-Instruct"

func TestModelOwner(t *testing.T) {
	for body, want := range map[string]string{
		`{"object":"list","data":[{"id":"lora"},{"id":"` + served + `","owned_by":"vllm"}]}`: "vllm",
		`{"object":"list","data":[{"id":"` + served + `","owned_by":"enginesim"}]}`:          "enginesim",
		`{"object":"list","data":[{"id":"` + served + `"}]}`:                                 "",
		`{"object":"list","data":[{"id":"` + served + `","owned_by":7}]}`:                    "",
	} {
		if got, err := ModelOwner([]byte(body), served); err != nil || got != want {
			t.Errorf("ModelOwner(%s) = %q, %v; want %q", body, got, err, want)
		}
	}
	if _, err := ModelOwner([]byte(`{"object":"list","data":[{"id":"other","owned_by":"vllm"}]}`), served); !errors.Is(err, ErrModelNotServed) {
		t.Errorf("ModelOwner of another model = %v, want ErrModelNotServed", err)
	}
}

func TestCheckModelList(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		wantErr error
	}{
		{name: "exact id", body: `{"object":"list","data":[{"id":"meta-llama/Llama-3.1-70B-Instruct","object":"model","owned_by":"vllm"}]}`},
		{name: "one of several", body: `{"object":"list","data":[{"id":"lora-a"},{"id":"meta-llama/Llama-3.1-70B-Instruct"},{"id":"lora-b"}]}`},
		{name: "extra fields (llama.cpp shape)", body: `{"models":[{"name":"x"}],"object":"list","data":[{"id":"meta-llama/Llama-3.1-70B-Instruct","meta":{"n_ctx_train":131072}}]}`},
		{name: "missing model", body: `{"object":"list","data":[{"id":"mistralai/Mistral-7B-Instruct-v0.3"}]}`, wantErr: ErrModelNotServed},
		{name: "empty list", body: `{"object":"list","data":[]}`, wantErr: ErrModelNotServed},
		{name: "prefix of the served id", body: `{"object":"list","data":[{"id":"meta-llama/Llama-3.1-70B"}]}`, wantErr: ErrModelNotServed},
		{name: "served id is a prefix", body: `{"object":"list","data":[{"id":"meta-llama/Llama-3.1-70B-Instruct-FP8"}]}`, wantErr: ErrModelNotServed},
		{name: "case differs", body: `{"object":"list","data":[{"id":"meta-llama/llama-3.1-70b-instruct"}]}`, wantErr: ErrModelNotServed},
		{name: "trailing space", body: `{"object":"list","data":[{"id":"meta-llama/Llama-3.1-70B-Instruct "}]}`, wantErr: ErrModelNotServed},
		{name: "served model as root, not id", body: `{"object":"list","data":[{"id":"chat","root":"meta-llama/Llama-3.1-70B-Instruct"}]}`, wantErr: ErrModelNotServed},
		{name: "malformed JSON", body: `{"object":"list","data":[{"id":"meta-llama/Llama-3.1-70B-Instruct"}`, wantErr: ErrMalformedResponse},
		{name: "not JSON", body: `<html>502 Bad Gateway</html>`, wantErr: ErrMalformedResponse},
		{name: "single model object", body: `{"id":"meta-llama/Llama-3.1-70B-Instruct","object":"model"}`, wantErr: ErrMalformedResponse},
		{name: "missing object", body: `{"data":[{"id":"meta-llama/Llama-3.1-70B-Instruct"}]}`, wantErr: ErrMalformedResponse},
		{name: "null data", body: `{"object":"list","data":null}`, wantErr: ErrMalformedResponse},
		{name: "numeric id", body: `{"object":"list","data":[{"id":7}]}`, wantErr: ErrMalformedResponse},
		{name: "array", body: `[{"id":"meta-llama/Llama-3.1-70B-Instruct"}]`, wantErr: ErrMalformedResponse},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := CheckModelList([]byte(tc.body), served); !errors.Is(err, tc.wantErr) {
				t.Fatalf("CheckModelList = %v, want %v", err, tc.wantErr)
			}
		})
	}
	if err := CheckModelList([]byte(`{"object":"list","data":[{"id":""}]}`), ""); !errors.Is(err, ErrModelNotServed) {
		t.Fatalf("empty served model matched an empty id: %v", err)
	}
}

func TestHTTPProber(t *testing.T) {
	list := `{"object":"list","data":[{"id":"` + served + `"}]}`
	tests := []struct {
		name    string
		handler http.HandlerFunc
		wantErr error
	}{
		{
			name: "served",
			handler: func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/v1/models" || r.Method != http.MethodGet {
					http.NotFound(w, r)
					return
				}
				_, _ = w.Write([]byte(list))
			},
		},
		{
			name:    "not served",
			handler: func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{"object":"list","data":[]}`)) },
			wantErr: ErrModelNotServed,
		},
		{
			name:    "status",
			handler: func(w http.ResponseWriter, _ *http.Request) { http.Error(w, list, http.StatusServiceUnavailable) },
			wantErr: memberhttp.ErrHTTPStatus,
		},
		{
			name: "redirect not followed",
			handler: func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
			},
			wantErr: memberhttp.ErrHTTPStatus,
		},
		{
			name: "oversized",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				body := `{"object":"list","data":[{"id":"` + served + `","pad":"` + strings.Repeat("x", MaxBodyBytes) + `"}]}`
				w.Header().Set("Content-Length", strconv.Itoa(len(body)))
				_, _ = w.Write([]byte(body))
			},
			wantErr: memberhttp.ErrBodyTooLarge,
		},
		{
			name: "oversized, chunked",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				_, _ = w.Write([]byte(`{"object":"list","data":[{"id":"` + served + `","pad":"`))
				w.(http.Flusher).Flush()
				_, _ = w.Write([]byte(strings.Repeat("x", MaxBodyBytes) + `"}]}`))
			},
			wantErr: memberhttp.ErrBodyTooLarge,
		},
		{
			name:    "malformed",
			handler: func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(list[:len(list)-2])) },
			wantErr: ErrMalformedResponse,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			defer srv.Close()
			u, err := ModelsURL(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			err = HTTPProber{}.Probe(context.Background(), Target{ModelsURL: u, ServedModel: served})
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Probe = %v, want %v", err, tc.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), "127.0.0.1") {
				t.Fatalf("error %q leaks the address", err)
			}
		})
	}
}

// TestHTTPProberTimeout waits out the real ProbeTimeout against a server that
// never answers.
func TestHTTPProberTimeout(t *testing.T) {
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
	err := HTTPProber{}.Probe(context.Background(), Target{ModelsURL: srv.URL + ModelsPath, ServedModel: served})
	if !errors.Is(err, memberhttp.ErrTimeout) {
		t.Fatalf("Probe = %v, want ErrTimeout", err)
	}
	if elapsed := time.Since(start); elapsed < ProbeTimeout {
		t.Fatalf("returned after %v, before ProbeTimeout", elapsed)
	}
}

func TestModelsURL(t *testing.T) {
	tests := []struct{ endpoint, want string }{
		{"http://127.0.0.1:8001", "http://127.0.0.1:8001/v1/models"},
		{"http://127.0.0.1:8001/", "http://127.0.0.1:8001/v1/models"},
		{"https://[::1]:8443/engine", "https://[::1]:8443/engine/v1/models"},
		{"localhost:8001", ""},
		{"ftp://127.0.0.1", ""},
		{"http://u@127.0.0.1", ""},
		{"http://127.0.0.1?q=1", ""},
		{"http://127.0.0.1#f", ""},
		{"", ""},
	}
	for _, tc := range tests {
		got, err := ModelsURL(tc.endpoint)
		if got != tc.want || (err != nil) != (tc.want == "") {
			t.Errorf("ModelsURL(%q) = %q, %v; want %q", tc.endpoint, got, err, tc.want)
		}
		if err != nil && !errors.Is(err, ErrInvalidEndpoint) {
			t.Errorf("ModelsURL(%q) error = %v, want ErrInvalidEndpoint", tc.endpoint, err)
		}
	}
}
