package router

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/apierror/apierrortest"
	"github.com/sluice-dev/sluice/internal/apikeys"
	"github.com/sluice-dev/sluice/internal/scheduler"
	"github.com/sluice-dev/sluice/internal/source/sourcetest"
	"github.com/sluice-dev/sluice/internal/tiers/tierstest"
)

// flakyKeepAlive answers the first request and hangs up on the second
// without answering, as a member whose keep-alive connection dies does.
func flakyKeepAlive(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var attempts atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if attempts.Add(1) == 2 {
			resetConnection(w)
			return
		}
		_, _ = io.WriteString(w, "{}")
	}))
	t.Cleanup(srv.Close)
	return srv, &attempts
}

// TestNoRetryWithIdempotencyKey proves a request carrying Idempotency-Key
// (or X-Idempotency-Key) is sent once even when its reused connection dies,
// a case in which net/http's Transport resends replayable requests.
func TestNoRetryWithIdempotencyKey(t *testing.T) {
	for _, header := range []string{"Idempotency-Key", "X-Idempotency-Key"} {
		t.Run("control: net/http retries/"+header, func(t *testing.T) {
			// The same exchange through a plain client with a rewindable body
			// is retried: the fixture does reach the retry path.
			srv, attempts := flakyKeepAlive(t)
			client := &http.Client{Transport: &http.Transport{}}
			defer client.CloseIdleConnections()
			for i := range 2 {
				req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL, strings.NewReader(chat("llama")))
				req.Header.Set(header, "abc")
				resp, err := client.Do(req)
				if err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
			if attempts.Load() != 3 {
				t.Fatalf("attempts = %d, want 3 (the second request retried once)", attempts.Load())
			}
		})
		t.Run("router sends once/"+header, func(t *testing.T) {
			srv, attempts := flakyKeepAlive(t)
			f := newFixture(t, fixtureOptions{})
			f.apply(sourcetest.Tier("ns/llama", []string{"llama"}, "", []sourcetest.Member{{ID: "gpu0", Endpoint: srv.URL, Max: 4}}))
			idem := http.Header{header: {"abc"}}
			if resp, _ := f.mustPost(pathChatCompletions, chat("llama"), idem); resp.StatusCode != http.StatusOK {
				t.Fatalf("first request: %d", resp.StatusCode)
			}
			// The first exchange read its body to EOF, which returns the
			// connection to the idle pool before the outcome is recorded:
			// the second request reuses it.
			f.outcome()
			resp, body := f.mustPost(pathChatCompletions, chat("llama"), idem)
			if resp.StatusCode != http.StatusBadGateway || apierrortest.Code(t, body) != "upstream_unavailable" {
				t.Fatalf("second request: %d %s, want 502 upstream_unavailable", resp.StatusCode, body)
			}
			if o := f.outcome(); o.End != EndUnavailable {
				t.Fatalf("outcome = %+v", o)
			}
			if attempts.Load() != 2 {
				t.Fatalf("attempts = %d, want 2: the second request must not be resent", attempts.Load())
			}
			f.assertIdle("ns/llama")
		})
	}
}

// TestForwardedRequest proves what reaches the member: the body with only
// its model replaced by the served model, the route's path, the router's request id, and the router's API key
// stripped.
func TestForwardedRequest(t *testing.T) {
	keys, _ := apikeys.Parse([]byte("router-key\n"))
	tests := []struct {
		desc       string
		keys       *apikeys.Keys
		requestID  string
		wantSameID bool
		wantAuth   string
	}{
		{desc: "open router keeps the caller's credential", requestID: "caller-id_1:2.3", wantSameID: true, wantAuth: "Bearer router-key"},
		{desc: "authenticating router strips its key", keys: keys, requestID: "bad id with spaces", wantAuth: ""},
		{desc: "overlong id is replaced", requestID: strings.Repeat("a", maxRequestIDLength+1), wantAuth: "Bearer router-key"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			f := newFixture(t, fixtureOptions{keys: tt.keys})
			up := newUpstream(t, "gpu0", nil)
			up.handle(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set(headerRequestID, "engine-id")
				w.Header().Set(headerMember, "spoofed")
				_, _ = io.WriteString(w, "{}")
			})
			f.apply(sourcetest.Tier("ns/llama", []string{"llama"}, "", []sourcetest.Member{{ID: "gpu0", Endpoint: up.srv.URL}}))
			body := `{"messages":[{"role":"user","content":"x"}],  "model" : "llama", "stream":false}`
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost,
				f.front.URL+pathCompletions+"?api-version=1", io.MultiReader(strings.NewReader(body)))
			req.Header.Set("Authorization", "Bearer router-key")
			req.Header.Set(headerRequestID, tt.requestID)
			resp, err := f.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			o := f.outcome()

			seen := up.seen[0]
			if want := strings.Replace(body, `"llama"`, `"served/model"`, 1); string(seen.body) != want || seen.path != pathCompletions {
				t.Errorf("member got %s %q, want %q: the body with only the model replaced", seen.path, seen.body, want)
			}
			if got := seen.header.Get("Authorization"); got != tt.wantAuth {
				t.Errorf("member got Authorization %q, want %q", got, tt.wantAuth)
			}
			id := resp.Header.Values(headerRequestID)
			if len(id) != 1 || (id[0] == tt.requestID) != tt.wantSameID || !safeRequestID(id[0]) || id[0] != o.RequestID {
				t.Errorf("X-Request-Id = %q (caller sent %q, outcome %q)", id, tt.requestID, o.RequestID)
			}
			if got := seen.header.Get(headerRequestID); got != id[0] {
				t.Errorf("member got X-Request-Id %q, want %q", got, id[0])
			}
			if got := resp.Header.Values(headerMember); len(got) != 1 || got[0] != "gpu0" {
				t.Errorf("X-Sluice-Member = %q, want the router's value only", got)
			}
			if o.Selection != nil {
				t.Errorf("a direct tier recorded a selection: %+v", o.Selection)
			}
		})
	}
}

// TestSnapshotsFollowMembership proves admission inputs cover exactly the
// tier's configured members, whatever the caches hold.
func TestSnapshotsFollowMembership(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	gpu0, gpu1 := newUpstream(t, "gpu0", nil), newUpstream(t, "gpu1", nil)
	f.apply(sourcetest.Tier("ns/llama", []string{"llama"}, v1alpha1.StrategyCapacity,
		[]sourcetest.Member{{ID: "gpu0", Endpoint: gpu0.srv.URL, Max: 2}, {ID: "gpu1", Endpoint: gpu1.srv.URL, Max: 2}}))
	// The caches still know a removed member and do not know gpu1 yet.
	f.ready.Set("ns/llama", map[string]bool{"gpu0": false, "old": true})
	f.pressure.Set("ns/llama", map[string]scheduler.Pressure{"old": tierstest.Fresh(0), "gpu0": tierstest.Fresh(0)})
	resp, _ := f.mustPost(pathChatCompletions, chat("llama"), nil)
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("status %d: gpu0 is not ready and gpu1 is unknown to readiness, want 503", resp.StatusCode)
	}
	f.outcome()
	f.ready.Set("ns/llama", map[string]bool{"gpu1": true, "old": true})
	resp, _ = f.mustPost(pathChatCompletions, chat("llama"), nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get(headerMember) != "gpu1" {
		t.Fatalf("status %d member %q, want gpu1", resp.StatusCode, resp.Header.Get(headerMember))
	}
	if o := f.outcome(); o.Selection == nil || len(o.Selection.EligibleIDs) != 1 {
		t.Fatalf("selection %+v, want only gpu1 eligible", o.Selection)
	}
	if f.pressure.Snapshots.Load() == 0 {
		t.Fatal("the request path never read the pressure snapshot")
	}
}

func TestRequestIDs(t *testing.T) {
	g := newIDGenerator()
	a, b := g.next(), g.next()
	if a == b || !safeRequestID(a) || !safeRequestID(b) {
		t.Fatalf("ids %q, %q", a, b)
	}
	for id, want := range map[string]bool{
		"abc": true, "A-b_c.d:e": true, strings.Repeat("x", 64): true,
		"": false, strings.Repeat("x", 65): false, "a b": false, "a/b": false, "é": false, "a\n": false,
	} {
		if safeRequestID(id) != want {
			t.Errorf("safeRequestID(%q) = %v", id, !want)
		}
	}
}
