package tiers

import (
	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/admission"
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
// metrics is registered without an engine or series, so it always reads
// unknown.
func PressureTiers(s source.Snapshot) []pressure.Tier {
	var out []pressure.Tier
	for _, t := range s.Tiers {
		if !t.Spec.EffectiveStrategy().UsesPressure() {
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
					pm.MetricsURL, pm.Engine, pm.Series = u, string(m.Metrics.Engine), pressureSeries(m.Metrics)
				}
			}
			pt.Members = append(pt.Members, pm)
		}
		out = append(out, pt)
	}
	return out
}

// pressureSeries returns the series a member's metrics name
// (metrics.series), for its pressure registration.
func pressureSeries(m *v1alpha1.MetricsSpec) pressure.Series {
	if m.Series == nil {
		return pressure.Series{}
	}
	return pressure.Series{
		Running: string(m.Series.Running),
		Waiting: string(m.Series.Waiting),
		KVUsage: string(m.Series.KVUsage),
	}
}

// Inputs returns the admission inputs of t from completed snapshots of
// the members of cfg, t's configuration in force or one it had. It never
// waits. The epoch is read before readiness: a readmission landing after
// this read refuses the decision, and the next attempt reads the
// readmitted member's recheck (docs/ROUTER.md#5-configuration-changes).
func (set *Set) Inputs(t *Tier, cfg *Config) admission.Inputs {
	in := admission.Inputs{ReadmitEpoch: t.admission.ReadmitEpoch()}
	in.Ready = set.ready(t.key, cfg)
	if cfg.strategy.UsesPressure() {
		in.Pressure = set.pressures(t.key, cfg)
	}
	return in
}

// ready returns the readiness of exactly the members of cfg: a member the
// readiness cache does not know (yet) is not ready, a member it still knows
// but cfg dropped is left out.
func (set *Set) ready(key string, cfg *Config) map[string]bool {
	if set.readiness == nil {
		return cfg.allReady // read-only; Acquire copies what it reads.
	}
	m, err := set.readiness.Ready(key)
	if err == nil && sameKeys(m, cfg.ids) {
		return m
	}
	out := make(map[string]bool, len(cfg.ids))
	for _, id := range cfg.ids {
		out[id] = m[id]
	}
	return out
}

// pressures returns the pressure of the members of cfg; members the cache
// does not know are left out, which admission reads as unknown.
func (set *Set) pressures(key string, cfg *Config) map[string]scheduler.Pressure {
	if set.pressure == nil {
		return nil
	}
	m, err := set.pressure.Snapshot(key)
	if err != nil {
		return nil
	}
	if sameKeys(m, cfg.ids) {
		return m
	}
	out := make(map[string]scheduler.Pressure, len(cfg.ids))
	for _, id := range cfg.ids {
		if p, ok := m[id]; ok {
			out[id] = p
		}
	}
	return out
}

// sameKeys reports whether m has exactly the keys ids.
func sameKeys[V any](m map[string]V, ids []string) bool {
	if len(m) != len(ids) {
		return false
	}
	for _, id := range ids {
		if _, ok := m[id]; !ok {
			return false
		}
	}
	return true
}
