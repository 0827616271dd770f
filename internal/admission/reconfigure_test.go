package admission_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/sluice-dev/sluice/api/bounds"
	"github.com/sluice-dev/sluice/internal/admission"
)

func rr(ceiling int, memberIDs ...string) admission.Config {
	return admission.Config{Members: members(ceiling, memberIDs...)}
}

func mustReconfigure(t *testing.T, tier *admission.Tier, cfg admission.Config) {
	t.Helper()
	if err := tier.Reconfigure(cfg); err != nil {
		t.Fatalf("Reconfigure(%+v) = %v", cfg, err)
	}
}

func TestReconfigureKeepsRetainedCounts(t *testing.T) {
	all := []string{"a", "b", "c"}
	tier := newTier(t, rr(5, all...))
	la, lb := leaseOn(t, tier, all, "a"), leaseOn(t, tier, all, "b")
	if err := tier.Quiesce(admission.MemberScope("a"), "disk"); err != nil {
		t.Fatal(err)
	}
	mustReconfigure(t, tier, rr(7, "a", "b", "d"))
	s := tier.Snapshot()
	want := []admission.MemberSnapshot{
		{ID: "a", Active: 1, Ceiling: 7, Quiesced: true, Reason: "disk", Draining: true, Phase: admission.PhaseDraining},
		{ID: "b", Active: 1, Ceiling: 7, Phase: admission.PhaseAdmitting},
		{ID: "d", Ceiling: 7, Phase: admission.PhaseAdmitting},
	}
	if !reflect.DeepEqual(s.Members, want) || s.Active != 2 || s.Ceiling != 21 {
		t.Fatalf("after reconfigure: %+v", s)
	}
	la.Release()
	lb.Release()
	if s := tier.Snapshot(); s.Active != 0 {
		t.Fatalf("after releases: %+v", s)
	}
}

func TestReconfigureRemovedMember(t *testing.T) {
	all := []string{"a", "b", "c"}
	tier := newTier(t, rr(5, all...))
	c1, c2 := leaseOn(t, tier, all, "c"), leaseOn(t, tier, all, "c")
	if err := tier.Quiesce(admission.MemberScope("c"), "retire"); err != nil {
		t.Fatal(err)
	}
	mustReconfigure(t, tier, rr(5, "a", "b"))

	// The removed member is reported while it holds leases and counts
	// toward the tier.
	s := tier.Snapshot()
	checkSums(t, s)
	wantC := admission.MemberSnapshot{ID: "c", Active: 2, Ceiling: 5, Draining: true, Removed: true, Phase: admission.PhaseDraining}
	if len(s.Members) != 3 || s.Members[2] != wantC || s.Active != 2 {
		t.Fatalf("snapshot with a removed member: %+v", s)
	}
	// It never admits: inputs naming it are invalid, and it is never selected.
	if _, err := tier.Acquire(admission.Inputs{Ready: ready(all)}); !errors.Is(err, admission.ErrInvalidInput) {
		t.Fatalf("Acquire() with readiness for the removed member = %v, want ErrInvalidInput", err)
	}
	for range 4 {
		l := acquire(t, tier, admission.Inputs{Ready: ready(ab)})
		if l.Member() == "c" {
			t.Fatal("removed member selected")
		}
		l.Release()
	}
	if err := tier.Quiesce(admission.MemberScope("c"), "x"); !errors.Is(err, admission.ErrUnknownMember) {
		t.Fatalf("Quiesce(removed member) = %v, want ErrUnknownMember", err)
	}

	// Draining the removed member waits for its leases.
	done := drainAsync(t, tier, admission.MemberScope("c"))
	c1.Release()
	c1.Release()
	if got := activeOf(tier, "c"); got != 1 {
		t.Fatalf("removed member active = %d after one release, want 1", got)
	}
	c2.Release()
	if err := <-done; err != nil {
		t.Fatalf("Drain(removed member) = %v", err)
	}
	if s := tier.Snapshot(); len(s.Members) != 2 || s.Active != 0 {
		t.Fatalf("a removed member at zero must stop being reported: %+v", s)
	}
	if err := tier.Drain(canceled(), admission.MemberScope("c")); !errors.Is(err, admission.ErrUnknownMember) {
		t.Fatalf("Drain(gone member) = %v, want ErrUnknownMember", err)
	}
}

func TestReconfigureReaddedMemberResumesCount(t *testing.T) {
	all := []string{"a", "b", "c"}
	tier := newTier(t, rr(5, all...))
	l := leaseOn(t, tier, all, "c")
	if err := tier.Quiesce(admission.MemberScope("c"), "x"); err != nil {
		t.Fatal(err)
	}
	mustReconfigure(t, tier, rr(5, "a", "b"))
	mustReconfigure(t, tier, rr(1, all...))
	s := tier.Snapshot()
	if c := s.Members[2]; c.ID != "c" || c.Active != 1 || c.Removed || c.Quiesced || c.Ceiling != 1 {
		t.Fatalf("re-added member: %+v (its quiesce was dropped on removal, its count kept)", c)
	}
	// Its ceiling of 1 is taken by the old lease.
	r := map[string]bool{"a": false, "b": false, "c": true}
	if _, err := tier.Acquire(admission.Inputs{Ready: r}); !errors.Is(err, admission.ErrTierFull) {
		t.Fatalf("Acquire() on the full re-added member = %v, want ErrTierFull", err)
	}
	l.Release()
	if got := activeOf(tier, "c"); got != 0 {
		t.Fatalf("re-added member active = %d after release", got)
	}
	acquire(t, tier, admission.Inputs{Ready: r}).Release()
}

func TestReconfigureLoweredCeilings(t *testing.T) {
	tier := newTier(t, rr(3, ab...))
	var held []*admission.Lease
	for range 4 {
		held = append(held, acquire(t, tier, admission.Inputs{Ready: ready(ab)}))
	}
	mustReconfigure(t, tier, admission.Config{MaxConcurrency: 3, Members: members(1, ab...)})
	s := tier.Snapshot()
	if s.Active != 4 || s.Members[0].Active != 2 || s.Members[1].Active != 2 {
		t.Fatalf("lowering ceilings must not touch leases: %+v", s)
	}
	if _, err := tier.Acquire(admission.Inputs{Ready: ready(ab)}); !errors.Is(err, admission.ErrTierFull) {
		t.Fatalf("Acquire() above lowered ceilings = %v, want ErrTierFull", err)
	}
	for _, l := range held[:3] {
		l.Release()
	}
	// One lease left, on b: a is below its new ceiling of 1, b is not.
	l := acquire(t, tier, admission.Inputs{Ready: ready(ab)})
	if l.Member() != "a" {
		t.Fatalf("selected %q, want a (b is at its lowered ceiling)", l.Member())
	}
	if _, err := tier.Acquire(admission.Inputs{Ready: ready(ab)}); !errors.Is(err, admission.ErrTierFull) {
		t.Fatalf("Acquire() = %v, want ErrTierFull", err)
	}
	l.Release()
	held[3].Release()
	checkSums(t, tier.Snapshot())
}

func TestReconfigureCursor(t *testing.T) {
	abcd := []string{"a", "b", "c", "d"}
	tests := []struct {
		desc     string
		advance  int // acquisitions before reconfiguring; the cursor ends on abcd[advance%4].
		newIDs   []string
		wantNext string
	}{
		{"retained cursor member keeps the cursor", 2, []string{"a", "c", "d"}, "c"},
		{"retained cursor member at a new index", 2, []string{"c", "d"}, "c"},
		{"removed cursor member moves to the next id", 1, []string{"a", "c", "d"}, "c"},
		{"removed cursor member past the last id wraps", 3, []string{"a", "b", "c"}, "a"},
		{"added member before the cursor", 2, []string{"a", "aa", "b", "c", "d"}, "c"},
		{"shrink to a direct tier", 3, []string{"b"}, "b"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			tier := newTier(t, rr(5, abcd...))
			for range tt.advance {
				acquire(t, tier, admission.Inputs{Ready: ready(abcd)}).Release()
			}
			mustReconfigure(t, tier, rr(5, tt.newIDs...))
			l := acquire(t, tier, admission.Inputs{Ready: ready(tt.newIDs)})
			if l.Member() != tt.wantNext {
				t.Fatalf("next selection %q, want %q", l.Member(), tt.wantNext)
			}
		})
	}
}

func TestReconfigureInvalidChangesNothing(t *testing.T) {
	all := []string{"a", "b", "c"}
	tier := newTier(t, rr(5, all...))
	twin := newTier(t, rr(5, all...))
	for _, x := range []*admission.Tier{tier, twin} {
		acquire(t, x, admission.Inputs{Ready: ready(all)}) // cursor on b.
		if err := x.Quiesce(admission.MemberScope("c"), "x"); err != nil {
			t.Fatal(err)
		}
	}
	before := tier.Snapshot()
	bad := []admission.Config{
		{Members: members(5, "a", "a")},
		{Strategy: bounds.StrategyCapacity, Members: []admission.MemberConfig{{ID: "a", MaxConcurrency: 1}, {ID: "b"}}},
		{Strategy: bounds.StrategyRoundRobin, Members: members(5, "a")},
		{},
	}
	for _, cfg := range bad {
		if err := tier.Reconfigure(cfg); !errors.Is(err, admission.ErrInvalidConfig) {
			t.Errorf("Reconfigure(%+v) = %v, want ErrInvalidConfig", cfg, err)
		}
		if err := tier.Apply(cfg, admission.Intent{}); !errors.Is(err, admission.ErrInvalidConfig) {
			t.Errorf("Apply(%+v) = %v, want ErrInvalidConfig", cfg, err)
		}
	}
	if err := tier.Apply(rr(5, "a", "b"), admission.Intent{Members: map[string]string{"c": "x"}}); !errors.Is(err, admission.ErrUnknownMember) {
		t.Errorf("Apply() with intent for a member the new config removes = %v, want ErrUnknownMember", err)
	}
	if after := tier.Snapshot(); !reflect.DeepEqual(after, before) {
		t.Fatalf("rejected reconfigurations changed the tier: %+v -> %+v", before, after)
	}
	got := acquire(t, tier, admission.Inputs{Ready: ready(all)}).Member()
	want := acquire(t, twin, admission.Inputs{Ready: ready(all)}).Member()
	if got != want || got != "b" {
		t.Fatalf("next selection %q, twin %q, want b", got, want)
	}
}

func TestReconfigureStrategy(t *testing.T) {
	tier := newTier(t, rr(0, ab...))
	l := acquire(t, tier, admission.Inputs{Ready: ready(ab)})
	if l.Selection() != nil {
		t.Fatal("RoundRobin lease has a selection")
	}
	mustReconfigure(t, tier, admission.Config{Strategy: bounds.StrategyCapacity, Members: members(2, ab...)})
	l2 := acquire(t, tier, admission.Inputs{Ready: ready(ab)})
	if l2.Selection() == nil || l2.Member() != "b" {
		t.Fatalf("Capacity lease after reconfigure: member %q selection %+v, want b with a selection", l2.Member(), l2.Selection())
	}
	l.Release()
	l2.Release()
	if s := tier.Snapshot(); s.Strategy != bounds.StrategyCapacity || s.Active != 0 {
		t.Fatalf("snapshot: %+v", s)
	}
}

func TestApplySetsMembershipAndIntentTogether(t *testing.T) {
	tier := newTier(t, rr(5, ab...))
	if err := tier.Quiesce(admission.MemberScope("a"), "old"); err != nil {
		t.Fatal(err)
	}
	cfg := admission.Config{Strategy: bounds.StrategyCapacity, Members: members(2, "a", "b", "c")}
	if err := tier.Apply(cfg, admission.Intent{Members: map[string]string{"c": "burn-in"}}); err != nil {
		t.Fatal(err)
	}
	s := tier.Snapshot()
	got := []bool{s.Members[0].Quiesced, s.Members[1].Quiesced, s.Members[2].Quiesced}
	if !reflect.DeepEqual(got, []bool{false, false, true}) || s.Members[2].Reason != "burn-in" || s.Ceiling != 6 {
		t.Fatalf("after Apply: %+v", s)
	}
	for range 4 {
		l := acquire(t, tier, admission.Inputs{Ready: ready([]string{"a", "b", "c"})})
		if l.Member() == "c" {
			t.Fatal("member quiesced by the applied intent was admitted")
		}
		l.Release()
	}
}

func TestReconfigureWhileAcquiring(t *testing.T) {
	// Acquire validates against the membership it loaded before locking; a
	// membership change in between makes it revalidate. Alternate
	// memberships while acquiring with readiness for both ids sets: every
	// outcome is a lease on a configured member or ErrInvalidInput, and the
	// counts always reconcile.
	tier := newTier(t, rr(0, ab...))
	other := []string{"a", "b", "c"}
	stop := make(chan struct{})
	reconfigured := make(chan error, 1)
	go func() {
		defer close(reconfigured)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			cfg := rr(0, ab...)
			if i%2 == 1 {
				cfg = rr(0, other...)
			}
			if err := tier.Reconfigure(cfg); err != nil {
				reconfigured <- err
				return
			}
		}
	}()
	for range 2000 {
		in := admission.Inputs{Ready: ready(ab)}
		l, err := tier.Acquire(in)
		switch {
		case err == nil:
			l.Release()
		case !errors.Is(err, admission.ErrInvalidInput):
			t.Fatalf("Acquire() = %v", err)
		}
	}
	close(stop)
	if err := <-reconfigured; err != nil {
		t.Fatal(err)
	}
	s := tier.Snapshot()
	checkSums(t, s)
	if s.Active != 0 {
		t.Fatalf("active %d after all releases", s.Active)
	}
}

func TestRemovedMemberLeasesCountTowardTierCeiling(t *testing.T) {
	all := []string{"a", "b", "c"}
	tier := newTier(t, admission.Config{MaxConcurrency: 2, Members: members(0, all...)})
	lc := leaseOn(t, tier, all, "c")
	mustReconfigure(t, tier, admission.Config{MaxConcurrency: 2, Members: members(0, ab...)})
	la := acquire(t, tier, admission.Inputs{Ready: ready(ab)})
	if _, err := tier.Acquire(admission.Inputs{Ready: ready(ab)}); !errors.Is(err, admission.ErrTierFull) {
		t.Fatalf("Acquire() with a removed member's lease filling the tier = %v, want ErrTierFull", err)
	}
	lc.Release()
	acquire(t, tier, admission.Inputs{Ready: ready(ab)}).Release()
	la.Release()
	if s := tier.Snapshot(); s.Active != 0 || len(s.Members) != 2 {
		t.Fatalf("after releases: %+v", s)
	}
}
