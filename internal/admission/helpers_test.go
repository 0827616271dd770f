package admission_test

import (
	"fmt"
	"testing"

	"github.com/sluice-dev/sluice/internal/admission"
	"github.com/sluice-dev/sluice/internal/scheduler"
)

// newTier returns a tier for cfg or fails the test.
func newTier(t testing.TB, cfg admission.Config, opts ...admission.Option) *admission.Tier {
	t.Helper()
	tier, err := admission.New(cfg, opts...)
	if err != nil {
		t.Fatalf("New(%+v) error = %v", cfg, err)
	}
	return tier
}

// members returns MemberConfigs with the given ids and one ceiling for all.
func members(ceiling int, ids ...string) []admission.MemberConfig {
	ms := make([]admission.MemberConfig, len(ids))
	for i, id := range ids {
		ms[i] = admission.MemberConfig{ID: id, MaxConcurrency: ceiling}
	}
	return ms
}

// ids returns n member ids m00, m01, ….
func ids(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("m%02d", i)
	}
	return out
}

// ready returns a readiness map with every id ready except those in notReady.
func ready(all []string, notReady ...string) map[string]bool {
	r := make(map[string]bool, len(all))
	for _, id := range all {
		r[id] = true
	}
	for _, id := range notReady {
		r[id] = false
	}
	return r
}

func fresh(ppm int64) scheduler.Pressure {
	return scheduler.Pressure{Freshness: scheduler.FreshnessFresh, PPM: ppm, RequestState: scheduler.SignalValid, KVState: scheduler.SignalMissing}
}

// acquire acquires or fails the test.
func acquire(t testing.TB, tier *admission.Tier, in admission.Inputs) *admission.Lease {
	t.Helper()
	l, err := tier.Acquire(in)
	if err != nil {
		t.Fatalf("Acquire() error = %v", err)
	}
	return l
}

// activeOf returns the active count of member id in the tier's snapshot, and
// -1 when the snapshot does not list it.
func activeOf(tier *admission.Tier, id string) int {
	for _, m := range tier.Snapshot().Members {
		if m.ID == id {
			return m.Active
		}
	}
	return -1
}

// checkSums fails the test unless the snapshot's tier active equals the sum of
// its members' active counts.
func checkSums(t testing.TB, s admission.Snapshot) {
	t.Helper()
	sum := 0
	for _, m := range s.Members {
		sum += m.Active
	}
	if sum != s.Active {
		t.Fatalf("tier active %d != Σ member active %d: %+v", s.Active, sum, s)
	}
}
