package adminserver

// The admin listener's handler: routes, authentication, health and
// readiness. The views it serves are in capacity.go, tiers.go and
// drain.go.

import (
	"encoding/json"
	"net/http"
	"sync/atomic"

	"github.com/sluice-dev/sluice/internal/apikeys"
	"github.com/sluice-dev/sluice/internal/tiers"
)

// Options configures an Admin handler.
type Options struct {
	// Token holds the bearer tokens of the /admin/v1/ routes. Nil means the
	// routes are open (health, readiness and metrics are always open).
	Token *apikeys.Keys
	// ReadyWithoutTiers makes /readyz succeed once a snapshot was applied
	// even when it serves no tier, for a router started before its tiers
	// exist (a DaemonSet's on a node without tiers yet). False, the zero
	// value, means /readyz fails while no tier is served.
	ReadyWithoutTiers bool
}

// Admin is the admin listener's handler: GET /healthz, /readyz and
// /readyz/{namespace}/{name} (open), and under bearer authentication GET /admin/v1/capacity,
// /admin/v1/tiers, /admin/v1/tiers/{namespace}/{name} and
// POST /admin/v1/tiers/{namespace}/{name}/drain. Other packages add routes
// (metrics, decisions) with Handle and HandlePublic. It only reads: intent
// changes only through the ReplicaTier.
type Admin struct {
	set          *tiers.Set
	token        *apikeys.Keys
	mux          *http.ServeMux
	stopping     atomic.Bool
	readyIfEmpty bool
}

// New returns the admin handler of the tiers a router serves.
func New(set *tiers.Set, opts Options) *Admin {
	a := &Admin{set: set, token: opts.Token, mux: http.NewServeMux(), readyIfEmpty: opts.ReadyWithoutTiers}
	a.HandlePublic("GET /healthz", http.HandlerFunc(a.healthz))
	a.HandlePublic("GET /readyz", http.HandlerFunc(a.readyz))
	a.HandlePublic("GET /readyz/{namespace}/{name}", http.HandlerFunc(a.tierReadyz))
	a.Handle("GET /admin/v1/capacity", http.HandlerFunc(a.capacity))
	a.Handle("GET /admin/v1/tiers", http.HandlerFunc(a.tiers))
	a.Handle("GET /admin/v1/tiers/{namespace}/{name}", http.HandlerFunc(a.tier))
	a.Handle("POST /admin/v1/tiers/{namespace}/{name}/drain", http.HandlerFunc(a.drain))
	return a
}

// Handle registers an authenticated route, in http.ServeMux pattern syntax.
func (a *Admin) Handle(pattern string, h http.Handler) {
	a.mux.Handle(pattern, a.authenticated(h))
}

// HandlePublic registers a route without authentication, for probes and
// metrics scrapes.
func (a *Admin) HandlePublic(pattern string, h http.Handler) {
	a.mux.Handle(pattern, h)
}

// ServeHTTP serves the registered routes.
func (a *Admin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mux.ServeHTTP(w, r)
}

// NotReady makes /readyz fail from now on, so that traffic moves away while
// the servers shut down.
func (a *Admin) NotReady() { a.stopping.Store(true) }

// authenticated wraps h with the bearer token check.
func (a *Admin) authenticated(h http.Handler) http.Handler {
	if a.token == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !a.token.Allow(r) {
			w.Header().Set("WWW-Authenticate", "Bearer")
			errAdminUnauthorized.Write(w)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func (a *Admin) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok\n"))
}

// readyz succeeds once a snapshot serving at least one tier was applied
// (or any snapshot, with Options.ReadyWithoutTiers), until NotReady.
func (a *Admin) readyz(w http.ResponseWriter, _ *http.Request) {
	tab := a.set.Table()
	reason := a.routerNotReady(tab)
	if reason == "" && len(tab.Served()) == 0 && !a.readyIfEmpty {
		reason = "no tier served"
	}
	writeReadiness(w, reason)
}

// tierReadyz succeeds while the router is ready (but for having no tier)
// and the one tier serves: it is served, admitting and has an eligible
// member (adminapi.TierCapacity.NotServing), for the readinessProbe of a
// router whose pod stands for that tier in a cluster picker's pool
// (docs/ROUTER.md#6-admin-api). A saturated tier is ready.
func (a *Admin) tierReadyz(w http.ResponseWriter, r *http.Request) {
	tab := a.set.Table()
	reason := a.routerNotReady(tab)
	if reason == "" {
		ts, served := tab.Lookup(r.PathValue("namespace") + "/" + r.PathValue("name"))
		if ts == nil || !served {
			reason = "tier not served"
		} else {
			tc := a.tierCapacity(ts, ts.Admission().Snapshot(), true)
			reason = tc.NotServing()
		}
	}
	writeReadiness(w, reason)
}

// routerNotReady says why the router is not ready whatever it serves;
// empty when it is.
func (a *Admin) routerNotReady(tab *tiers.Table) string {
	switch {
	case a.stopping.Load():
		return "shutting down"
	case !tab.Loaded():
		return "no configuration loaded yet"
	}
	return ""
}

// writeReadiness answers a readiness probe: 200 ok when reason is empty,
// else 503 with the reason.
func writeReadiness(w http.ResponseWriter, reason string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if reason != "" {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(reason + "\n")) //nolint:gosec // reason is one of a closed set of constant texts, never request input.
		return
	}
	_, _ = w.Write([]byte("ok\n"))
}

// writeJSON encodes v as the response.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
