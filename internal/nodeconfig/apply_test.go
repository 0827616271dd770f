package nodeconfig_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/nodeconfig"
	"github.com/sluice-dev/sluice/internal/pressure"
	"github.com/sluice-dev/sluice/internal/readiness"
	"github.com/sluice-dev/sluice/internal/source"
	"github.com/sluice-dev/sluice/internal/telemetry"
	"github.com/sluice-dev/sluice/internal/tiers"
)

// The parts the router binary wires satisfy the interfaces.
var (
	_ nodeconfig.Tiers     = (*tiers.Set)(nil)
	_ nodeconfig.Readiness = (*readiness.Cache)(nil)
	_ nodeconfig.Pressure  = (*pressure.Cache)(nil)
	_ nodeconfig.Metrics   = (*telemetry.RequestMetrics)(nil)
)

// parts are fakes of every part, recording the calls in one list.
type parts struct {
	calls []string
	plan  source.Snapshot // what Plan returns.

	applied    source.Snapshot
	probed     []readiness.Tier
	sampled    []pressure.Tier
	metrics    source.Snapshot
	probesErr  error
	samplesErr error
}

func (p *parts) Plan(source.Snapshot) source.Snapshot {
	p.calls = append(p.calls, "plan")
	return p.plan
}

func (p *parts) Apply(s source.Snapshot) tiers.ApplyResult {
	p.calls = append(p.calls, "apply")
	p.applied = s
	return tiers.ApplyResult{Served: len(p.plan.Tiers), Refused: []tiers.RefusedTier{{Key: "ns/refused", Message: "no"}}}
}

func (p *parts) Configure(s source.Snapshot) { p.calls = append(p.calls, "metrics"); p.metrics = s }

type probes struct{ *parts }

func (p probes) Reconfigure(tiers []readiness.Tier) error {
	p.calls = append(p.calls, "readiness")
	p.probed = tiers
	return p.probesErr
}

type samples struct{ *parts }

func (p samples) Reconfigure(tiers []pressure.Tier) error {
	p.calls = append(p.calls, "pressure")
	p.sampled = tiers
	return p.samplesErr
}

func (p *parts) applier() nodeconfig.Applier {
	return nodeconfig.Applier{Tiers: p, Readiness: probes{p}, Pressure: samples{p}, Metrics: p}
}

// tier returns a tier of two members, the first at endpoint (a strategy
// needs two).
func tier(key, endpoint string, strategy v1alpha1.Strategy) source.Tier {
	return source.Tier{Key: key, Spec: v1alpha1.ReplicaTierSpec{
		Strategy: strategy,
		Members:  []v1alpha1.Member{{ID: "m0", Endpoint: endpoint}, {ID: "m1", Endpoint: "http://127.0.0.1:7000"}},
	}}
}

func TestApplyOrder(t *testing.T) {
	kept := tier("ns/kept", "http://127.0.0.1:8001", v1alpha1.StrategyCapacity)
	// The snapshot changes ns/kept's endpoint and adds ns/refused; the
	// router refuses both new configurations: its plan keeps ns/kept's old
	// one and leaves ns/refused out.
	changed := tier("ns/kept", "http://127.0.0.1:9001", v1alpha1.StrategyCapacity)
	refused := tier("ns/refused", "http://127.0.0.1:9002", v1alpha1.StrategyCapacity)
	snap := source.Snapshot{Tiers: []source.Tier{changed, refused}}
	p := &parts{plan: source.Snapshot{Tiers: []source.Tier{kept}}}

	got := p.applier().Apply(snap)

	if want := []string{"plan", "readiness", "pressure", "apply", "metrics"}; !slices.Equal(p.calls, want) {
		t.Fatalf("calls %q, want %q", p.calls, want)
	}
	if want := tiers.ReadinessTiers(p.plan); !slices.EqualFunc(p.probed, want, equalReadiness) {
		t.Errorf("readiness registered %+v, want the plan's %+v", p.probed, want)
	}
	if len(p.sampled) != 1 || p.sampled[0].Key != "ns/kept" {
		t.Errorf("pressure registered %+v, want the plan's ns/kept only", p.sampled)
	}
	if !slices.EqualFunc(p.metrics.Tiers, p.plan.Tiers, sameTier) {
		t.Errorf("metrics configured with %+v, want the plan", p.metrics.Tiers)
	}
	if !slices.EqualFunc(p.applied.Tiers, snap.Tiers, sameTier) {
		t.Errorf("router applied %+v, want the snapshot", p.applied.Tiers)
	}
	if got.Applied.Served != 1 || len(got.Applied.Refused) != 1 || got.Readiness != nil || got.Pressure != nil {
		t.Errorf("result %+v, want the router's result and no refusal", got)
	}
}

func TestApplyRefusedRegistration(t *testing.T) {
	errProbes, errSamples := errors.New("probes refused"), errors.New("samples refused")
	for _, tt := range []struct {
		name                  string
		probesErr, samplesErr error
	}{
		{name: "readiness", probesErr: errProbes},
		{name: "pressure", samplesErr: errSamples},
		{name: "both", probesErr: errProbes, samplesErr: errSamples},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := &parts{plan: source.Snapshot{Tiers: []source.Tier{tier("ns/a", "http://127.0.0.1:8001", v1alpha1.StrategyCapacity)}},
				probesErr: tt.probesErr, samplesErr: tt.samplesErr}
			got := p.applier().Apply(p.plan)
			// A cache that refuses keeps its previous registration; the
			// router and the metrics follow the snapshot all the same.
			if want := []string{"plan", "readiness", "pressure", "apply", "metrics"}; !slices.Equal(p.calls, want) {
				t.Fatalf("calls %q, want %q", p.calls, want)
			}
			if !errors.Is(got.Readiness, tt.probesErr) || (tt.probesErr == nil) != (got.Readiness == nil) {
				t.Errorf("Readiness = %v, want %v", got.Readiness, tt.probesErr)
			}
			if !errors.Is(got.Pressure, tt.samplesErr) || (tt.samplesErr == nil) != (got.Pressure == nil) {
				t.Errorf("Pressure = %v, want %v", got.Pressure, tt.samplesErr)
			}
		})
	}
}

func TestApplyPlanOfNothing(t *testing.T) {
	// Every tier refused and none served before: the plan is empty, so no
	// part but the router sees the snapshot's configurations.
	snap := source.Snapshot{Tiers: []source.Tier{tier("ns/a", "http://127.0.0.1:9001", v1alpha1.StrategyRoundRobin)}}
	p := &parts{}
	p.applier().Apply(snap)
	if len(p.probed) != 0 || len(p.sampled) != 0 || len(p.metrics.Tiers) != 0 {
		t.Fatalf("registered %+v, %+v, metrics %+v: want nothing", p.probed, p.sampled, p.metrics.Tiers)
	}
	if len(p.applied.Tiers) != 1 {
		t.Fatalf("router applied %+v, want the snapshot", p.applied.Tiers)
	}
}

func equalReadiness(a, b readiness.Tier) bool {
	return a.Key == b.Key && a.ServedModel == b.ServedModel && slices.Equal(a.Members, b.Members)
}

func sameTier(a, b source.Tier) bool {
	return a.Key == b.Key && slices.Equal(a.Spec.Members, b.Spec.Members)
}
