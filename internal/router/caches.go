package router

import (
	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/pressure"
	"github.com/sluice-dev/sluice/internal/readiness"
	"github.com/sluice-dev/sluice/internal/scheduler"
	"github.com/sluice-dev/sluice/internal/source"
)

// ReadinessView is what the router reads from the readiness probes. Ready
// must not wait: it returns the latest completed results of the tier's
// members (readiness.Cache implements it).
type ReadinessView interface {
	// Ready returns whether each member of the tier is ready now.
	Ready(tier string) (map[string]bool, error)
}

// Rechecker is told when a member must prove its readiness again before it
// is eligible: when a connection to it failed before any response byte
// (passive ejection) and when it is readmitted. Recheck marks the member not
// ready at once and asks for an immediate probe; the member is ready again
// when a probe passes. It must not block, and it ignores members it does not
// know (readiness.Cache implements it).
type Rechecker interface {
	Recheck(tier, member string)
}

// PressureView is what the router reads from the pressure cache
// (pressure.Cache implements it). Neither method may wait for collection.
type PressureView interface {
	// Snapshot returns the tier's member pressures and schedules refreshes;
	// the request path calls it for Capacity tiers.
	Snapshot(tier string) (map[string]scheduler.Pressure, error)
	// Peek returns the same view without scheduling anything; the admin API
	// calls it.
	Peek(tier string) (map[string]scheduler.Pressure, error)
}

// ReadinessTiers returns the readiness registration of every served tier of
// a snapshot, keyed like the router's tiers, for readiness.Cache.Reconfigure.
func ReadinessTiers(s source.Snapshot) []readiness.Tier {
	out := make([]readiness.Tier, 0, len(s.Tiers))
	for _, t := range s.Tiers {
		rt := readiness.Tier{Key: t.Key, ServedModel: t.Spec.ServedModel}
		for _, m := range t.Spec.Members {
			rt.Members = append(rt.Members, readiness.Member{ID: m.ID, Endpoint: m.Endpoint})
		}
		out = append(out, rt)
	}
	return out
}

// PressureTiers returns the pressure registration of every served Capacity
// tier of a snapshot, for pressure.Cache.Reconfigure. A member without
// metrics is registered without an engine, so it always reads unknown.
func PressureTiers(s source.Snapshot) []pressure.Tier {
	var out []pressure.Tier
	for _, t := range s.Tiers {
		if t.Spec.EffectiveStrategy() != v1alpha1.StrategyCapacity {
			continue
		}
		pt := pressure.Tier{Key: t.Key}
		for _, m := range t.Spec.Members {
			pm := pressure.Member{ID: m.ID}
			if m.MaxConcurrency != nil {
				pm.Capacity = int(*m.MaxConcurrency)
			}
			if m.Metrics != nil {
				if u, err := pressure.MetricsURL(m.Endpoint, m.Metrics.Path); err == nil {
					pm.MetricsURL, pm.Engine = u, string(m.Metrics.Engine)
				}
			}
			pt.Members = append(pt.Members, pm)
		}
		out = append(out, pt)
	}
	return out
}
