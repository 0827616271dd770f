package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/api/bounds"
)

// Defaults the CRD applies; Default repeats them for tiers that never pass
// through the API server (the router's file source).
const (
	// DefaultMetricsPath is where engines serve Prometheus metrics.
	DefaultMetricsPath = "/metrics"
	// DefaultResponseHeaderTimeout covers a long prefill on a busy engine.
	DefaultResponseHeaderTimeout = 120 * time.Second
	// DefaultIdleTimeout covers the longest expected gap between two tokens.
	DefaultIdleTimeout = 60 * time.Second
)

// Default fills the fields the CRD defaults, in place.
func Default(t *ReplicaTier) {
	s := &t.Spec
	for i := range s.Members {
		if m := s.Members[i].Metrics; m != nil && m.Path == "" {
			m.Path = DefaultMetricsPath
		}
	}
	if s.Upstream == nil {
		s.Upstream = &UpstreamSpec{}
	}
	if s.Upstream.ResponseHeaderTimeout == nil {
		s.Upstream.ResponseHeaderTimeout = &metav1.Duration{Duration: DefaultResponseHeaderTimeout}
	}
	if s.Upstream.IdleTimeout == nil {
		s.Upstream.IdleTimeout = &metav1.Duration{Duration: DefaultIdleTimeout}
	}
}

// Direct reports whether the spec is a direct tier: one member, which the
// router proxies to without a strategy.
func (s *ReplicaTierSpec) Direct() bool {
	return len(s.Members) <= 1
}

// EffectiveStrategy is the strategy a tier runs: empty for a direct tier,
// RoundRobin for a replica tier without one.
func (s *ReplicaTierSpec) EffectiveStrategy() Strategy {
	switch {
	case s.Direct():
		return ""
	case s.Strategy == "":
		return StrategyRoundRobin
	}
	return s.Strategy
}

// StrategyName names what the tier runs in the router's admin API and the
// plugin's status: "Direct" for a direct tier, else its effective strategy
// (bounds.StrategyName).
func (s *ReplicaTierSpec) StrategyName() string {
	return bounds.StrategyName(s.EffectiveStrategy())
}

// EffectiveUpstreamModel is the model name policy a tier runs:
// ServedModel unless the tier asks for Alias.
func (s *ReplicaTierSpec) EffectiveUpstreamModel() UpstreamModel {
	if s.UpstreamModel == "" {
		return UpstreamModelServedModel
	}
	return s.UpstreamModel
}

// EffectiveMemberLocality is the member locality a tier runs: SameHost
// unless the tier asks for Any.
func (s *ReplicaTierSpec) EffectiveMemberLocality() MemberLocality {
	if s.MemberLocality == "" {
		return MemberLocalitySameHost
	}
	return s.MemberLocality
}
