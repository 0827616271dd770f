package status

import (
	"cmp"
	"slices"
	"sync"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/router"
	"github.com/sluice-dev/sluice/internal/source"
)

// Report is the router-owned status of one tier.
type Report struct {
	// Namespace is the tier's namespace.
	Namespace string
	// Name is the tier's name.
	Name string
	// AppliedGeneration is the generation the router applies; it becomes
	// status.router.appliedGeneration.
	AppliedGeneration int64
	// Members are the applied members with their readiness and effective
	// phase, sorted by id; they become status.members.
	Members []v1alpha1.MemberStatus
}

// Key is the tier's namespace/name.
func (r Report) Key() string { return r.Namespace + "/" + r.Name }

// equal reports whether two reports say the same.
func (r Report) equal(o Report) bool {
	return r.Namespace == o.Namespace && r.Name == o.Name && r.AppliedGeneration == o.AppliedGeneration &&
		slices.Equal(r.Members, o.Members)
}

// View is what a Reporter reports.
type View interface {
	// Reports returns the current report of every served tier, sorted by
	// key. It must not wait for I/O.
	Reports() []Report
}

// RouterView is the View of one router: the tiers of the last applied
// source.Snapshot that carry a generation (the kube source's), with each
// applied member's readiness and admission phase read from the router's
// capacity view. Removed members still holding leases are not reported:
// status.members lists the members of the applied generation. It is safe for
// concurrent use.
type RouterView struct {
	capacity func() router.CapacityView

	mu      sync.Mutex
	applied []appliedTier // sorted by key.
}

// appliedTier is what RouterView remembers of one applied tier.
type appliedTier struct {
	key, namespace, name string
	generation           int64
	members              []string // sorted ids.
}

// NewRouterView returns a RouterView reading capacity, normally
// (*router.Admin).Capacity. It reports nothing until Applied is called.
func NewRouterView(capacity func() router.CapacityView) *RouterView {
	return &RouterView{capacity: capacity}
}

// Applied records the snapshot the router has just applied. Call it after
// router.Router.Apply returned, then Reporter.Notify.
func (v *RouterView) Applied(s source.Snapshot) {
	applied := make([]appliedTier, 0, len(s.Tiers))
	for _, t := range s.Tiers {
		if t.Generation == 0 {
			continue // files mode: there is no object to report on.
		}
		at := appliedTier{key: t.Key, namespace: t.Namespace, name: t.Name, generation: t.Generation}
		for _, m := range t.Spec.Members {
			at.members = append(at.members, m.ID)
		}
		slices.Sort(at.members)
		applied = append(applied, at)
	}
	slices.SortFunc(applied, func(a, b appliedTier) int { return cmp.Compare(a.key, b.key) })
	v.mu.Lock()
	v.applied = applied
	v.mu.Unlock()
}

// Reports returns one report per applied tier the router serves, sorted by
// key. A tier the router does not serve (its configuration could not be
// applied) is left out.
func (v *RouterView) Reports() []Report {
	v.mu.Lock()
	applied := v.applied
	v.mu.Unlock()
	if len(applied) == 0 {
		return nil
	}
	byTier := map[string]*router.TierCapacity{}
	view := v.capacity()
	for i := range view.Tiers {
		if tc := &view.Tiers[i]; !tc.Removed {
			byTier[tc.Tier] = tc
		}
	}
	out := make([]Report, 0, len(applied))
	for _, at := range applied {
		tc := byTier[at.key]
		if tc == nil {
			continue
		}
		r := Report{Namespace: at.namespace, Name: at.name, AppliedGeneration: at.generation,
			Members: make([]v1alpha1.MemberStatus, 0, len(at.members))}
		for _, mc := range tc.Members {
			if _, ok := slices.BinarySearch(at.members, mc.ID); !ok || mc.State == "removed" {
				continue
			}
			r.Members = append(r.Members, v1alpha1.MemberStatus{ID: mc.ID, Ready: mc.Ready, Phase: v1alpha1.MemberPhase(mc.Phase)})
		}
		out = append(out, r)
	}
	return out
}
