package admission_test

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/sluice-dev/sluice/api/bounds"
	"github.com/sluice-dev/sluice/internal/admission"
	"github.com/sluice-dev/sluice/internal/scheduler"
)

var ab = []string{"a", "b"}

func capacityTier(t testing.TB, ceiling int, memberIDs ...string) *admission.Tier {
	return newTier(t, admission.Config{Strategy: bounds.StrategyCapacity, Members: members(ceiling, memberIDs...)})
}

// TestAcquireDecisive replays the acceptance sequence through the admission
// owner: loads 0/2 and 1/2 both fresh select the first; after that
// reservation the loads are equal and the next selection goes to the other.
func TestAcquireDecisive(t *testing.T) {
	tier := capacityTier(t, 2, ab...)
	pressure := map[string]scheduler.Pressure{"a": fresh(0), "b": fresh(0)}
	// Load b to 1/2: only b is ready. The cursor moves past b, back to a.
	hold := acquire(t, tier, admission.Inputs{Ready: ready(ab, "a"), Pressure: pressure})
	defer hold.Release()

	first := acquire(t, tier, admission.Inputs{Ready: ready(ab), Pressure: pressure})
	defer first.Release()
	if first.Member() != "a" {
		t.Fatalf("loads 0/2 and 1/2: selected %q, want a", first.Member())
	}
	want := &scheduler.Decision{
		SelectedMemberID: "a", Reason: scheduler.ReasonSelected, EligibleIDs: []string{"a", "b"},
		Scores: []scheduler.Score{
			{MemberID: "a", LocalActive: 0, LocalCapacity: 2, UpstreamFreshness: scheduler.FreshnessFresh, RotatingRank: 0},
			{MemberID: "b", LocalActive: 1, LocalCapacity: 2, UpstreamFreshness: scheduler.FreshnessFresh, RotatingRank: 1},
		},
	}
	if got := first.Selection(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Selection() = %+v, want %+v", got, want)
	}

	second := acquire(t, tier, admission.Inputs{Ready: ready(ab), Pressure: pressure})
	defer second.Release()
	if second.Member() != "b" {
		t.Fatalf("loads 1/2 and 1/2 after selecting a: selected %q, want b", second.Member())
	}
}

func TestAcquireUpstreamCases(t *testing.T) {
	tests := []struct {
		desc     string
		preload  string // member loaded to 1/2 first, with the cursor on it.
		pressure map[string]scheduler.Pressure
		want     string
	}{
		{"unknown 0/2 beats fresh 1/2", "b", map[string]scheduler.Pressure{"b": fresh(0)}, "a"},
		{"fresh 0 ppm beats absent (unknown) at 0/2", "", map[string]scheduler.Pressure{"b": fresh(0)}, "b"},
		{"fresh 0 ppm beats explicit unknown at 0/2", "", map[string]scheduler.Pressure{"a": scheduler.UnknownPressure(), "b": fresh(0)}, "b"},
		{"lower ppm wins at equal load", "", map[string]scheduler.Pressure{"a": fresh(900), "b": fresh(100)}, "b"},
		{"all unknown: rotation from the cursor", "", nil, "a"},
		{"all unknown: local ratio first", "a", nil, "b"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			tier := capacityTier(t, 2, ab...)
			if tt.preload != "" {
				// Load the preloaded member to 1/2 and leave the cursor on it,
				// so that rotation alone would pick it.
				other := map[string]string{"a": "b", "b": "a"}[tt.preload]
				defer acquire(t, tier, admission.Inputs{Ready: ready(ab, other)}).Release()
				acquire(t, tier, admission.Inputs{Ready: ready(ab, tt.preload)}).Release()
			}
			l := acquire(t, tier, admission.Inputs{Ready: ready(ab), Pressure: tt.pressure})
			defer l.Release()
			if l.Member() != tt.want {
				t.Fatalf("selected %q, want %q (selection %+v)", l.Member(), tt.want, l.Selection())
			}
		})
	}
}

func TestSelectionIsACopy(t *testing.T) {
	tier := capacityTier(t, 2, ab...)
	l := acquire(t, tier, admission.Inputs{Ready: ready(ab)})
	defer l.Release()
	got := l.Selection()
	got.EligibleIDs[0], got.Scores[0].LocalActive, got.SelectedMemberID = "zz", 99, "zz"
	if again := l.Selection(); again.SelectedMemberID != "a" || again.EligibleIDs[0] != "a" || again.Scores[0].LocalActive != 0 {
		t.Fatalf("Selection() changed through an earlier copy: %+v", again)
	}
	if err := l.Selection().Validate(); err != nil {
		t.Fatalf("Selection().Validate() = %v", err)
	}
}

func TestSelectionNilWithoutCapacity(t *testing.T) {
	for _, cfg := range []admission.Config{
		{Members: members(2, ab...)},
		{Members: members(2, "a")},
	} {
		tier := newTier(t, cfg)
		l := acquire(t, tier, admission.Inputs{Ready: ready([]string{"a", "b"}[:len(cfg.Members)])})
		if l.Selection() != nil {
			t.Errorf("%+v: Selection() = %+v, want nil", cfg, l.Selection())
		}
		l.Release()
	}
}

// TestAcquireFairness acquires and releases k·N times on a tier of idle,
// equal members and expects every member selected exactly k times.
func TestAcquireFairness(t *testing.T) {
	const k = 7
	for _, strategy := range []bounds.Strategy{bounds.StrategyRoundRobin, bounds.StrategyCapacity} {
		for _, n := range []int{2, 4, 16} {
			t.Run(fmt.Sprintf("%s/%d", strategy, n), func(t *testing.T) {
				all := ids(n)
				tier := newTier(t, admission.Config{Strategy: strategy, Members: members(3, all...)})
				pressure := map[string]scheduler.Pressure{}
				for _, id := range all {
					pressure[id] = fresh(500)
				}
				count := map[string]int{}
				for range k * n {
					l := acquire(t, tier, admission.Inputs{Ready: ready(all), Pressure: pressure})
					count[l.Member()]++
					l.Release()
				}
				for _, id := range all {
					if count[id] != k {
						t.Errorf("member %s selected %d times, want %d", id, count[id], k)
					}
				}
			})
		}
	}
}

func TestRoundRobinRotation(t *testing.T) {
	all := []string{"a", "b", "c"}
	tier := newTier(t, admission.Config{Members: []admission.MemberConfig{{ID: "a", MaxConcurrency: 1}, {ID: "b"}, {ID: "c"}}})
	var got []string
	hold := acquire(t, tier, admission.Inputs{Ready: ready(all)}) // a, now full.
	got = append(got, hold.Member())
	for range 4 {
		l := acquire(t, tier, admission.Inputs{Ready: ready(all, "c")})
		got = append(got, l.Member())
		l.Release()
	}
	hold.Release()
	if err := tier.Quiesce(admission.MemberScope("b"), "maintenance"); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		l := acquire(t, tier, admission.Inputs{Ready: ready(all)})
		got = append(got, l.Member())
		l.Release()
	}
	// a (full) and c (not ready) are skipped, then b (quiesced) is skipped.
	want := []string{"a", "b", "b", "b", "b", "c", "a", "c"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("selections = %v, want %v", got, want)
	}
}

func TestAcquireRefusals(t *testing.T) {
	type setup func(t *testing.T, tier *admission.Tier) []*admission.Lease
	tests := []struct {
		desc     string
		strategy bounds.Strategy
		tierMax  int
		setup    setup
		ready    map[string]bool
		want     error
	}{
		{desc: "tier quiesced", ready: ready(ab), want: admission.ErrTierQuiesced,
			setup: func(t *testing.T, tier *admission.Tier) []*admission.Lease {
				return nil2(tier.Quiesce(admission.TierScope(), "upgrade"), t)
			}},
		{desc: "tier at its ceiling", tierMax: 1, ready: ready(ab), want: admission.ErrTierFull,
			setup: func(t *testing.T, tier *admission.Tier) []*admission.Lease {
				return []*admission.Lease{acquire(t, tier, admission.Inputs{Ready: ready(ab)})}
			}},
		{desc: "every open member at its ceiling", ready: ready(ab), want: admission.ErrTierFull,
			setup: func(t *testing.T, tier *admission.Tier) []*admission.Lease {
				return []*admission.Lease{acquire(t, tier, admission.Inputs{Ready: ready(ab)}), acquire(t, tier, admission.Inputs{Ready: ready(ab)})}
			}},
		{desc: "open member full, other not ready", ready: ready(ab, "b"), want: admission.ErrTierFull,
			setup: func(t *testing.T, tier *admission.Tier) []*admission.Lease {
				return []*admission.Lease{acquire(t, tier, admission.Inputs{Ready: ready(ab, "b")})}
			}},
		{desc: "nothing ready", ready: ready(ab, "a", "b"), want: admission.ErrNoEligibleMember},
		{desc: "every member quiesced", ready: ready(ab), want: admission.ErrNoEligibleMember,
			setup: func(t *testing.T, tier *admission.Tier) []*admission.Lease {
				return nil2(errors.Join(tier.Quiesce(admission.MemberScope("a"), "x"), tier.Quiesce(admission.MemberScope("b"), "y")), t)
			}},
		{desc: "one quiesced, other not ready", ready: ready(ab, "b"), want: admission.ErrNoEligibleMember,
			setup: func(t *testing.T, tier *admission.Tier) []*admission.Lease {
				return nil2(tier.Quiesce(admission.MemberScope("a"), "x"), t)
			}},
	}
	for _, tt := range tests {
		for _, strategy := range []bounds.Strategy{bounds.StrategyRoundRobin, bounds.StrategyCapacity} {
			t.Run(fmt.Sprintf("%s/%s", tt.desc, strategy), func(t *testing.T) {
				tier := newTier(t, admission.Config{Strategy: strategy, MaxConcurrency: tt.tierMax, Members: members(1, ab...)})
				var held []*admission.Lease
				if tt.setup != nil {
					held = tt.setup(t, tier)
				}
				before := tier.Snapshot()
				l, err := tier.Acquire(admission.Inputs{Ready: tt.ready})
				if !errors.Is(err, tt.want) || l != nil {
					t.Fatalf("Acquire() = %v, %v; want nil, %v", l, err, tt.want)
				}
				if after := tier.Snapshot(); !reflect.DeepEqual(after, before) {
					t.Fatalf("refusal changed the tier: %+v -> %+v", before, after)
				}
				for _, l := range held {
					l.Release()
				}
			})
		}
	}
}

// nil2 fails the test on err and returns no leases.
func nil2(err error, t *testing.T) []*admission.Lease {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	return nil
}

func TestDirectTier(t *testing.T) {
	tier := newTier(t, admission.Config{Members: members(2, "solo")})
	in := admission.Inputs{Ready: ready([]string{"solo"})}
	l1, l2 := acquire(t, tier, in), acquire(t, tier, in)
	if l1.Member() != "solo" || l2.Member() != "solo" {
		t.Fatalf("members = %q, %q", l1.Member(), l2.Member())
	}
	if _, err := tier.Acquire(in); !errors.Is(err, admission.ErrTierFull) {
		t.Fatalf("third Acquire() = %v, want ErrTierFull", err)
	}
	l1.Release()
	l2.Release()
	if _, err := tier.Acquire(admission.Inputs{Ready: map[string]bool{"solo": false}}); !errors.Is(err, admission.ErrNoEligibleMember) {
		t.Fatalf("Acquire() on an unready direct member = %v, want ErrNoEligibleMember", err)
	}

	unbounded := newTier(t, admission.Config{Members: members(0, "solo")})
	for range 1000 {
		acquire(t, unbounded, in)
	}
	if s := unbounded.Snapshot(); s.Active != 1000 || s.Ceiling != 0 {
		t.Fatalf("unbounded direct tier: active %d ceiling %d", s.Active, s.Ceiling)
	}
}

func TestAcquireInvalidInput(t *testing.T) {
	badFresh := fresh(-1)
	badClass := scheduler.UnknownPressure()
	badClass.Freshness = scheduler.Freshness(5)
	tests := []struct {
		desc string
		in   admission.Inputs
	}{
		{"nil readiness", admission.Inputs{}},
		{"missing readiness entry", admission.Inputs{Ready: map[string]bool{"a": true, "c": true}}},
		{"unknown member in readiness", admission.Inputs{Ready: map[string]bool{"a": true, "b": true, "c": true, "z": true}}},
		{"unknown member in pressure", admission.Inputs{Ready: ready([]string{"a", "b", "c"}), Pressure: map[string]scheduler.Pressure{"z": fresh(1)}}},
		{"fresh with negative ppm", admission.Inputs{Ready: ready([]string{"a", "b", "c"}), Pressure: map[string]scheduler.Pressure{"b": badFresh}}},
		{"unknown freshness string", admission.Inputs{Ready: ready([]string{"a", "b", "c"}), Pressure: map[string]scheduler.Pressure{"c": badClass}}},
		{"zero pressure value", admission.Inputs{Ready: ready([]string{"a", "b", "c"}), Pressure: map[string]scheduler.Pressure{"a": {}}}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			all := []string{"a", "b", "c"}
			cfg := admission.Config{Strategy: bounds.StrategyCapacity, Members: members(3, all...)}
			tier, twin := newTier(t, cfg), newTier(t, cfg)
			// Move both cursors to b and give both one lease on a.
			for _, x := range []*admission.Tier{tier, twin} {
				acquire(t, x, admission.Inputs{Ready: ready(all, "b", "c")})
			}
			before := tier.Snapshot()
			l, err := tier.Acquire(tt.in)
			if !errors.Is(err, admission.ErrInvalidInput) || l != nil {
				t.Fatalf("Acquire() = %v, %v; want nil, ErrInvalidInput", l, err)
			}
			if after := tier.Snapshot(); !reflect.DeepEqual(after, before) {
				t.Fatalf("invalid input changed the tier: %+v -> %+v", before, after)
			}
			// The next decision is the one the untouched twin makes.
			got := acquire(t, tier, admission.Inputs{Ready: ready(all)}).Selection()
			want := acquire(t, twin, admission.Inputs{Ready: ready(all)}).Selection()
			if !reflect.DeepEqual(got, want) || got.SelectedMemberID != "b" {
				t.Fatalf("next decision %+v, want %+v selecting b", got, want)
			}
		})
	}
}

func TestRoundRobinIgnoresPressure(t *testing.T) {
	tier := newTier(t, admission.Config{Members: members(1, ab...)})
	l, err := tier.Acquire(admission.Inputs{Ready: ready(ab), Pressure: map[string]scheduler.Pressure{"z": {}}})
	if err != nil {
		t.Fatalf("Acquire() = %v, want pressure ignored on a RoundRobin tier", err)
	}
	l.Release()
	if _, err := tier.Acquire(admission.Inputs{Ready: map[string]bool{"a": true}}); !errors.Is(err, admission.ErrInvalidInput) {
		t.Fatalf("Acquire() without readiness for b = %v, want ErrInvalidInput", err)
	}
}

func TestAcquireDoesNotKeepInputs(t *testing.T) {
	tier := capacityTier(t, 2, ab...)
	in := admission.Inputs{Ready: ready(ab), Pressure: map[string]scheduler.Pressure{"a": fresh(9), "b": fresh(1)}}
	l := acquire(t, tier, in)
	defer l.Release()
	want := l.Selection()
	in.Ready["b"] = false
	in.Pressure["b"] = fresh(999)
	if got := l.Selection(); !reflect.DeepEqual(got, want) || got.SelectedMemberID != "b" {
		t.Fatalf("Selection() after changing the inputs = %+v, want %+v", got, want)
	}
}
