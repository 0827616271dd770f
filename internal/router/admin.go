package router

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	"github.com/sluice-dev/sluice/internal/adminapi"
	"github.com/sluice-dev/sluice/internal/admission"
	"github.com/sluice-dev/sluice/internal/scheduler"
	"github.com/sluice-dev/sluice/internal/source"
)

// Bounds of the drain endpoint's timeout parameter.
const (
	// DefaultDrainTimeout is the drain wait when the request names none.
	DefaultDrainTimeout = 30 * time.Second
	// MaxDrainTimeout bounds one drain wait; a longer wait is a loop of
	// calls, which keeps every HTTP hop's idle timeouts meaningful.
	MaxDrainTimeout = 10 * time.Minute
)

// AdminOptions configures an Admin handler.
type AdminOptions struct {
	// Token holds the bearer tokens of the /admin/v1/ routes. Nil means the
	// routes are open (health, readiness and metrics are always open).
	Token *Keys
}

// Admin is the admin listener's handler: GET /healthz and /readyz (open),
// and under bearer authentication GET /admin/v1/capacity,
// /admin/v1/tiers, /admin/v1/tiers/{namespace}/{name} and
// POST /admin/v1/tiers/{namespace}/{name}/drain. Other packages add routes
// (metrics, decisions) with Handle and HandlePublic. It only reads: intent
// changes only through the ReplicaTier.
type Admin struct {
	rt       *Router
	token    *Keys
	mux      *http.ServeMux
	stopping atomic.Bool
}

// NewAdmin returns the admin handler of rt.
func NewAdmin(rt *Router, opts AdminOptions) *Admin {
	a := &Admin{rt: rt, token: opts.Token, mux: http.NewServeMux()}
	a.HandlePublic("GET /healthz", http.HandlerFunc(a.healthz))
	a.HandlePublic("GET /readyz", http.HandlerFunc(a.readyz))
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
			errAdminUnauthorized.write(w)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func (a *Admin) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok\n"))
}

func (a *Admin) readyz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	switch {
	case a.stopping.Load():
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("shutting down\n"))
	case !a.rt.Loaded():
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("no configuration loaded yet\n"))
	default:
		_, _ = w.Write([]byte("ok\n"))
	}
}

// writeJSON encodes v as the response.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// strategyName names an admission strategy for the admin API.
func strategyName(s admission.Strategy) string {
	if s == "" {
		return "Direct"
	}
	return string(s)
}

// ceiling returns a ceiling for JSON: nil when unbounded (zero).
func ceiling(c int) *int {
	if c == 0 {
		return nil
	}
	return &c
}

func (a *Admin) capacity(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, a.Capacity())
}

// Capacity returns the view GET /admin/v1/capacity serves. It reads
// snapshots and never waits; the router's status reporter calls it.
func (a *Admin) Capacity() adminapi.CapacityView {
	tab := a.rt.table.Load()
	view := adminapi.CapacityView{Tiers: []adminapi.TierCapacity{}}
	for _, ts := range slices.Concat(tab.served, tab.retired) {
		served := slices.Contains(tab.served, ts)
		snap := ts.admission.Snapshot()
		if !served && snap.Active == 0 {
			continue
		}
		view.Tiers = append(view.Tiers, a.tierCapacity(ts, snap, served))
	}
	slices.SortFunc(view.Tiers, func(a, b adminapi.TierCapacity) int {
		switch {
		case a.Tier < b.Tier:
			return -1
		case a.Tier > b.Tier:
			return 1
		}
		return 0
	})
	return view
}

// Applied returns Router.Applied: the generation and members in force of
// every applied tier and the configurations that could not be applied. The
// router's status reporter calls it.
func (a *Admin) Applied() []adminapi.AppliedTier { return a.rt.Applied() }

// tierCapacity projects one tier's admission snapshot, readiness and
// pressure. Pressure is read with Peek, which schedules nothing.
func (a *Admin) tierCapacity(ts *tierState, snap admission.Snapshot, served bool) adminapi.TierCapacity {
	tc := adminapi.TierCapacity{
		Tier:           ts.key,
		Strategy:       strategyName(snap.Strategy),
		Active:         snap.Active,
		MaxConcurrency: ceiling(snap.Ceiling),
		State:          "admitting",
		Draining:       snap.Draining,
		Removed:        !served,
		Members:        make([]adminapi.MemberCapacity, 0, len(snap.Members)),
	}
	if snap.Quiesced {
		tc.State = "quiesced"
	}
	var ready map[string]bool
	if a.rt.readiness != nil {
		ready, _ = a.rt.readiness.Ready(ts.key)
	}
	var pressure map[string]scheduler.Pressure
	if snap.Strategy == admission.StrategyCapacity && a.rt.pressure != nil {
		pressure, _ = a.rt.pressure.Peek(ts.key)
	}
	for _, m := range snap.Members {
		mc := adminapi.MemberCapacity{
			ID:             m.ID,
			Active:         m.Active,
			MaxConcurrency: ceiling(m.Ceiling),
			State:          "admitting",
			Phase:          string(m.Phase),
			Draining:       m.Draining,
			Ready:          a.rt.readiness == nil && served && !m.Removed || ready[m.ID],
		}
		switch {
		case m.Removed:
			mc.State = "removed"
		case m.Quiesced:
			mc.State = "quiesced"
		}
		if snap.Strategy == admission.StrategyCapacity {
			p, ok := pressure[m.ID]
			if !ok {
				p = scheduler.UnknownPressure()
			}
			pv := &adminapi.MemberPressure{Freshness: p.Freshness.String(), RequestState: p.RequestState.String(), KVState: p.KVState.String()}
			if p.Freshness == scheduler.FreshnessFresh {
				pv.PPM = &p.PPM
			}
			mc.Pressure = pv
		}
		tc.Members = append(tc.Members, mc)
	}
	return tc
}

// tierViews returns every served and rejected tier, sorted by tier.
func (a *Admin) tierViews(tab *table) []adminapi.TierView {
	fileErr := map[string]string{}
	for _, e := range tab.fileErrors {
		fileErr[e.File] = e.Message
	}
	views := []adminapi.TierView{}
	seen := map[string]bool{}
	for _, ts := range tab.served {
		v := newTierView(ts.cfg.Load().tier, true, fileErr)
		v.ApplyError = tab.applyErrors[ts.key].message
		views = append(views, v)
		seen[ts.key] = true
	}
	for _, r := range tab.rejected {
		v := newTierView(r.Tier, false, fileErr)
		v.Rejection = &adminapi.RejectionView{Reason: string(r.Reason), Message: r.Message}
		views = append(views, v)
	}
	for key, f := range tab.applyErrors {
		if !seen[key] {
			views = append(views, adminapi.TierView{Tier: key, ApplyError: f.message, Aliases: []string{}, Members: []adminapi.MemberView{}})
		}
	}
	slices.SortStableFunc(views, func(a, b adminapi.TierView) int {
		switch {
		case a.Tier < b.Tier:
			return -1
		case a.Tier > b.Tier:
			return 1
		}
		return 0
	})
	return views
}

// newTierView projects a source tier, leaving out endpoints.
func newTierView(t source.Tier, served bool, fileErr map[string]string) adminapi.TierView {
	s := &t.Spec
	v := adminapi.TierView{
		Tier:           t.Key,
		File:           t.File,
		Served:         served,
		Aliases:        slices.Clone(s.Aliases),
		ServedModel:    s.ServedModel,
		Strategy:       string(s.EffectiveStrategy()),
		MaxConcurrency: s.MaxConcurrency,
		Members:        make([]adminapi.MemberView, 0, len(s.Members)),
		SourceError:    fileErr[t.File],
	}
	if v.Strategy == "" {
		v.Strategy = "Direct"
	}
	for _, m := range s.Members {
		mv := adminapi.MemberView{ID: m.ID, MaxConcurrency: m.MaxConcurrency}
		if m.Metrics != nil {
			mv.MetricsEngine = string(m.Metrics.Engine)
		}
		v.Members = append(v.Members, mv)
	}
	if u := s.Upstream; u != nil {
		if u.ResponseHeaderTimeout != nil {
			v.ResponseHeaderTimeout = u.ResponseHeaderTimeout.Duration.String()
		}
		if u.IdleTimeout != nil {
			v.IdleTimeout = u.IdleTimeout.Duration.String()
		}
	}
	if q := s.Quiesce; q != nil {
		v.Quiesce.Tier = q.Tier
		for id, reason := range q.Members {
			if v.Quiesce.Members == nil {
				v.Quiesce.Members = map[string]string{}
			}
			v.Quiesce.Members[id] = string(reason)
		}
	}
	return v
}

func (a *Admin) tiers(w http.ResponseWriter, _ *http.Request) {
	tab := a.rt.table.Load()
	view := adminapi.TiersView{Loaded: tab.loaded, Tiers: a.tierViews(tab), SourceErrors: []adminapi.SourceErrorView{}}
	for _, e := range tab.fileErrors {
		view.SourceErrors = append(view.SourceErrors, adminapi.SourceErrorView(e))
	}
	writeJSON(w, http.StatusOK, view)
}

func (a *Admin) tier(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("namespace") + "/" + r.PathValue("name")
	for _, v := range a.tierViews(a.rt.table.Load()) {
		if v.Tier == key {
			writeJSON(w, http.StatusOK, v)
			return
		}
	}
	errTierNotFound.write(w)
}

// drain waits until an already quiesced scope holds no lease. It never
// quiesces, readmits or cancels anything.
func (a *Admin) drain(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("namespace") + "/" + r.PathValue("name")
	ts, _ := a.rt.table.Load().lookup(key)
	if ts == nil {
		errTierNotFound.write(w)
		return
	}
	timeout := DefaultDrainTimeout
	if s := r.URL.Query().Get("timeout"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 || d > MaxDrainTimeout {
			errBadTimeout.write(w)
			return
		}
		timeout = d
	}
	member := r.URL.Query().Get("member")
	scope := admission.TierScope()
	if member != "" {
		if len(ts.cfg.Load().ids) == 1 {
			// A direct tier's intent is the tier's (docs/API.md): its one
			// member is never quiesced on its own.
			errDirectTierMember.write(w)
			return
		}
		scope = admission.MemberScope(member)
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	err := ts.admission.Drain(ctx, scope)
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, adminapi.DrainView{Tier: key, Member: member, Drained: true})
	case errors.Is(err, admission.ErrUnknownMember):
		errMemberNotFound.write(w)
	case errors.Is(err, admission.ErrNotQuiesced):
		errNotQuiesced.write(w)
	case r.Context().Err() != nil:
		// The caller went away; nobody is listening.
	default:
		errDrainTimeout.write(w)
	}
}
