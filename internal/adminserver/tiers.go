package adminserver

// The tiers view (GET /admin/v1/tiers and /admin/v1/tiers/{namespace}/{name}).

import (
	"net/http"
	"slices"

	"github.com/sluice-dev/sluice/internal/adminapi"
	"github.com/sluice-dev/sluice/internal/source"
	"github.com/sluice-dev/sluice/internal/tiers"
)

// tierViews returns every served and rejected tier, sorted by tier.
func (a *Admin) tierViews(tab *tiers.Table) []adminapi.TierView {
	fileErr := map[string]string{}
	for _, e := range tab.FileErrors() {
		fileErr[e.File] = e.Message
	}
	views := []adminapi.TierView{}
	seen := map[string]bool{}
	for _, ts := range tab.Served() {
		v := newTierView(ts.Config().Source(), true, fileErr)
		v.ApplyError = tab.ApplyErrors()[ts.Key()].Message
		views = append(views, v)
		seen[ts.Key()] = true
	}
	for _, r := range tab.Rejected() {
		v := newTierView(r.Tier, false, fileErr)
		v.Rejection = &adminapi.RejectionView{Reason: string(r.Reason), Message: r.Message}
		views = append(views, v)
	}
	for key, f := range tab.ApplyErrors() {
		if !seen[key] {
			views = append(views, adminapi.TierView{Tier: key, ApplyError: f.Message, Aliases: []string{}, Members: []adminapi.MemberView{}})
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
		Strategy:       s.StrategyName(),
		MaxConcurrency: s.MaxConcurrency,
		Members:        make([]adminapi.MemberView, 0, len(s.Members)),
		SourceError:    fileErr[t.File],
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
	tab := a.set.Table()
	view := adminapi.TiersView{Loaded: tab.Loaded(), Tiers: a.tierViews(tab), SourceErrors: []adminapi.SourceErrorView{}}
	for _, e := range tab.FileErrors() {
		view.SourceErrors = append(view.SourceErrors, adminapi.SourceErrorView{File: e.File, Message: e.Message})
	}
	writeJSON(w, http.StatusOK, view)
}

func (a *Admin) tier(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("namespace") + "/" + r.PathValue("name")
	for _, v := range a.tierViews(a.set.Table()) {
		if v.Tier == key {
			writeJSON(w, http.StatusOK, v)
			return
		}
	}
	errTierNotFound.Write(w)
}
