package status

import (
	"reflect"
	"testing"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/api/v1alpha1/validationtable"
	"github.com/sluice-dev/sluice/internal/router"
	"github.com/sluice-dev/sluice/internal/source"
)

// snapshot returns a snapshot of one two-member tier at generation gen,
// with quiesce.
func snapshot(gen int64, quiesce *v1alpha1.QuiesceSpec) source.Snapshot {
	t := validationtable.Base()
	v1alpha1.Default(t)
	t.Spec.Quiesce = quiesce
	return source.Snapshot{Tiers: []source.Tier{{
		Key: "default/llama", Namespace: "default", Name: "llama", Generation: gen, Spec: t.Spec,
	}}}
}

func TestRouterViewFromARouter(t *testing.T) {
	rt := router.New(router.Options{})
	admin := router.NewAdmin(rt, router.AdminOptions{})
	v := NewRouterView(admin.Capacity)
	if got := v.Reports(); len(got) != 0 {
		t.Fatalf("reports before Applied: %+v", got)
	}

	s := snapshot(4, &v1alpha1.QuiesceSpec{Members: map[string]v1alpha1.QuiesceReason{"gpu1": "maintenance"}})
	rt.Apply(s)
	v.Applied(s)
	want := []Report{{Namespace: "default", Name: "llama", AppliedGeneration: 4, Members: []v1alpha1.MemberStatus{
		{ID: "gpu0", Ready: true, Phase: v1alpha1.MemberAdmitting},
		{ID: "gpu1", Ready: true, Phase: v1alpha1.MemberDrained},
	}}}
	if got := v.Reports(); !reflect.DeepEqual(got, want) {
		t.Fatalf("reports = %+v, want %+v", got, want)
	}

	// Tier quiesce makes every member Drained (no request in flight).
	s = snapshot(5, &v1alpha1.QuiesceSpec{Tier: "maintenance"})
	rt.Apply(s)
	v.Applied(s)
	got := v.Reports()
	if len(got) != 1 || got[0].AppliedGeneration != 5 || got[0].Members[0].Phase != v1alpha1.MemberDrained ||
		got[0].Members[1].Phase != v1alpha1.MemberDrained {
		t.Fatalf("reports = %+v", got)
	}

	// Files-mode tiers (generation zero) are not reported.
	s = snapshot(0, nil)
	rt.Apply(s)
	v.Applied(s)
	if got := v.Reports(); len(got) != 0 {
		t.Fatalf("files-mode reports = %+v", got)
	}
}

func TestRouterViewProjection(t *testing.T) {
	capacity := router.CapacityView{Tiers: []router.TierCapacity{
		{Tier: "default/llama", Members: []router.MemberCapacity{
			{ID: "gpu0", Ready: true, Phase: "Draining", State: "quiesced", Active: 1},
			{ID: "gpu1", Ready: false, Phase: "Admitting", State: "admitting"},
			{ID: "gpu9", Ready: false, Phase: "Draining", State: "removed", Active: 1},
		}},
		{Tier: "default/gone", Removed: true},
		{Tier: "default/unapplied"},
	}}
	v := NewRouterView(func() router.CapacityView { return capacity })
	s := snapshot(2, nil)
	s.Tiers = append(s.Tiers, source.Tier{Key: "default/missing", Namespace: "default", Name: "missing", Generation: 1})
	v.Applied(s)
	want := []Report{{Namespace: "default", Name: "llama", AppliedGeneration: 2, Members: []v1alpha1.MemberStatus{
		{ID: "gpu0", Ready: true, Phase: v1alpha1.MemberDraining},
		{ID: "gpu1", Ready: false, Phase: v1alpha1.MemberAdmitting},
	}}}
	if got := v.Reports(); !reflect.DeepEqual(got, want) {
		t.Fatalf("reports = %+v, want %+v (removed members and tiers the router does not serve are left out)", got, want)
	}
}
