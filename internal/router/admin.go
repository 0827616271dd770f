package router

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

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

// CapacityView is the body of GET /admin/v1/capacity.
type CapacityView struct {
	// Tiers are the served tiers and the removed tiers still holding
	// leases, sorted by tier.
	Tiers []TierCapacity `json:"tiers"`
}

// TierCapacity is one tier's admission state. Active always equals the sum
// of the members' Active.
type TierCapacity struct {
	// Tier is the tier's namespace/name.
	Tier string `json:"tier"`
	// Strategy is Direct, RoundRobin or Capacity.
	Strategy string `json:"strategy"`
	// Active is the tier's reservation count.
	Active int `json:"active"`
	// MaxConcurrency is the effective tier ceiling; null when unbounded.
	MaxConcurrency *int `json:"max_concurrency"`
	// State is "admitting" or "quiesced".
	State string `json:"state"`
	// Draining is true when the tier is quiesced and holds leases.
	Draining bool `json:"draining"`
	// Removed is true for a tier no longer configured that holds leases.
	Removed bool `json:"removed"`
	// Members are sorted by id, including removed members holding leases.
	Members []MemberCapacity `json:"members"`
}

// MemberCapacity is one member's admission state.
type MemberCapacity struct {
	// ID is the member id.
	ID string `json:"id"`
	// Active is the member's reservation count.
	Active int `json:"active"`
	// MaxConcurrency is the member's ceiling; null when it has none.
	MaxConcurrency *int `json:"max_concurrency"`
	// State is "admitting", "quiesced" (the member itself) or "removed".
	State string `json:"state"`
	// Phase is Admitting, Draining or Drained, counting tier quiesce.
	Phase string `json:"phase"`
	// Draining is true when the member is quiesced or removed and holds
	// leases.
	Draining bool `json:"draining"`
	// Ready is the member's latest readiness.
	Ready bool `json:"ready"`
	// Pressure is the member's cached pressure, for Capacity tiers only.
	Pressure *MemberPressure `json:"pressure,omitempty"`
}

// MemberPressure is one member's cached upstream pressure, read without
// scheduling a refresh.
type MemberPressure struct {
	// Freshness is fresh, stale, failed or unknown.
	Freshness string `json:"freshness"`
	// PPM is the pressure in parts per million; null unless fresh.
	PPM *int64 `json:"pressure_ppm"`
	// RequestState is the state of the running+waiting signal.
	RequestState string `json:"requests_state"`
	// KVState is the state of the KV cache signal.
	KVState string `json:"kv_state"`
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
func (a *Admin) Capacity() CapacityView {
	tab := a.rt.table.Load()
	view := CapacityView{Tiers: []TierCapacity{}}
	for _, ts := range slices.Concat(tab.served, tab.retired) {
		served := slices.Contains(tab.served, ts)
		snap := ts.admission.Snapshot()
		if !served && snap.Active == 0 {
			continue
		}
		view.Tiers = append(view.Tiers, a.tierCapacity(ts, snap, served))
	}
	slices.SortFunc(view.Tiers, func(a, b TierCapacity) int {
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
func (a *Admin) Applied() []AppliedTier { return a.rt.Applied() }

// tierCapacity projects one tier's admission snapshot, readiness and
// pressure. Pressure is read with Peek, which schedules nothing.
func (a *Admin) tierCapacity(ts *tierState, snap admission.Snapshot, served bool) TierCapacity {
	tc := TierCapacity{
		Tier:           ts.key,
		Strategy:       strategyName(snap.Strategy),
		Active:         snap.Active,
		MaxConcurrency: ceiling(snap.Ceiling),
		State:          "admitting",
		Draining:       snap.Draining,
		Removed:        !served,
		Members:        make([]MemberCapacity, 0, len(snap.Members)),
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
		mc := MemberCapacity{
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
			pv := &MemberPressure{Freshness: p.Freshness.String(), RequestState: p.RequestState.String(), KVState: p.KVState.String()}
			if p.Freshness == scheduler.FreshnessFresh {
				pv.PPM = &p.PPM
			}
			mc.Pressure = pv
		}
		tc.Members = append(tc.Members, mc)
	}
	return tc
}

// TiersView is the body of GET /admin/v1/tiers.
type TiersView struct {
	// Loaded is true once a configuration was applied.
	Loaded bool `json:"loaded"`
	// Tiers are the served and the rejected tiers, sorted by tier.
	Tiers []TierView `json:"tiers"`
	// SourceErrors are the manifest files whose current content is
	// rejected; their tiers keep their last good configuration.
	SourceErrors []SourceErrorView `json:"source_errors"`
}

// TierView is one tier's configuration as applied. Member endpoints are
// left out: they are operator configuration, and the admin API never
// echoes addresses.
type TierView struct {
	// Tier is the tier's namespace/name.
	Tier string `json:"tier"`
	// File is the manifest file that declares it.
	File string `json:"file"`
	// Served is true when the router routes the tier's aliases to it.
	Served bool `json:"served"`
	// Aliases are the caller-facing model names.
	Aliases []string `json:"aliases"`
	// ServedModel is the model id every member must serve.
	ServedModel string `json:"served_model"`
	// Strategy is Direct, RoundRobin or Capacity.
	Strategy string `json:"strategy"`
	// MaxConcurrency is the configured tier ceiling; null when absent.
	MaxConcurrency *int32 `json:"max_concurrency"`
	// Members are the configured members, without endpoints.
	Members []MemberView `json:"members"`
	// ResponseHeaderTimeout is the upstream response header timeout.
	ResponseHeaderTimeout string `json:"response_header_timeout"`
	// IdleTimeout is the upstream idle timeout.
	IdleTimeout string `json:"idle_timeout"`
	// Quiesce is the applied quiesce intent.
	Quiesce QuiesceView `json:"quiesce"`
	// Rejection says why a tier is not served: AliasConflict, Duplicate,
	// NotAccepted (kube source) or MemberLimit.
	Rejection *RejectionView `json:"rejection,omitempty"`
	// SourceError is the current error of the tier's file, which keeps the
	// tier on its last good configuration.
	SourceError string `json:"source_error,omitempty"`
	// ApplyError is why the router could not apply the tier's current
	// configuration.
	ApplyError string `json:"apply_error,omitempty"`
}

// MemberView is one configured member.
type MemberView struct {
	// ID is the member id.
	ID string `json:"id"`
	// MaxConcurrency is the member ceiling; null when absent.
	MaxConcurrency *int32 `json:"max_concurrency"`
	// MetricsEngine is the member's metrics dialect; empty when it has no
	// metrics.
	MetricsEngine string `json:"metrics_engine,omitempty"`
}

// QuiesceView is a tier's quiesce intent.
type QuiesceView struct {
	// Tier is the tier's quiesce reason; empty when it admits.
	Tier string `json:"tier,omitempty"`
	// Members maps quiesced member ids to their reasons.
	Members map[string]string `json:"members,omitempty"`
}

// RejectionView says why a valid tier is not served.
type RejectionView struct {
	// Reason is AliasConflict, Duplicate, NotAccepted or MemberLimit.
	Reason string `json:"reason"`
	// Message names the winning tier or file.
	Message string `json:"message"`
}

// SourceErrorView is one rejected manifest file.
type SourceErrorView struct {
	// File is the file's base name; "." is the directory.
	File string `json:"file"`
	// Message says what is wrong, without quoting values.
	Message string `json:"message"`
}

// tierViews returns every served and rejected tier, sorted by tier.
func (a *Admin) tierViews(tab *table) []TierView {
	fileErr := map[string]string{}
	for _, e := range tab.fileErrors {
		fileErr[e.File] = e.Message
	}
	views := []TierView{}
	seen := map[string]bool{}
	for _, ts := range tab.served {
		v := newTierView(ts.cfg.Load().tier, true, fileErr)
		v.ApplyError = tab.applyErrors[ts.key].message
		views = append(views, v)
		seen[ts.key] = true
	}
	for _, r := range tab.rejected {
		v := newTierView(r.Tier, false, fileErr)
		v.Rejection = &RejectionView{Reason: string(r.Reason), Message: r.Message}
		views = append(views, v)
	}
	for key, f := range tab.applyErrors {
		if !seen[key] {
			views = append(views, TierView{Tier: key, ApplyError: f.message, Aliases: []string{}, Members: []MemberView{}})
		}
	}
	slices.SortStableFunc(views, func(a, b TierView) int {
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
func newTierView(t source.Tier, served bool, fileErr map[string]string) TierView {
	s := &t.Spec
	v := TierView{
		Tier:           t.Key,
		File:           t.File,
		Served:         served,
		Aliases:        slices.Clone(s.Aliases),
		ServedModel:    s.ServedModel,
		Strategy:       string(s.EffectiveStrategy()),
		MaxConcurrency: s.MaxConcurrency,
		Members:        make([]MemberView, 0, len(s.Members)),
		SourceError:    fileErr[t.File],
	}
	if v.Strategy == "" {
		v.Strategy = "Direct"
	}
	for _, m := range s.Members {
		mv := MemberView{ID: m.ID, MaxConcurrency: m.MaxConcurrency}
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
	view := TiersView{Loaded: tab.loaded, Tiers: a.tierViews(tab), SourceErrors: []SourceErrorView{}}
	for _, e := range tab.fileErrors {
		view.SourceErrors = append(view.SourceErrors, SourceErrorView(e))
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

// DrainView is the body of a successful drain.
type DrainView struct {
	// Tier is the drained tier.
	Tier string `json:"tier"`
	// Member is the drained member; empty for the whole tier.
	Member string `json:"member,omitempty"`
	// Drained is true: the scope holds no lease.
	Drained bool `json:"drained"`
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
		writeJSON(w, http.StatusOK, DrainView{Tier: key, Member: member, Drained: true})
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
