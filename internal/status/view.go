package status

import (
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/adminapi"
)

// Report is the router-owned status of one tier.
type Report struct {
	// Namespace is the tier's namespace.
	Namespace string
	// Name is the tier's name.
	Name string
	// AppliedGeneration is the generation whose configuration the router
	// has in force, zero when none; it becomes
	// status.router.appliedGeneration.
	AppliedGeneration int64
	// ApplyError, when set, is the generation the router could not apply
	// and why; it becomes status.router.applyError.
	ApplyError *v1alpha1.ApplyError
	// Members are the applied members with their readiness and effective
	// phase, sorted by id; they become status.members.
	Members []v1alpha1.MemberStatus
	// Queue is the admission queue of the configuration in force; nil when
	// it has none. It becomes status.queue.
	Queue *v1alpha1.QueueStatus
}

// Key is the tier's namespace/name.
func (r Report) Key() string { return r.Namespace + "/" + r.Name }

// equal reports whether two reports say the same.
func (r Report) equal(o Report) bool {
	return r.sameButQueueLoad(o) && (r.Queue == nil || *r.Queue == *o.Queue)
}

// sameButQueueLoad reports whether two reports say the same except,
// perhaps, for their queue's load (waiting and oldestWaitSeconds): the
// change the Reporter writes at most once per QueueStatusInterval. A queue
// that appears, disappears or changes its bound is a configuration change.
func (r Report) sameButQueueLoad(o Report) bool {
	return r.Namespace == o.Namespace && r.Name == o.Name && r.AppliedGeneration == o.AppliedGeneration &&
		(r.ApplyError == nil) == (o.ApplyError == nil) && (r.ApplyError == nil || *r.ApplyError == *o.ApplyError) &&
		slices.Equal(r.Members, o.Members) &&
		(r.Queue == nil) == (o.Queue == nil) && (r.Queue == nil || r.Queue.MaxRequests == o.Queue.MaxRequests)
}

// View is what a Reporter reports.
type View interface {
	// Reports returns the current report of every served tier, sorted by
	// key. It must not wait for I/O.
	Reports() []Report
}

// RouterState is what a RouterView reads from the router; *adminserver.Admin
// implements it. Neither method may wait.
type RouterState interface {
	// Capacity returns the admission state, readiness and phase of every
	// served tier's members.
	Capacity() adminapi.CapacityView
	// Applied returns the generation and members in force of every tier of
	// the last applied snapshot, and why a tier's latest configuration was
	// not applied.
	Applied() []adminapi.AppliedTier
}

// RouterView is the View of one router. It reports every tier the router
// applies or failed to apply that carries a generation (the kube source's):
// the generation actually in force (tiers.Set.Applied, never the
// snapshot's, so a generation that failed to apply is never claimed), the
// generation that failed and why, each member of the configuration in
// force with its readiness and admission phase from the capacity view, and
// the tier's admission queue from the capacity view (its bound, the
// requests waiting and the oldest wait, timed by the router's clock).
// Removed members still holding leases are not reported: status.members
// lists the members of the applied generation. It is safe for concurrent
// use.
type RouterView struct {
	router RouterState
}

// NewRouterView returns a RouterView reading r, normally the router's
// *adminserver.Admin.
func NewRouterView(r RouterState) *RouterView {
	return &RouterView{router: r}
}

// Reports returns one report per tier the router applies or failed to
// apply, sorted by key. Files-mode tiers (no generation) are left out, and
// so is a served tier the capacity view does not show (yet).
func (v *RouterView) Reports() []Report {
	applied := v.router.Applied()
	if len(applied) == 0 {
		return nil
	}
	byTier := map[string]*adminapi.TierCapacity{}
	view := v.router.Capacity()
	for i := range view.Tiers {
		if tc := &view.Tiers[i]; !tc.Removed {
			byTier[tc.Tier] = tc
		}
	}
	out := make([]Report, 0, len(applied))
	for _, at := range applied {
		if at.Generation == 0 && at.FailedGeneration == 0 {
			continue // files mode: there is no object to report on.
		}
		r := Report{Namespace: at.Namespace, Name: at.Name, AppliedGeneration: at.Generation,
			Members: make([]v1alpha1.MemberStatus, 0, len(at.Members))}
		if at.ApplyError != "" && at.FailedGeneration > 0 {
			r.ApplyError = &v1alpha1.ApplyError{Generation: at.FailedGeneration,
				Message: truncateMessage(at.ApplyError, v1alpha1.MaxApplyErrorMessageLength)}
		}
		if at.Generation > 0 {
			tc := byTier[at.Key]
			if tc == nil {
				continue
			}
			for _, mc := range tc.Members {
				if _, ok := slices.BinarySearch(at.Members, mc.ID); !ok || mc.State == "removed" {
					continue
				}
				r.Members = append(r.Members, v1alpha1.MemberStatus{ID: mc.ID, Ready: mc.Ready, Phase: v1alpha1.MemberPhase(mc.Phase)})
			}
			r.Queue = queueStatus(tc.Queue)
		}
		out = append(out, r)
	}
	return out
}

// queueStatus projects a tier's queue in the capacity view: nil when the
// tier has none, the oldest wait rounded down to whole seconds. Every number
// is clamped to the API's bounds, so a report never fails validation (the
// wait of a request whose deadline fires late may pass the longest
// maxWait by a moment).
func queueStatus(q adminapi.TierQueue) *v1alpha1.QueueStatus {
	if q.MaxRequests == nil {
		return nil
	}
	return &v1alpha1.QueueStatus{
		MaxRequests:       int32(min(max(*q.MaxRequests, 1), v1alpha1.MaxQueueRequests)),                   //nolint:gosec // clamped to the API's bounds.
		Waiting:           int32(min(max(q.Waiting, 0), v1alpha1.MaxQueueRequests)),                        //nolint:gosec // clamped to the API's bounds.
		OldestWaitSeconds: int32(min(max(q.OldestWaitMillis/1000, 0), v1alpha1.MaxQueueOldestWaitSeconds)), //nolint:gosec // clamped to the API's bounds.
	}
}

// truncateMessage returns s cut to at most n bytes on a rune boundary,
// ending in "..." when cut; invalid UTF-8 in s is replaced first, so the
// result is always valid UTF-8.
func truncateMessage(s string, n int) string {
	const ellipsis = "..."
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	cut := n - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}
