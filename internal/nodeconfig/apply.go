package nodeconfig

import (
	"github.com/sluice-dev/sluice/internal/pressure"
	"github.com/sluice-dev/sluice/internal/readiness"
	"github.com/sluice-dev/sluice/internal/source"
	"github.com/sluice-dev/sluice/internal/tiers"
)

// Tiers are the router's tiers a snapshot is applied to (*tiers.Set).
type Tiers interface {
	// Plan returns the configuration Apply(s) would put in force, applying
	// nothing.
	Plan(s source.Snapshot) source.Snapshot
	// Apply puts s in force and says what it served and refused.
	Apply(s source.Snapshot) tiers.ApplyResult
}

// Readiness is the readiness probes' registration (*readiness.Cache).
type Readiness interface {
	// Reconfigure replaces the probed tiers; on error the previous
	// registration stays.
	Reconfigure(tiers []readiness.Tier) error
}

// Pressure is the pressure cache's registration (*pressure.Cache).
type Pressure interface {
	// Reconfigure replaces the sampled tiers; on error the previous
	// registration stays.
	Reconfigure(tiers []pressure.Tier) error
}

// Metrics is the request metrics' configuration
// (*telemetry.RequestMetrics).
type Metrics interface {
	// Configure exports the series of the tiers of s and deletes the
	// others.
	Configure(s source.Snapshot)
}

// Applier applies snapshots to the parts of a router node in one order
// (the package's documentation). Every field is required.
type Applier struct {
	// Tiers plans and applies each snapshot.
	Tiers Tiers
	// Readiness registers the plan's members with the readiness probes.
	Readiness Readiness
	// Pressure registers the plan's Capacity tiers with the pressure cache.
	Pressure Pressure
	// Metrics is configured with the plan once the router applied the
	// snapshot.
	Metrics Metrics
}

// Result is what one Apply did. A cache that refused the plan keeps its
// previous registration (its members read not ready, or their pressure
// unknown); the router applies the snapshot all the same.
type Result struct {
	// Applied is what the router put in force.
	Applied tiers.ApplyResult
	// Readiness is the readiness probes' refusal of the plan, nil when they
	// took it.
	Readiness error
	// Pressure is the pressure cache's refusal of the plan, nil when it took
	// it.
	Pressure error
}

// Apply applies s: the router's plan of s to the readiness probes, then to
// the pressure cache, then s to the router, then the plan to the metrics.
// A tier the router refuses is in the plan with the configuration it keeps
// serving, or not at all, so its refused configuration reaches no part.
func (a Applier) Apply(s source.Snapshot) Result {
	plan := a.Tiers.Plan(s)
	var r Result
	r.Readiness = a.Readiness.Reconfigure(tiers.ReadinessTiers(plan))
	r.Pressure = a.Pressure.Reconfigure(tiers.PressureTiers(plan))
	r.Applied = a.Tiers.Apply(s)
	a.Metrics.Configure(plan)
	return r
}
