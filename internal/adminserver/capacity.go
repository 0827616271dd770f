package adminserver

// The capacity view (GET /admin/v1/capacity), which status reporting and
// the capacity metrics read too.

import (
	"net/http"
	"slices"

	"github.com/sluice-dev/sluice/api/bounds"
	"github.com/sluice-dev/sluice/internal/adminapi"
	"github.com/sluice-dev/sluice/internal/admission"
	"github.com/sluice-dev/sluice/internal/scheduler"
	"github.com/sluice-dev/sluice/internal/tiers"
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
	tab := a.set.Table()
	view := adminapi.CapacityView{Tiers: []adminapi.TierCapacity{}}
	for _, ts := range slices.Concat(tab.Served(), tab.Retired()) {
		served := slices.Contains(tab.Served(), ts)
		snap := ts.Admission().Snapshot()
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

// Applied returns tiers.Set.Applied: the generation and members in force
// of every applied tier and the configurations that could not be applied.
// The router's status reporter calls it.
func (a *Admin) Applied() []adminapi.AppliedTier { return a.set.Applied() }

// tierQueue projects one tier's queue statistics: the oldest wait is read
// off the tiers' clock, which times the queue's waits.
func (a *Admin) tierQueue(s admission.QueueStats) adminapi.TierQueue {
	q := adminapi.TierQueue{MaxRequests: ceiling(s.MaxRequests), Waiting: s.Waiting}
	if !s.Oldest.IsZero() {
		q.OldestWaitMillis = max(a.set.Clock().Since(s.Oldest).Milliseconds(), 0)
	}
	return q
}

// tierCapacity projects one tier's admission snapshot, readiness and
// pressure. Pressure is read with Peek, which schedules nothing.
func (a *Admin) tierCapacity(ts *tiers.Tier, snap admission.Snapshot, served bool) adminapi.TierCapacity {
	tc := adminapi.TierCapacity{
		Tier:           ts.Key(),
		Strategy:       bounds.StrategyName(snap.Strategy),
		ServedModel:    ts.Config().Source().Spec.ServedModel,
		Active:         snap.Active,
		MaxConcurrency: ceiling(snap.Ceiling),
		State:          adminapi.StateAdmitting,
		Draining:       snap.Draining,
		Removed:        !served,
		Queue:          a.tierQueue(ts.Admission().QueueStats()),
		Members:        make([]adminapi.MemberCapacity, 0, len(snap.Members)),
	}
	if snap.Quiesced {
		tc.State = adminapi.StateQuiesced
	}
	readiness := a.set.Readiness()
	var ready map[string]bool
	if readiness != nil {
		ready, _ = readiness.Ready(ts.Key())
	}
	var pressure map[string]scheduler.Pressure
	if p := a.set.Pressure(); snap.Strategy.UsesPressure() && p != nil {
		pressure, _ = p.Peek(ts.Key())
	}
	for _, m := range snap.Members {
		mc := adminapi.MemberCapacity{
			ID:             m.ID,
			Active:         m.Active,
			MaxConcurrency: ceiling(m.Ceiling),
			State:          adminapi.StateAdmitting,
			Phase:          string(m.Phase),
			Draining:       m.Draining,
			Ready:          readiness == nil && served && !m.Removed || ready[m.ID],
		}
		switch {
		case m.Removed:
			mc.State = adminapi.StateRemoved
		case m.Quiesced:
			mc.State = adminapi.StateQuiesced
		}
		if snap.Strategy.UsesPressure() {
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
