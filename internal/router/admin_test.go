package router

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/sluice-dev/sluice/internal/adminserver"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/adminapi"
	"github.com/sluice-dev/sluice/internal/apierror/apierrortest"
	"github.com/sluice-dev/sluice/internal/apikeys"
	"github.com/sluice-dev/sluice/internal/scheduler"
	"github.com/sluice-dev/sluice/internal/source"
	"github.com/sluice-dev/sluice/internal/source/sourcetest"
	"github.com/sluice-dev/sluice/internal/tiers/tierstest"
)

func TestAdminAuthentication(t *testing.T) {
	token, _ := apikeys.Parse([]byte("admin-token\n"))
	f := newFixture(t, fixtureOptions{adminToken: token})
	f.apply(sourcetest.Tier("ns/llama", []string{"llama"}, "", []sourcetest.Member{{ID: "gpu0", Endpoint: "http://127.0.0.1:8001"}}))
	good := http.Header{"Authorization": {"Bearer admin-token"}}
	for _, path := range []string{"/admin/v1/capacity", "/admin/v1/tiers", "/admin/v1/tiers/ns/x"} {
		status, body := f.adminGet(path, nil)
		if status != http.StatusUnauthorized || apierrortest.Code(t, body) != "invalid_admin_token" {
			t.Errorf("GET %s without a token = %d %s", path, status, body)
		}
		if status, _ := f.adminGet(path, http.Header{"Authorization": {"Bearer wrong"}}); status != http.StatusUnauthorized {
			t.Errorf("GET %s with a wrong token = %d", path, status)
		}
	}
	if status, _ := f.adminDo(http.MethodPost, "/admin/v1/tiers/ns/x/drain", nil); status != http.StatusUnauthorized {
		t.Errorf("drain without a token = %d", status)
	}
	if status, _ := f.adminGet("/admin/v1/capacity", good); status != http.StatusOK {
		t.Errorf("capacity with the token = %d", status)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if status, _ := f.adminGet(path, nil); status != http.StatusOK {
			t.Errorf("GET %s is not open: %d", path, status)
		}
	}

	// The seam for other packages' routes.
	a := adminserver.New(f.rt.Tiers(), adminserver.Options{Token: token})
	a.Handle("GET /admin/v1/extra", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "extra") }))
	a.HandlePublic("GET /metrics", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "metrics") }))
	for _, tt := range []struct {
		path   string
		header http.Header
		want   int
	}{
		{"/admin/v1/extra", nil, http.StatusUnauthorized},
		{"/admin/v1/extra", good, http.StatusOK},
		{"/metrics", nil, http.StatusOK},
	} {
		w := newRecorder()
		r := mustRequest(t, http.MethodGet, tt.path)
		for k, v := range tt.header {
			r.Header[k] = v
		}
		a.ServeHTTP(w, r)
		if w.status != tt.want {
			t.Errorf("GET %s = %d, want %d", tt.path, w.status, tt.want)
		}
	}
}

func TestAdminCapacity(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	release := make(chan struct{})
	goOn := sync.OnceFunc(func() { close(release) })
	defer goOn() // a failed check lets the held request end too.
	gpu0, gpu1 := newUpstream(t, "gpu0", nil), newUpstream(t, "gpu1", nil)
	gpu0.handle(holdOrAnswer(release))
	f.apply(
		sourcetest.Tier("ns/llama", []string{"llama"}, v1alpha1.StrategyCapacity,
			[]sourcetest.Member{{ID: "gpu0", Endpoint: gpu0.srv.URL, Max: 2}, {ID: "gpu1", Endpoint: gpu1.srv.URL, Max: 3}}, tierMax(4),
			func(s *v1alpha1.ReplicaTierSpec) {
				s.Quiesce = &v1alpha1.QuiesceSpec{Members: map[string]v1alpha1.QuiesceReason{"gpu1": "upgrade"}}
			}),
		sourcetest.Tier("ns/embed", []string{"embed"}, "", []sourcetest.Member{{ID: "cpu0", Endpoint: closedAddress(t)}}),
	)
	f.pressure.Set("ns/llama", map[string]scheduler.Pressure{"gpu0": tierstest.Fresh(250_000)})
	f.ready.Set("ns/llama", map[string]bool{"gpu0": true, "gpu1": false})

	resp, err := f.post(context.Background(), pathChatCompletions, chat("llama"), http.Header{"X-Hold": {"1"}})
	if err != nil {
		t.Fatal(err)
	}
	snapshots := f.pressure.Snapshots.Load()
	status, body := f.adminGet("/admin/v1/capacity", nil)
	if status != http.StatusOK {
		t.Fatalf("capacity = %d", status)
	}
	want := `{
  "tiers": [
    {
      "tier": "ns/embed",
      "strategy": "Direct",
      "served_model": "served/model",
      "active": 0,
      "max_concurrency": null,
      "state": "admitting",
      "draining": false,
      "removed": false,
      "queue": {
        "waiting": 0,
        "oldest_wait_ms": 0
      },
      "members": [
        {
          "id": "cpu0",
          "active": 0,
          "max_concurrency": null,
          "state": "admitting",
          "phase": "Admitting",
          "draining": false,
          "ready": true
        }
      ]
    },
    {
      "tier": "ns/llama",
      "strategy": "Capacity",
      "served_model": "served/model",
      "active": 1,
      "max_concurrency": 4,
      "state": "admitting",
      "draining": false,
      "removed": false,
      "queue": {
        "waiting": 0,
        "oldest_wait_ms": 0
      },
      "members": [
        {
          "id": "gpu0",
          "active": 1,
          "max_concurrency": 2,
          "state": "admitting",
          "phase": "Admitting",
          "draining": false,
          "ready": true,
          "pressure": {
            "freshness": "fresh",
            "pressure_ppm": 250000,
            "requests_state": "valid",
            "kv_state": "missing"
          }
        },
        {
          "id": "gpu1",
          "active": 0,
          "max_concurrency": 3,
          "state": "quiesced",
          "phase": "Drained",
          "draining": false,
          "ready": false,
          "pressure": {
            "freshness": "unknown",
            "pressure_ppm": null,
            "requests_state": "missing",
            "kv_state": "missing"
          }
        }
      ]
    }
  ]
}
`
	if string(body) != want {
		t.Fatalf("capacity =\n%s\nwant\n%s", body, want)
	}
	if f.pressure.Snapshots.Load() != snapshots || f.pressure.Peeks.Load() == 0 {
		t.Fatalf("the capacity view scheduled pressure refreshes (Snapshot calls %d → %d, Peek calls %d); it must only Peek",
			snapshots, f.pressure.Snapshots.Load(), f.pressure.Peeks.Load())
	}
	goOn()
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	f.outcome()
}

func TestAdminTiers(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	up := newUpstream(t, "gpu0", nil)
	served := sourcetest.Tier("ns/llama", []string{"llama", "chat"}, v1alpha1.StrategyCapacity,
		[]sourcetest.Member{{ID: "gpu0", Endpoint: up.srv.URL, Max: 2}, {ID: "gpu1", Endpoint: up.srv.URL, Max: 2}}, func(s *v1alpha1.ReplicaTierSpec) {
			s.Members[0].Metrics = &v1alpha1.MetricsSpec{Engine: v1alpha1.EngineVLLM, Path: "/metrics"}
			s.Quiesce = &v1alpha1.QuiesceSpec{Tier: "maintenance"}
		})
	loser := sourcetest.Tier("ns/zeta", []string{"chat"}, "", []sourcetest.Member{{ID: "gpu0", Endpoint: up.srv.URL, Max: 1}})
	f.rt.Tiers().Apply(source.Snapshot{
		Tiers:    []source.Tier{served},
		Rejected: []source.Rejection{{Tier: loser, Reason: source.ReasonAliasConflict, Message: `alias "chat" is held by ns/llama`}},
		Errors:   []source.FileError{{File: "llama.yaml", Message: "document 0: spec.members[0].id: Invalid value"}},
	})
	status, body := f.adminGet("/admin/v1/tiers", nil)
	if status != http.StatusOK {
		t.Fatalf("tiers = %d", status)
	}
	var view adminapi.TiersView
	if err := json.Unmarshal(body, &view); err != nil {
		t.Fatal(err)
	}
	if !view.Loaded || len(view.Tiers) != 2 || len(view.SourceErrors) != 1 {
		t.Fatalf("view = %s", body)
	}
	llama, zeta := view.Tiers[0], view.Tiers[1]
	if llama.Tier != "ns/llama" || !llama.Served || llama.Strategy != "Capacity" || llama.Quiesce.Tier != "maintenance" ||
		llama.SourceError == "" || llama.Members[0].MetricsEngine != "vllm" || llama.IdleTimeout != "1m0s" {
		t.Errorf("llama = %+v", llama)
	}
	if zeta.Served || zeta.Rejection == nil || zeta.Rejection.Reason != "AliasConflict" {
		t.Errorf("zeta = %+v", zeta)
	}
	host := strings.TrimPrefix(up.srv.URL, "http://")
	if strings.Contains(string(body), host) {
		t.Errorf("the tiers view shows an endpoint: %s", body)
	}
	status, body = f.adminGet("/admin/v1/tiers/ns/zeta", nil)
	if status != http.StatusOK || !strings.Contains(string(body), `"reason": "AliasConflict"`) {
		t.Errorf("tier ns/zeta = %d %s", status, body)
	}
	if status, body := f.adminGet("/admin/v1/tiers/ns/nope", nil); status != http.StatusNotFound || apierrortest.Code(t, body) != "tier_not_found" {
		t.Errorf("unknown tier = %d %s", status, body)
	}
	// The rejected tier's alias is not served by it: "chat" goes to llama,
	// which is quiesced.
	resp, body := f.mustPost(pathChatCompletions, chat("chat"), nil)
	if resp.Header.Get(headerTier) != "ns/llama" || apierrortest.Code(t, body) != "tier_quiesced" {
		t.Errorf("chat went to %q: %s", resp.Header.Get(headerTier), body)
	}
}

// TestAdminDrainDirectTier proves a direct tier has no member scope: a
// drain naming its member is refused with 409 direct_tier, quiesced or
// not, while the tier's own drain works.
func TestAdminDrainDirectTier(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	solo := newUpstream(t, "solo", nil)
	f.apply(sourcetest.Tier("ns/direct", []string{"direct"}, "", []sourcetest.Member{{ID: "solo", Endpoint: solo.srv.URL, Max: 2}}))
	drain := func(query string) (int, []byte) {
		return f.adminDo(http.MethodPost, "/admin/v1/tiers/ns/direct/drain"+query, nil)
	}
	if status, body := drain("?member=solo"); status != http.StatusConflict || apierrortest.Code(t, body) != "direct_tier" {
		t.Fatalf("member drain of a direct tier = %d %s, want 409 direct_tier", status, body)
	}
	f.apply(sourcetest.Tier("ns/direct", []string{"direct"}, "", []sourcetest.Member{{ID: "solo", Endpoint: solo.srv.URL, Max: 2}}, func(s *v1alpha1.ReplicaTierSpec) {
		s.Quiesce = &v1alpha1.QuiesceSpec{Tier: "upgrade"}
	}))
	if status, body := drain("?member=solo"); status != http.StatusConflict || apierrortest.Code(t, body) != "direct_tier" {
		t.Fatalf("member drain of a quiesced direct tier = %d %s, want 409 direct_tier", status, body)
	}
	if status, body := drain(""); status != http.StatusOK || !strings.Contains(string(body), `"drained": true`) {
		t.Fatalf("tier drain of a quiesced direct tier = %d %s, want 200 drained", status, body)
	}
}

func TestAdminDrain(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	release := make(chan struct{})
	gpu0, gpu1 := newUpstream(t, "gpu0", nil), newUpstream(t, "gpu1", nil)
	gpu0.handle(holdOrAnswer(release))
	tier := func(quiesce map[string]v1alpha1.QuiesceReason) source.Tier {
		return sourcetest.Tier("ns/llama", []string{"llama"}, v1alpha1.StrategyRoundRobin,
			[]sourcetest.Member{{ID: "gpu0", Endpoint: gpu0.srv.URL, Max: 2}, {ID: "gpu1", Endpoint: gpu1.srv.URL, Max: 2}}, func(s *v1alpha1.ReplicaTierSpec) {
				if quiesce != nil {
					s.Quiesce = &v1alpha1.QuiesceSpec{Members: quiesce}
				}
			})
	}
	f.apply(tier(nil))
	resp, err := f.post(context.Background(), pathChatCompletions, chat("llama"), http.Header{"X-Hold": {"1"}})
	if err != nil || resp.Header.Get(headerMember) != "gpu0" {
		t.Fatalf("held request: %v %v", err, resp.Header)
	}

	drain := func(query string) (int, []byte) {
		return f.adminDo(http.MethodPost, "/admin/v1/tiers/ns/llama/drain"+query, nil)
	}
	for _, tt := range []struct {
		query, code string
		status      int
	}{
		{"?member=gpu0", "not_quiesced", http.StatusConflict},
		{"", "not_quiesced", http.StatusConflict},
		{"?member=gpu9", "member_not_found", http.StatusNotFound},
		{"?timeout=forever", "invalid_timeout", http.StatusBadRequest},
		{"?timeout=11m", "invalid_timeout", http.StatusBadRequest},
		{"?timeout=-1s", "invalid_timeout", http.StatusBadRequest},
	} {
		if status, body := drain(tt.query); status != tt.status || apierrortest.Code(t, body) != tt.code {
			t.Errorf("drain%s = %d %s, want %d %s", tt.query, status, body, tt.status, tt.code)
		}
	}
	if status, body := f.adminDo(http.MethodPost, "/admin/v1/tiers/ns/nope/drain", nil); status != http.StatusNotFound || apierrortest.Code(t, body) != "tier_not_found" {
		t.Errorf("drain of an unknown tier = %d %s", status, body)
	}

	// Quiesce gpu0 through the configuration: gpu1 is drained already, gpu0
	// waits for its lease.
	f.apply(tier(map[string]v1alpha1.QuiesceReason{"gpu0": "upgrade", "gpu1": "upgrade"}))
	if status, body := drain("?member=gpu1"); status != http.StatusOK || !strings.Contains(string(body), `"drained": true`) {
		t.Errorf("drain gpu1 = %d %s", status, body)
	}
	if status, body := drain("?member=gpu0&timeout=50ms"); status != http.StatusGatewayTimeout || apierrortest.Code(t, body) != "drain_timeout" {
		t.Errorf("drain gpu0 with a lease held = %d %s, want 504", status, body)
	}
	done := make(chan int, 1)
	go func() {
		status, _ := drain("?member=gpu0&timeout=1m")
		done <- status
	}()
	close(release)
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if status := <-done; status != http.StatusOK {
		t.Errorf("drain gpu0 after the release = %d, want 200", status)
	}
	f.outcome()
	f.assertIdle("ns/llama")
}

// recorder is a minimal http.ResponseWriter for calling handlers directly.
type recorder struct {
	header http.Header
	status int
	body   strings.Builder
}

func newRecorder() *recorder { return &recorder{header: http.Header{}, status: http.StatusOK} }

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) WriteHeader(status int)      { r.status = status }
func (r *recorder) Write(p []byte) (int, error) { return r.body.Write(p) }

func mustRequest(t *testing.T, method, path string) *http.Request {
	t.Helper()
	r, err := http.NewRequestWithContext(context.Background(), method, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
