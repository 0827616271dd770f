package adminapi

import (
	"slices"
	"testing"
)

// TestServingAndSaturated pins the judgements the per-tier readiness and
// the model-server gauges share (docs/OPERATIONS.md#model-server-gauges):
// why a tier does not serve, and when a serving tier is saturated.
func TestServingAndSaturated(t *testing.T) {
	two, four, eight := 2, 4, 8
	base := TierCapacity{Tier: "ns/llama", Active: 1, MaxConcurrency: &eight, State: StateAdmitting, Members: []MemberCapacity{
		{ID: "gpu0", Active: 1, MaxConcurrency: &four, State: StateAdmitting, Ready: true},
		{ID: "gpu1", MaxConcurrency: &four, State: StateAdmitting, Ready: true},
	}}
	for _, tt := range []struct {
		desc       string
		mutate     func(*TierCapacity)
		notServing string
		saturated  bool
	}{
		{desc: "serving", mutate: func(*TierCapacity) {}},
		{desc: "removed", mutate: func(t *TierCapacity) { t.Removed = true }, notServing: "tier not served"},
		{desc: "quiesced", mutate: func(t *TierCapacity) { t.State = StateQuiesced }, notServing: "tier quiesced"},
		{desc: "every member quiesced or not ready", mutate: func(t *TierCapacity) {
			t.Members[0].State, t.Members[1].Ready = StateQuiesced, false
		}, notServing: "no eligible member"},
		{desc: "a removed member and a quiesced one", mutate: func(t *TierCapacity) {
			t.Members[0].State, t.Members[1].State = StateRemoved, StateQuiesced
		}, notServing: "no eligible member"},
		{desc: "one member full", mutate: func(t *TierCapacity) { t.Members[0].Active = 4 }},
		{desc: "every eligible member full", mutate: func(t *TierCapacity) {
			t.Members[0].Active, t.Members[1].Active = 4, 4
		}, saturated: true},
		{desc: "one full, the other not ready", mutate: func(t *TierCapacity) {
			t.Members[0].Active, t.Members[1].Ready = 4, false
		}, saturated: true},
		{desc: "a member without a ceiling is never full", mutate: func(t *TierCapacity) {
			t.Members[0].Active, t.Members[1].MaxConcurrency, t.Members[1].Active = 4, nil, 100
		}},
		{desc: "tier at its ceiling", mutate: func(t *TierCapacity) { t.MaxConcurrency, t.Active = &two, 2 }, saturated: true},
		{desc: "queue not full, members full", mutate: func(t *TierCapacity) {
			t.Members[0].Active, t.Members[1].Active = 4, 4
			t.Queue = TierQueue{MaxRequests: &two, Waiting: 1}
		}},
		{desc: "queue full", mutate: func(t *TierCapacity) { t.Queue = TierQueue{MaxRequests: &two, Waiting: 2} }, saturated: true},
		{desc: "quiesced and full is not serving, not saturated", mutate: func(t *TierCapacity) {
			t.State, t.Queue = StateQuiesced, TierQueue{MaxRequests: &two, Waiting: 2}
		}, notServing: "tier quiesced"},
	} {
		t.Run(tt.desc, func(t *testing.T) {
			tc := base
			tc.Members = slices.Clone(base.Members)
			tt.mutate(&tc)
			if got := tc.NotServing(); got != tt.notServing {
				t.Fatalf("NotServing = %q, want %q", got, tt.notServing)
			}
			if got := tc.Saturated(); got != tt.saturated {
				t.Fatalf("Saturated = %v, want %v", got, tt.saturated)
			}
		})
	}
}
