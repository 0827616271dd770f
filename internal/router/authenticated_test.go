package router

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/apikeys"
	"github.com/sluice-dev/sluice/internal/source/sourcetest"
)

// TestAuthenticatedCallback: Options.Authenticated is called once for
// every request that passed the key check, whatever happens to it next,
// and never for one refused before or by it; with no keys every request
// reaching the check passes it. The refusals before the check end the
// connection.
func TestAuthenticatedCallback(t *testing.T) {
	keys, err := apikeys.Parse([]byte("good-key\n"))
	if err != nil {
		t.Fatal(err)
	}
	auth := http.Header{"Authorization": {"Bearer good-key"}}
	for _, tt := range []struct {
		desc       string
		keys       *apikeys.Keys
		method     string
		path       string
		header     http.Header
		wantStatus int
		wantCalls  int64
	}{
		{desc: "admitted", keys: keys, path: pathChatCompletions, header: auth, wantStatus: 200, wantCalls: 1},
		{desc: "unknown model", keys: keys, path: pathChatCompletions, header: auth, wantStatus: 404, wantCalls: 1},
		{desc: "models", keys: keys, method: http.MethodGet, path: pathModels, header: auth, wantStatus: 200, wantCalls: 1},
		{desc: "no key", keys: keys, path: pathChatCompletions, wantStatus: 401},
		{desc: "models without a key", keys: keys, method: http.MethodGet, path: pathModels, wantStatus: 401},
		{desc: "wrong key", keys: keys, path: pathChatCompletions, header: http.Header{"Authorization": {"Bearer bad"}}, wantStatus: 401},
		{desc: "wrong method", keys: keys, method: http.MethodGet, path: pathChatCompletions, header: auth, wantStatus: 405},
		{desc: "models, wrong method", keys: keys, method: http.MethodPost, path: pathModels, header: auth, wantStatus: 405},
		{desc: "unknown route", keys: keys, path: "/v1/audio/speech", header: auth, wantStatus: 404},
		{desc: "open front door", path: pathChatCompletions, wantStatus: 200, wantCalls: 1},
		{desc: "open front door, models", method: http.MethodGet, path: pathModels, wantStatus: 200, wantCalls: 1},
	} {
		t.Run(tt.desc, func(t *testing.T) {
			var calls atomic.Int64
			f := newFixture(t, fixtureOptions{keys: tt.keys, authed: func(*http.Request) { calls.Add(1) }})
			gpu0 := newUpstream(t, "gpu0", nil)
			f.apply(sourcetest.Tier("ns/llama", []string{"llama"}, v1alpha1.StrategyRoundRobin, []sourcetest.Member{{ID: "gpu0", Endpoint: gpu0.srv.URL, Max: 1}}))
			method := tt.method
			if method == "" {
				method = http.MethodPost
			}
			body := chat("llama")
			if tt.wantStatus == http.StatusNotFound && tt.path == pathChatCompletions {
				body = chat("gpt-4")
			}
			req, err := http.NewRequestWithContext(context.Background(), method, f.front.URL+tt.path, strings.NewReader(body))
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
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != tt.wantStatus || calls.Load() != tt.wantCalls {
				t.Fatalf("status %d, %d calls; want %d, %d", resp.StatusCode, calls.Load(), tt.wantStatus, tt.wantCalls)
			}
			if wantClose := tt.wantStatus != http.StatusOK; resp.Close != wantClose {
				t.Errorf("Connection: close = %v, want %v", resp.Close, wantClose)
			}
		})
	}
}
