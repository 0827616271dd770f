package adminserver

import (
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sluice-dev/sluice/internal/apierror/apierrortest"
	"github.com/sluice-dev/sluice/internal/evidence"
	"github.com/sluice-dev/sluice/internal/source/sourcetest"
	"github.com/sluice-dev/sluice/internal/tiers"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/apikeys"
	"github.com/sluice-dev/sluice/internal/scheduler"
	"github.com/sluice-dev/sluice/internal/source"
	"github.com/sluice-dev/sluice/internal/tiers/tierstest"
)

// countingReadiness is a tierstest.Readiness that counts its reads.
type countingReadiness struct {
	*tierstest.Readiness
	reads atomic.Int64
}

func (c *countingReadiness) Ready(tier string) (map[string]bool, error) {
	c.reads.Add(1)
	return c.Readiness.Ready(tier)
}

// countingHandler counts the requests that reached h.
type countingHandler struct {
	h     http.Handler
	calls atomic.Int64
}

func (c *countingHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.calls.Add(1)
	c.h.ServeHTTP(w, r)
}

// TestAdminAuthenticatesBeforeReading sends every authenticated admin
// route a request without a token, with a wrong token and with a token of
// the wrong scheme: each is answered 401 invalid_admin_token with
// WWW-Authenticate before anything is read — no readiness or pressure read
// (the capacity view's sources) and no call of a route's handler (the
// decision log's routes, added through Admin.Handle as cmd/router adds
// them). The same request with the right token reads its sources.
func TestAdminAuthenticatesBeforeReading(t *testing.T) {
	ready := &countingReadiness{Readiness: &tierstest.Readiness{}}
	pressure := &tierstest.Pressure{}
	set := tiers.New(tiers.Options{
		Readiness: ready,
		Rechecker: ready.Readiness,
		Pressure:  pressure,
		Logger:    slog.New(slog.DiscardHandler),
	})
	quiesced := func(s *v1alpha1.ReplicaTierSpec) { s.Quiesce = &v1alpha1.QuiesceSpec{Tier: "upgrade"} }
	snap := source.Snapshot{Tiers: []source.Tier{
		sourcetest.Tier("ns/llama", []string{"llama"}, v1alpha1.StrategyCapacity,
			[]sourcetest.Member{{ID: "gpu0", Endpoint: "http://127.0.0.1:1", Max: 2}, {ID: "gpu1", Endpoint: "http://127.0.0.1:2", Max: 2}}, quiesced),
	}}
	ready.Reconfigure(tiers.ReadinessTiers(snap))
	set.Apply(snap)
	pressure.Set("ns/llama", map[string]scheduler.Pressure{"gpu0": tierstest.Fresh(1000), "gpu1": tierstest.Fresh(2000)})

	token, err := apikeys.Parse([]byte("admin-token\n"))
	if err != nil {
		t.Fatal(err)
	}
	a := New(set, Options{Token: token})
	log, err := evidence.NewLog(evidence.LogOptions{Size: evidence.DefaultLogSize})
	if err != nil {
		t.Fatal(err)
	}
	handlers := map[string]*countingHandler{}
	log.RegisterRoutes(func(pattern string, h http.Handler) {
		c := &countingHandler{h: h}
		handlers[pattern] = c
		a.Handle(pattern, c)
	})
	if len(handlers) != 3 {
		t.Fatalf("the decision log registered %d routes, want 3", len(handlers))
	}
	handlerCalls := func() int64 {
		var n int64
		for _, c := range handlers {
			n += c.calls.Load()
		}
		return n
	}
	// reads counts every read of a source the admin routes can reach.
	reads := func() int64 {
		return ready.reads.Load() + pressure.Peeks.Load() + pressure.Snapshots.Load() + handlerCalls()
	}

	for _, tt := range []struct {
		method, path string
		// sourced: the accepted request must read a source (the capacity
		// view and the decision log's routes); the tier views read only
		// the router's applied table and the drain only its admission.
		sourced bool
		ok      int
	}{
		{http.MethodGet, "/admin/v1/capacity", true, http.StatusOK},
		{http.MethodGet, "/admin/v1/decisions?limit=5", true, http.StatusOK},
		{http.MethodGet, "/admin/v1/decisions/summary", true, http.StatusOK},
		{http.MethodGet, "/admin/v1/decisions/req-1", true, http.StatusNotFound},
		{http.MethodGet, "/admin/v1/tiers", false, http.StatusOK},
		{http.MethodGet, "/admin/v1/tiers/ns/llama", false, http.StatusOK},
		{http.MethodPost, "/admin/v1/tiers/ns/llama/drain?timeout=1s", false, http.StatusOK},
	} {
		for _, bad := range []struct {
			name   string
			header http.Header
		}{
			{"missing token", nil},
			{"wrong token", http.Header{"Authorization": {"Bearer wrong-token"}}},
			{"wrong scheme", http.Header{"Authorization": {"Basic admin-token"}}},
			{"empty bearer", http.Header{"Authorization": {"Bearer "}}},
		} {
			before := reads()
			w := serveAdmin(t, a, tt.method, tt.path, bad.header)
			if w.status != http.StatusUnauthorized || apierrortest.Code(t, []byte(w.body.String())) != "invalid_admin_token" || w.header.Get("WWW-Authenticate") != "Bearer" {
				t.Errorf("%s %s with %s = %d %s (WWW-Authenticate %q), want 401 invalid_admin_token",
					tt.method, tt.path, bad.name, w.status, w.body.String(), w.header.Get("WWW-Authenticate"))
			}
			if got := reads() - before; got != 0 {
				t.Errorf("%s %s with %s read %d times before it was refused", tt.method, tt.path, bad.name, got)
			}
		}
		before := reads()
		w := serveAdmin(t, a, tt.method, tt.path, http.Header{"Authorization": {"Bearer admin-token"}})
		if w.status != tt.ok {
			t.Errorf("%s %s with the token = %d %s, want %d", tt.method, tt.path, w.status, w.body.String(), tt.ok)
		}
		if got := reads() - before; tt.sourced && got == 0 {
			t.Errorf("%s %s with the token read nothing: the counters do not observe its reads", tt.method, tt.path)
		}
	}
}

// serveAdmin serves one admin request and returns the recorded response.
func serveAdmin(t *testing.T, a *Admin, method, path string, header http.Header) *recorder {
	t.Helper()
	r := mustRequest(t, method, path)
	for k, v := range header {
		r.Header[k] = v
	}
	w := newRecorder()
	a.ServeHTTP(w, r)
	return w
}

// TestAdminHealthAndReadiness proves /readyz fails before a first
// snapshot, while the snapshot in force serves no tier (unless
// ReadyWithoutTiers), and after NotReady; it succeeds while a tier is
// served (docs/ROUTER.md#6-admin-api).
func TestAdminHealthAndReadiness(t *testing.T) {
	llama := sourcetest.Tier("ns/llama", []string{"llama"}, "", []sourcetest.Member{{ID: "gpu0", Endpoint: "http://127.0.0.1:8001"}})
	refused := sourcetest.Tier("ns/far", []string{"far"}, "", []sourcetest.Member{{ID: "gpu0", Endpoint: "ftp://nowhere"}})
	for _, tt := range []struct {
		desc              string
		readyWithoutTiers bool
		apply             [][]source.Tier // the snapshots applied before the check; nil: none.
		want              int
		wantBody          string
	}{
		{desc: "before any configuration", want: http.StatusServiceUnavailable, wantBody: "no configuration loaded yet"},
		{desc: "before any configuration, ready without tiers", readyWithoutTiers: true, want: http.StatusServiceUnavailable},
		{desc: "an empty configuration", apply: [][]source.Tier{{}}, want: http.StatusServiceUnavailable, wantBody: "no tier served"},
		{desc: "only a refused tier", apply: [][]source.Tier{{refused}}, want: http.StatusServiceUnavailable, wantBody: "no tier served"},
		{desc: "an empty configuration, ready without tiers", readyWithoutTiers: true, apply: [][]source.Tier{{}}, want: http.StatusOK},
		{desc: "a served tier", apply: [][]source.Tier{{llama}}, want: http.StatusOK, wantBody: "ok"},
		{desc: "the last tier removed", apply: [][]source.Tier{{llama}, {}}, want: http.StatusServiceUnavailable, wantBody: "no tier served"},
	} {
		t.Run(tt.desc, func(t *testing.T) {
			set := tiers.New(tiers.Options{})
			a := New(set, Options{ReadyWithoutTiers: tt.readyWithoutTiers})
			for _, list := range tt.apply {
				set.Apply(source.Snapshot{Tiers: list})
			}
			w := newRecorder()
			a.ServeHTTP(w, mustRequest(t, http.MethodGet, "/healthz"))
			if w.status != http.StatusOK {
				t.Fatalf("healthz = %d", w.status)
			}
			w = newRecorder()
			a.ServeHTTP(w, mustRequest(t, http.MethodGet, "/readyz"))
			if w.status != tt.want || !strings.Contains(w.body.String(), tt.wantBody) {
				t.Fatalf("readyz = %d %q, want %d %q", w.status, w.body.String(), tt.want, tt.wantBody)
			}
			a.NotReady()
			w = newRecorder()
			a.ServeHTTP(w, mustRequest(t, http.MethodGet, "/readyz"))
			if w.status != http.StatusServiceUnavailable {
				t.Fatalf("readyz after NotReady = %d, want 503", w.status)
			}
		})
	}
}

// TestTierReadiness proves /readyz/{namespace}/{name} succeeds while the
// tier serves, saturated or not, and fails with the reason while the
// router is not ready, the tier is not served or quiesced, or none of its
// members is eligible (docs/ROUTER.md#6-admin-api).
func TestTierReadiness(t *testing.T) {
	members := []sourcetest.Member{{ID: "gpu0", Endpoint: "http://127.0.0.1:1", Max: 1}, {ID: "gpu1", Endpoint: "http://127.0.0.1:2", Max: 1}}
	llama := sourcetest.Tier("ns/llama", []string{"llama"}, v1alpha1.StrategyRoundRobin, members)
	quiesced := sourcetest.Tier("ns/llama", []string{"llama"}, v1alpha1.StrategyRoundRobin, members,
		func(s *v1alpha1.ReplicaTierSpec) { s.Quiesce = &v1alpha1.QuiesceSpec{Tier: "upgrade"} })
	memberQuiesced := sourcetest.Tier("ns/llama", []string{"llama"}, v1alpha1.StrategyRoundRobin, members,
		func(s *v1alpha1.ReplicaTierSpec) {
			s.Quiesce = &v1alpha1.QuiesceSpec{Members: map[string]v1alpha1.QuiesceReason{"gpu0": "upgrade"}}
		})
	other := sourcetest.Tier("ns/other", []string{"other"}, v1alpha1.StrategyRoundRobin, members)
	for _, tt := range []struct {
		desc     string
		apply    []source.Tier // nil: nothing applied.
		notReady []string      // members not ready.
		full     bool          // both members hold a lease.
		stopping bool
		path     string
		want     int
		wantBody string
	}{
		{desc: "before any configuration", path: "/readyz/ns/llama", want: http.StatusServiceUnavailable, wantBody: "no configuration loaded yet"},
		{desc: "serving", apply: []source.Tier{llama}, path: "/readyz/ns/llama", want: http.StatusOK, wantBody: "ok"},
		{desc: "saturated", apply: []source.Tier{llama}, full: true, path: "/readyz/ns/llama", want: http.StatusOK, wantBody: "ok"},
		{desc: "one member quiesced", apply: []source.Tier{memberQuiesced}, path: "/readyz/ns/llama", want: http.StatusOK},
		{desc: "another tier", apply: []source.Tier{other}, path: "/readyz/ns/llama", want: http.StatusServiceUnavailable, wantBody: "tier not served"},
		{desc: "quiesced", apply: []source.Tier{quiesced}, path: "/readyz/ns/llama", want: http.StatusServiceUnavailable, wantBody: "tier quiesced"},
		{desc: "no ready member", apply: []source.Tier{llama}, notReady: []string{"gpu0", "gpu1"}, path: "/readyz/ns/llama",
			want: http.StatusServiceUnavailable, wantBody: "no eligible member"},
		{desc: "one ready member", apply: []source.Tier{llama}, notReady: []string{"gpu0"}, path: "/readyz/ns/llama", want: http.StatusOK},
		{desc: "shutting down", apply: []source.Tier{llama}, stopping: true, path: "/readyz/ns/llama",
			want: http.StatusServiceUnavailable, wantBody: "shutting down"},
	} {
		t.Run(tt.desc, func(t *testing.T) {
			ready := &tierstest.Readiness{}
			set := tiers.New(tiers.Options{Readiness: ready, Logger: slog.New(slog.DiscardHandler)})
			a := New(set, Options{})
			if tt.apply != nil {
				snap := source.Snapshot{Tiers: tt.apply}
				ready.Reconfigure(tiers.ReadinessTiers(snap))
				set.Apply(snap)
				for _, tier := range tt.apply {
					status := map[string]bool{"gpu0": true, "gpu1": true}
					for _, id := range tt.notReady {
						status[id] = false
					}
					ready.Set(tier.Key, status)
				}
			}
			if tt.full {
				tab := set.Table()
				ts, _ := tab.Lookup("ns/llama")
				for range 2 {
					if _, err := ts.Admission().Acquire(set.Inputs(ts, ts.Config())); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := ts.Admission().Acquire(set.Inputs(ts, ts.Config())); err == nil {
					t.Fatal("a third lease was admitted: the tier is not saturated")
				}
			}
			if tt.stopping {
				a.NotReady()
			}
			w := newRecorder()
			a.ServeHTTP(w, mustRequest(t, http.MethodGet, tt.path))
			if w.status != tt.want || !strings.Contains(w.body.String(), tt.wantBody) {
				t.Fatalf("%s = %d %q, want %d %q", tt.path, w.status, w.body.String(), tt.want, tt.wantBody)
			}
		})
	}
}
