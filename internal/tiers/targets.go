package tiers

import (
	"github.com/sluice-dev/sluice/internal/pressure"
)

// MetricsTargets returns, for a served Capacity tier, the pressure target
// (metrics URL, engine and series) of each member that declares metrics, as
// PressureTiers registers them with the pressure cache. It returns nil for
// other tiers. The telemetry collectors use it to label the age of each
// member's last metrics fetch with the member's id; the URLs never leave the
// process.
func (set *Set) MetricsTargets(tier string) map[string]pressure.Target {
	ts, served := set.table.Load().Lookup(tier)
	if ts == nil || !served {
		return nil
	}
	spec := &ts.cfg.Load().tier.Spec
	if !spec.EffectiveStrategy().UsesPressure() {
		return nil
	}
	out := make(map[string]pressure.Target, len(spec.Members))
	for _, m := range spec.Members {
		if m.Metrics == nil {
			continue
		}
		if u, err := pressure.MetricsURL(m.Endpoint, m.Metrics.Path); err == nil {
			out[m.ID] = pressure.Target{MetricsURL: u, Engine: pressure.Engine(m.Metrics.Engine), Series: pressureSeries(m.Metrics)}
		}
	}
	return out
}
