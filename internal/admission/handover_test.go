package admission_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/sluice-dev/sluice/api/bounds"
	"github.com/sluice-dev/sluice/internal/admission"
)

// TestHandOverSnapshotAndChanges hands a tier with leases over: the counts
// are the members' at that instant, Acquire refuses from then on, releases
// and adoptions are queued in order, and Cancel lets the tier admit again.
func TestHandOverSnapshotAndChanges(t *testing.T) {
	tier := newTier(t, admission.Config{Members: members(2, ab...)})
	in := admission.Inputs{Ready: ready(ab)}
	l1, l2, l3 := acquire(t, tier, in), acquire(t, tier, in), acquire(t, tier, in)
	signal := make(chan struct{}, 1)
	h, counts, err := tier.HandOver(signal)
	if err != nil {
		t.Fatal(err)
	}
	want := []admission.MemberCount{{Member: "a", Active: 2}, {Member: "b", Active: 1}}
	if len(counts) != len(want) || counts[0] != want[0] || counts[1] != want[1] {
		t.Fatalf("counts = %+v, want %+v", counts, want)
	}
	if _, err := tier.Acquire(in); !errors.Is(err, admission.ErrHandedOver) || !errors.Is(err, admission.ErrTierQuiesced) {
		t.Fatalf("Acquire after HandOver = %v, want ErrHandedOver and ErrTierQuiesced", err)
	}
	if _, _, err := tier.HandOver(make(chan struct{}, 1)); !errors.Is(err, admission.ErrHandedOver) {
		t.Fatalf("second HandOver = %v, want ErrHandedOver", err)
	}
	if got := h.Take(); got != nil {
		t.Fatalf("changes before any release: %+v", got)
	}
	l2.Release()
	l2.Release()
	adopted, err := tier.Adopt("b")
	if err != nil {
		t.Fatal(err)
	}
	l1.Release()
	select {
	case <-signal:
	default:
		t.Fatal("no change signalled")
	}
	got := h.Take()
	wantChanges := []admission.Change{{Member: l2.Member(), Delta: -1}, {Member: "b", Delta: 1}, {Member: l1.Member(), Delta: -1}}
	if len(got) != len(wantChanges) {
		t.Fatalf("changes = %+v, want %+v", got, wantChanges)
	}
	for i := range got {
		if got[i] != wantChanges[i] {
			t.Fatalf("changes = %+v, want %+v", got, wantChanges)
		}
	}
	h.Cancel()
	l3.Release()
	adopted.Release()
	if got := h.Take(); got != nil {
		t.Fatalf("changes after Cancel: %+v", got)
	}
	l := acquire(t, tier, in)
	l.Release()
	if s := tier.Snapshot(); s.Active != 0 {
		t.Fatalf("after every release: %+v", s)
	}
	h.Cancel() // no longer active: nothing happens.
	if _, _, err := tier.HandOver(make(chan struct{}, 1)); err != nil {
		t.Fatalf("HandOver after Cancel = %v", err)
	}
}

// TestAdoptIgnoresCeilingsAndQuiesce adopts past a member's and the tier's
// ceilings and on a quiesced tier; Acquire then refuses until the counts
// are below the ceilings again.
func TestAdoptIgnoresCeilingsAndQuiesce(t *testing.T) {
	tier := newTier(t, admission.Config{MaxConcurrency: 2, Members: members(1, ab...)})
	in := admission.Inputs{Ready: ready(ab)}
	if err := tier.Quiesce(admission.Scope{}, "maintenance"); err != nil {
		t.Fatal(err)
	}
	var leases []*admission.Lease
	for range 3 {
		l, err := tier.Adopt("a")
		if err != nil {
			t.Fatalf("Adopt = %v", err)
		}
		leases = append(leases, l)
	}
	if s := tier.Snapshot(); s.Active != 3 || activeOf(tier, "a") != 3 {
		t.Fatalf("after three adoptions: %+v", s)
	}
	if err := tier.Readmit(admission.Scope{}); err != nil {
		t.Fatal(err)
	}
	if _, err := tier.Acquire(in); !errors.Is(err, admission.ErrTierFull) {
		t.Fatalf("Acquire over the tier ceiling = %v, want ErrTierFull", err)
	}
	leases[0].Release()
	leases[1].Release()
	if l := acquire(t, tier, in); l.Member() != "b" {
		t.Fatalf("Acquire picked %q, want b (a is over its ceiling)", l.Member())
	}
	for _, l := range leases {
		l.Release()
	}
}

// TestAdoptUnknownMember refuses a member outside the tier, and a member
// removed by a reconfiguration, changing nothing.
func TestAdoptUnknownMember(t *testing.T) {
	tier := newTier(t, admission.Config{Members: members(0, ab...)})
	held := acquire(t, tier, admission.Inputs{Ready: map[string]bool{"a": true, "b": false}})
	if err := tier.Reconfigure(admission.Config{Members: members(0, "b")}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"zz", "a"} {
		if _, err := tier.Adopt(id); !errors.Is(err, admission.ErrUnknownMember) {
			t.Fatalf("Adopt(%q) = %v, want ErrUnknownMember", id, err)
		}
	}
	if s := tier.Snapshot(); s.Active != 1 || activeOf(tier, "a") != 1 {
		t.Fatalf("after refused adoptions: %+v", s)
	}
	held.Release()
}

// TestHandOverExactUnderConcurrency installs the handover while goroutines
// acquire and release: the returned counts plus every queued change equal
// the tier's counts once they stopped, member by member.
func TestHandOverExactUnderConcurrency(t *testing.T) {
	const (
		workers = 8   // goroutines acquiring and releasing.
		rounds  = 500 // acquire/release pairs each, bounding the test.
	)
	all := ids(4)
	tier := newTier(t, admission.Config{Strategy: bounds.StrategyRoundRobin, Members: members(3, all...)})
	in := admission.Inputs{Ready: ready(all)}
	start := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var held []*admission.Lease // kept past the handover, released after it.
	for w := range workers {
		wg.Go(func() {
			<-start
			for i := range rounds {
				l, err := tier.Acquire(in)
				if err != nil {
					continue
				}
				if (w+i)%7 == 0 {
					mu.Lock()
					held = append(held, l)
					mu.Unlock()
					continue
				}
				l.Release()
			}
		})
	}
	close(start)
	h, counts, err := tier.HandOver(make(chan struct{}, 1))
	if err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	sum := map[string]int{}
	for _, c := range counts {
		sum[c.Member] += c.Active
	}
	for _, c := range h.Take() {
		sum[c.Member] += c.Delta
	}
	for _, id := range all {
		if got := sum[id]; got != activeOf(tier, id) {
			t.Errorf("member %s before the last releases: counts plus changes = %d, tier has %d", id, got, activeOf(tier, id))
		}
	}
	for _, l := range held {
		l.Release()
	}
	for _, c := range h.Take() {
		sum[c.Member] += c.Delta
	}
	for _, id := range all {
		if got := sum[id]; got != 0 || activeOf(tier, id) != 0 {
			t.Errorf("member %s after every release: counts plus changes = %d, tier has %d, want 0", id, got, activeOf(tier, id))
		}
	}
}
