package admission_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/sluice-dev/sluice/api/bounds"
	"github.com/sluice-dev/sluice/internal/admission"
)

func TestNewValidation(t *testing.T) {
	tooMany := members(1, ids(17)...)
	tests := []struct {
		desc string
		cfg  admission.Config
	}{
		{"no members", admission.Config{}},
		{"seventeen members", admission.Config{Members: tooMany}},
		{"invalid id", admission.Config{Members: members(0, "gpu0", "GPU1")}},
		{"empty id", admission.Config{Members: members(0, "")}},
		{"duplicate id", admission.Config{Members: members(0, "a", "b", "a")}},
		{"strategy on a direct tier", admission.Config{Strategy: bounds.StrategyRoundRobin, Members: members(1, "a")}},
		{"capacity on a direct tier", admission.Config{Strategy: bounds.StrategyCapacity, Members: members(1, "a")}},
		{"unknown strategy", admission.Config{Strategy: "LeastConn", Members: members(1, "a", "b")}},
		{"capacity without every ceiling", admission.Config{Strategy: bounds.StrategyCapacity,
			Members: []admission.MemberConfig{{ID: "a", MaxConcurrency: 2}, {ID: "b"}}}},
		{"member ceiling negative", admission.Config{Members: members(-1, "a", "b")}},
		{"member ceiling above bound", admission.Config{Members: members(100_001, "a", "b")}},
		{"tier ceiling negative", admission.Config{MaxConcurrency: -1, Members: members(1, "a", "b")}},
		{"tier ceiling above bound", admission.Config{MaxConcurrency: 100_001, Members: members(1, "a", "b")}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			tier, err := admission.New(tt.cfg)
			if !errors.Is(err, admission.ErrInvalidConfig) || tier != nil {
				t.Fatalf("New() = %v, %v; want nil, ErrInvalidConfig", tier, err)
			}
		})
	}
}

func TestTierCeilingAndStrategy(t *testing.T) {
	tests := []struct {
		desc         string
		cfg          admission.Config
		wantCeiling  int
		wantStrategy bounds.Strategy
	}{
		{"tier ceiling wins, never multiplied", admission.Config{MaxConcurrency: 3, Members: members(2, "a", "b")}, 3, bounds.StrategyRoundRobin},
		{"sum of member ceilings", admission.Config{Strategy: bounds.StrategyCapacity,
			Members: []admission.MemberConfig{{ID: "a", MaxConcurrency: 3}, {ID: "b", MaxConcurrency: 2}}}, 5, bounds.StrategyCapacity},
		{"a member without ceiling leaves the tier unbounded", admission.Config{
			Members: []admission.MemberConfig{{ID: "a", MaxConcurrency: 3}, {ID: "b"}}}, 0, bounds.StrategyRoundRobin},
		{"explicit round robin", admission.Config{Strategy: bounds.StrategyRoundRobin, Members: members(0, "a", "b")}, 0, bounds.StrategyRoundRobin},
		{"direct with member ceiling", admission.Config{Members: members(7, "a")}, 7, ""},
		{"direct unbounded", admission.Config{Members: members(0, "a")}, 0, ""},
		{"direct with tier ceiling", admission.Config{MaxConcurrency: 2, Members: members(7, "a")}, 2, ""},
		{"bounds accepted", admission.Config{MaxConcurrency: 100_000, Strategy: bounds.StrategyCapacity, Members: members(100_000, ids(16)...)}, 100_000, bounds.StrategyCapacity},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			s := newTier(t, tt.cfg).Snapshot()
			if s.Ceiling != tt.wantCeiling || s.Strategy != tt.wantStrategy {
				t.Fatalf("Snapshot() ceiling %d strategy %q, want %d %q", s.Ceiling, s.Strategy, tt.wantCeiling, tt.wantStrategy)
			}
		})
	}
}

func TestNewCopiesAndSortsMembers(t *testing.T) {
	cfg := admission.Config{Members: []admission.MemberConfig{{ID: "c", MaxConcurrency: 3}, {ID: "a", MaxConcurrency: 1}, {ID: "b", MaxConcurrency: 2}}}
	tier := newTier(t, cfg)
	cfg.Members[0].MaxConcurrency, cfg.Members[1].ID = 99, "z"
	want := []admission.MemberSnapshot{
		{ID: "a", Ceiling: 1, Phase: admission.PhaseAdmitting},
		{ID: "b", Ceiling: 2, Phase: admission.PhaseAdmitting},
		{ID: "c", Ceiling: 3, Phase: admission.PhaseAdmitting},
	}
	if got := tier.Snapshot().Members; !reflect.DeepEqual(got, want) {
		t.Fatalf("Snapshot().Members = %+v, want %+v", got, want)
	}
}

func TestValidReason(t *testing.T) {
	long := "a123456789012345678901234567890123456789012345678901234567890bc" // 63
	for _, r := range []string{"a", "0", "driver-upgrade", "a-", long} {
		if !admission.ValidReason(r) {
			t.Errorf("ValidReason(%q) = false, want true", r)
		}
	}
	for _, r := range []string{"", "-a", "Upgrade", "a b", "a_b", long + "d"} {
		if admission.ValidReason(r) {
			t.Errorf("ValidReason(%q) = true, want false", r)
		}
	}
}
