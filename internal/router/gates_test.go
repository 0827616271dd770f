package router

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/apierror/apierrortest"
	"github.com/sluice-dev/sluice/internal/apikeys"
	"github.com/sluice-dev/sluice/internal/source/sourcetest"
)

// TestGates proves every request-wide gate answers with its documented
// error before any lease exists or any member is reached.
func TestGates(t *testing.T) {
	keys, err := apikeys.Parse([]byte("good-key\n"))
	if err != nil {
		t.Fatal(err)
	}
	auth := http.Header{"Authorization": {"Bearer good-key"}}
	tests := []struct {
		desc       string
		method     string
		path       string
		body       string
		header     http.Header
		chunked    bool
		wantStatus int
		wantCode   string
	}{
		{desc: "GET on an inference route", method: http.MethodGet, path: pathChatCompletions, header: auth, wantStatus: 405, wantCode: "method_not_allowed"},
		{desc: "PUT on an inference route", method: http.MethodPut, path: pathEmbeddings, body: chat("llama"), header: auth, wantStatus: 405, wantCode: "method_not_allowed"},
		{desc: "no key", path: pathChatCompletions, body: chat("llama"), wantStatus: 401, wantCode: "invalid_api_key"},
		{desc: "wrong key", path: pathChatCompletions, body: chat("llama"), header: http.Header{"Authorization": {"Bearer bad-key"}}, wantStatus: 401, wantCode: "invalid_api_key"},
		{desc: "key prefix", path: pathChatCompletions, body: chat("llama"), header: http.Header{"Authorization": {"Bearer good"}}, wantStatus: 401, wantCode: "invalid_api_key"},
		{desc: "basic auth", path: pathChatCompletions, body: chat("llama"), header: http.Header{"Authorization": {"Basic Z29vZC1rZXk="}}, wantStatus: 401, wantCode: "invalid_api_key"},
		{desc: "announced body too large", path: pathChatCompletions, body: chat(strings.Repeat("x", 200)), header: auth, wantStatus: 413, wantCode: "request_too_large"},
		{desc: "chunked body too large", path: pathChatCompletions, body: chat(strings.Repeat("x", 200)), header: auth, chunked: true, wantStatus: 413, wantCode: "request_too_large"},
		{desc: "not JSON", path: pathChatCompletions, body: "model=llama", header: auth, wantStatus: 400, wantCode: "invalid_request_body"},
		{desc: "empty body", path: pathChatCompletions, body: "", header: auth, wantStatus: 400, wantCode: "invalid_request_body"},
		{desc: "JSON array", path: pathChatCompletions, body: `[{"model":"llama"}]`, header: auth, wantStatus: 400, wantCode: "invalid_request_body"},
		{desc: "no model", path: pathCompletions, body: `{"prompt":"hi"}`, header: auth, wantStatus: 400, wantCode: "invalid_request_body"},
		{desc: "model not a string", path: pathResponses, body: `{"model":7}`, header: auth, wantStatus: 400, wantCode: "invalid_request_body"},
		{desc: "truncated JSON", path: pathChatCompletions, body: `{"model":"llama"`, header: auth, wantStatus: 400, wantCode: "invalid_request_body"},
		{desc: "unknown model", path: pathChatCompletions, body: chat("gpt-4"), header: auth, wantStatus: 404, wantCode: "model_not_found"},
		{desc: "model of another case", path: pathChatCompletions, body: chat("LLAMA"), header: auth, wantStatus: 404, wantCode: "model_not_found"},
		{desc: "unknown route", path: "/v1/audio/speech", body: chat("llama"), header: auth, wantStatus: 404, wantCode: "not_found"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			f := newFixture(t, fixtureOptions{keys: keys, maxBody: 128})
			pool := &upstreamPool{}
			gpu0, gpu1 := newUpstream(t, "gpu0", pool), newUpstream(t, "gpu1", pool)
			f.apply(sourcetest.Tier("ns/llama", []string{"llama"}, v1alpha1.StrategyCapacity,
				[]sourcetest.Member{{ID: "gpu0", Endpoint: gpu0.srv.URL, Max: 2}, {ID: "gpu1", Endpoint: gpu1.srv.URL, Max: 2}}))

			method := tt.method
			if method == "" {
				method = http.MethodPost
			}
			var body io.Reader = strings.NewReader(tt.body)
			if tt.chunked {
				body = io.MultiReader(body) // hides the length: sent chunked.
			}
			req, err := http.NewRequestWithContext(context.Background(), method, f.front.URL+tt.path, body)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tt.header {
				req.Header[k] = v
			}
			resp, err := f.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			data, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != tt.wantStatus || apierrortest.Code(t, data) != tt.wantCode {
				t.Fatalf("got %d %s, want %d %s", resp.StatusCode, data, tt.wantStatus, tt.wantCode)
			}
			if resp.StatusCode == 405 && resp.Header.Get("Allow") != http.MethodPost {
				t.Errorf("Allow = %q, want POST", resp.Header.Get("Allow"))
			}
			// 401, 404, 405 and 413 end the connection; a 400 keeps it.
			if wantClose := tt.wantStatus != http.StatusBadRequest; resp.Close != wantClose {
				t.Errorf("Connection: close = %v, want %v", resp.Close, wantClose)
			}
			if resp.StatusCode == 401 && resp.Header.Get("WWW-Authenticate") != "Bearer" {
				t.Errorf("WWW-Authenticate = %q", resp.Header.Get("WWW-Authenticate"))
			}
			if tt.path != "/v1/audio/speech" {
				o := f.outcome()
				if o.Result != ResultRefused || o.Code != tt.wantCode || o.Member != "" || o.Selection != nil {
					t.Errorf("outcome = %+v, want refused %s without a member", o, tt.wantCode)
				}
			}
			if f.totalReleases() != 0 || gpu0.requests.Load()+gpu1.requests.Load() != 0 {
				t.Errorf("releases %d, upstream requests %d; want none", f.totalReleases(), gpu0.requests.Load()+gpu1.requests.Load())
			}
			f.assertIdle("ns/llama")
			if cursorMoved(f, "ns/llama") {
				t.Error("a refused request moved the admission cursor: Acquire was called")
			}
		})
	}
}

// cursorMoved reports whether the next admission of an idle two-member tier
// would not start at gpu0, i.e. whether some Acquire reserved a member.
func cursorMoved(f *fixture, key string) bool {
	ts, _ := f.rt.Tiers().Table().Lookup(key)
	lease, err := ts.Admission().Acquire(admissionInputs(ts))
	if err != nil {
		f.t.Fatalf("probe acquire: %v", err)
	}
	defer lease.Release()
	return lease.Member() != "gpu0"
}

// TestGateOrder proves the gates run in the documented order: method, then
// key, then body size, then body shape, then alias.
func TestGateOrder(t *testing.T) {
	keys, _ := apikeys.Parse([]byte("k\n"))
	f := newFixture(t, fixtureOptions{keys: keys, maxBody: 16})
	f.apply(sourcetest.Tier("ns/llama", []string{"llama"}, "", []sourcetest.Member{{ID: "gpu0", Endpoint: closedAddress(t), Max: 1}}))
	big := strings.Repeat("x", 64)
	for _, tt := range []struct {
		method, body, key string
		wantCode          string
	}{
		{http.MethodGet, big, "", "method_not_allowed"},
		{http.MethodPost, big, "", "invalid_api_key"},
		{http.MethodPost, big, "k", "request_too_large"},
		{http.MethodPost, "[1]", "k", "invalid_request_body"},
		{http.MethodPost, `{"model":"x"}`, "k", "model_not_found"},
	} {
		req, _ := http.NewRequestWithContext(context.Background(), tt.method, f.front.URL+pathChatCompletions, strings.NewReader(tt.body))
		if tt.key != "" {
			req.Header.Set("Authorization", "Bearer "+tt.key)
		}
		resp, err := f.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if got := apierrortest.Code(t, data); got != tt.wantCode {
			t.Errorf("%s %q key %q: code %s, want %s", tt.method, tt.body, tt.key, got, tt.wantCode)
		}
		f.outcome()
	}
}

// TestModelsList proves GET /v1/models lists the node's aliases and is
// behind the API key.
func TestModelsList(t *testing.T) {
	keys, _ := apikeys.Parse([]byte("k\n"))
	f := newFixture(t, fixtureOptions{keys: keys})
	f.apply(
		sourcetest.Tier("ns/llama", []string{"llama", "chat"}, "", []sourcetest.Member{{ID: "gpu0", Endpoint: closedAddress(t), Max: 1}}),
		sourcetest.Tier("ns/embed", []string{"embed"}, "", []sourcetest.Member{{ID: "cpu0", Endpoint: closedAddress(t), Max: 1}}),
	)
	get := func(key, method string) (int, string) {
		req, _ := http.NewRequestWithContext(context.Background(), method, f.front.URL+pathModels, nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := f.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		data, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(bytes.TrimSpace(data))
	}
	want := `{"object":"list","data":[` +
		`{"id":"chat","object":"model","created":0,"owned_by":"sluice"},` +
		`{"id":"embed","object":"model","created":0,"owned_by":"sluice"},` +
		`{"id":"llama","object":"model","created":0,"owned_by":"sluice"}]}`
	if status, body := get("k", http.MethodGet); status != 200 || body != want {
		t.Fatalf("GET /v1/models = %d %s, want %s", status, body, want)
	}
	if status, body := get("", http.MethodGet); status != 401 || apierrortest.Code(t, []byte(body)) != "invalid_api_key" {
		t.Fatalf("without a key: %d %s", status, body)
	}
	if status, body := get("k", http.MethodPost); status != 405 || apierrortest.Code(t, []byte(body)) != "method_not_allowed" {
		t.Fatalf("POST: %d %s", status, body)
	}
	empty := New(Options{})
	if got := string(bytes.TrimSpace(empty.Tiers().Table().Models())); got != `{"object":"list","data":[]}` {
		t.Fatalf("before any configuration: %s", got)
	}
}
