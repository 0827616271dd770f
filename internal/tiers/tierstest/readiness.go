package tierstest

import (
	"errors"

	"github.com/sluice-dev/sluice/internal/readiness"
)

// ErrUnknownTier is what Readiness and Pressure return for a tier the test
// did not set.
var ErrUnknownTier = errors.New("tierstest: unknown tier")

// Readiness is a tiers.ReadinessView and tiers.Rechecker that the test
// controls. Its zero value knows no tier. It is safe for concurrent use.
type Readiness struct {
	ready    byTier[bool]
	rechecks map[string]int // "tier#member" → Recheck calls, under ready.mu.
}

// Ready returns whether each member of the tier is ready, or
// ErrUnknownTier.
func (f *Readiness) Ready(tier string) (map[string]bool, error) {
	return f.ready.get(tier)
}

// Recheck marks a known member not ready, as readiness.Cache does until a
// probe passes, and counts the call.
func (f *Readiness) Recheck(tier, member string) {
	f.ready.mu.Lock()
	defer f.ready.mu.Unlock()
	if f.rechecks == nil {
		f.rechecks = map[string]int{}
	}
	f.rechecks[tier+"#"+member]++
	if m, ok := f.ready.tiers[tier]; ok {
		if _, known := m[member]; known {
			m[member] = false
		}
	}
}

// RecheckCalls returns how often Recheck was called for the member.
func (f *Readiness) RecheckCalls(tier, member string) int {
	f.ready.mu.Lock()
	defer f.ready.mu.Unlock()
	return f.rechecks[tier+"#"+member]
}

// Pass makes a member of a known tier ready, as a probe passing after a
// Recheck does.
func (f *Readiness) Pass(tier, member string) {
	f.ready.mu.Lock()
	defer f.ready.mu.Unlock()
	f.ready.tiers[tier][member] = true
}

// Set replaces the readiness of the tier's members with a copy of ready.
func (f *Readiness) Set(tier string, ready map[string]bool) {
	f.ready.set(tier, ready)
}

// Reconfigure registers tiers, and only them, as readiness.Cache.Reconfigure
// would, with every member ready.
func (f *Readiness) Reconfigure(tiers []readiness.Tier) {
	f.ready.mu.Lock()
	defer f.ready.mu.Unlock()
	f.ready.tiers = map[string]map[string]bool{}
	for _, t := range tiers {
		m := map[string]bool{}
		for _, mb := range t.Members {
			m[mb.ID] = true
		}
		f.ready.tiers[t.Key] = m
	}
}
