package router

// The capacity view (GET /admin/v1/capacity), which status reporting and
// the capacity metrics read too.

import (
	"net/http"
	"slices"

	"github.com/sluice-dev/sluice/api/bounds"
	"github.com/sluice-dev/sluice/internal/adminapi"
	"github.com/sluice-dev/sluice/internal/admission"
	"github.com/sluice-dev/sluice/internal/scheduler"
)

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

// tierQueue projects one tier's queue statistics: the oldest wait is read
// off the router's clock, which times the queue's waits.
func (a *Admin) tierQueue(s admission.QueueStats) adminapi.TierQueue {
	q := adminapi.TierQueue{MaxRequests: ceiling(s.MaxRequests), Waiting: s.Waiting}
	if !s.Oldest.IsZero() {
		q.OldestWaitMillis = max(a.rt.clock.Since(s.Oldest).Milliseconds(), 0)
	}
	return q
}

// tierCapacity projects one tier's admission snapshot, readiness and
// pressure. Pressure is read with Peek, which schedules nothing.
func (a *Admin) tierCapacity(ts *tierState, snap admission.Snapshot, served bool) adminapi.TierCapacity {
	tc := adminapi.TierCapacity{
		Tier:           ts.key,
		Strategy:       bounds.StrategyName(snap.Strategy),
		Active:         snap.Active,
		MaxConcurrency: ceiling(snap.Ceiling),
		State:          "admitting",
		Draining:       snap.Draining,
		Removed:        !served,
		Queue:          a.tierQueue(ts.admission.QueueStats()),
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
	if snap.Strategy == bounds.StrategyCapacity && a.rt.pressure != nil {
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
		if snap.Strategy == bounds.StrategyCapacity {
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
