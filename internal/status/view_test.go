package status

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/api/v1alpha1/validationtable"
	"github.com/sluice-dev/sluice/internal/adminapi"
	"github.com/sluice-dev/sluice/internal/adminserver"
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
	admin := adminserver.New(rt.Tiers(), adminserver.Options{})
	v := NewRouterView(admin)
	if got := v.Reports(); len(got) != 0 {
		t.Fatalf("reports before Apply: %+v", got)
	}

	s := snapshot(4, &v1alpha1.QuiesceSpec{Members: map[string]v1alpha1.QuiesceReason{"gpu1": "maintenance"}})
	rt.Tiers().Apply(s)
	want := []Report{{Namespace: "default", Name: "llama", AppliedGeneration: 4, Members: []v1alpha1.MemberStatus{
		{ID: "gpu0", Ready: true, Phase: v1alpha1.MemberAdmitting},
		{ID: "gpu1", Ready: true, Phase: v1alpha1.MemberDrained},
	}}}
	if got := v.Reports(); !reflect.DeepEqual(got, want) {
		t.Fatalf("reports = %+v, want %+v", got, want)
	}

	// Tier quiesce makes every member Drained (no request in flight).
	s = snapshot(5, &v1alpha1.QuiesceSpec{Tier: "maintenance"})
	rt.Tiers().Apply(s)
	got := v.Reports()
	if len(got) != 1 || got[0].AppliedGeneration != 5 || got[0].Members[0].Phase != v1alpha1.MemberDrained ||
		got[0].Members[1].Phase != v1alpha1.MemberDrained {
		t.Fatalf("reports = %+v", got)
	}

	// Files-mode tiers (generation zero) are not reported.
	s = snapshot(0, nil)
	rt.Tiers().Apply(s)
	if got := v.Reports(); len(got) != 0 {
		t.Fatalf("files-mode reports = %+v", got)
	}
}

// unusable returns s with its tier's first member given an endpoint the
// router cannot use. The API refuses such an endpoint (v1alpha1.Validate
// and the CRD agree with the router on every endpoint and bound), so this
// is the narrowest seam that makes an apply fail: a snapshot tier the
// source did not validate.
func unusable(s source.Snapshot) source.Snapshot {
	s.Tiers[0].Spec.Members = slices.Clone(s.Tiers[0].Spec.Members)
	s.Tiers[0].Spec.Members[0].Endpoint = "ftp://secret-host.example:21"
	return s
}

// TestRouterViewNeverClaimsAFailedGeneration applies a generation that
// fails: the report keeps the generation and members in force and names
// the failed generation and why, without the endpoint; a tier whose first
// generation fails reports generation zero; a later good generation clears
// the error.
func TestRouterViewNeverClaimsAFailedGeneration(t *testing.T) {
	rt := router.New(router.Options{})
	admin := adminserver.New(rt.Tiers(), adminserver.Options{})
	v := NewRouterView(admin)
	rt.Tiers().Apply(snapshot(4, nil))

	bad := unusable(snapshot(5, nil))
	bad.Tiers[0].Spec.Members = bad.Tiers[0].Spec.Members[:1] // also a membership change that must not show.
	rt.Tiers().Apply(bad)
	got := v.Reports()
	if len(got) != 1 {
		t.Fatalf("reports = %+v", got)
	}
	r := got[0]
	if r.AppliedGeneration != 4 || len(r.Members) != 2 {
		t.Fatalf("report after a failed apply = %+v, want generation 4 and both members still in force", r)
	}
	if r.ApplyError == nil || r.ApplyError.Generation != 5 || !strings.Contains(r.ApplyError.Message, "gpu0") ||
		strings.Contains(r.ApplyError.Message, "secret-host") || strings.Contains(r.ApplyError.Message, "ftp") {
		t.Fatalf("apply error = %+v, want generation 5 naming member gpu0 and no endpoint", r.ApplyError)
	}

	// A tier that never applied: generation zero, no members, the error.
	fresh := unusable(snapshot(1, nil))
	fresh.Tiers[0].Key, fresh.Tiers[0].Name = "default/fresh", "fresh"
	fresh.Tiers[0].Spec.Aliases = []string{"fresh"}
	rt.Tiers().Apply(source.Snapshot{Tiers: []source.Tier{bad.Tiers[0], fresh.Tiers[0]}})
	got = v.Reports()
	if len(got) != 2 || got[0].Name != "fresh" || got[1].Name != "llama" {
		t.Fatalf("reports = %+v, want fresh and llama", got)
	}
	if f := got[0]; f.AppliedGeneration != 0 || len(f.Members) != 0 || f.ApplyError == nil || f.ApplyError.Generation != 1 {
		t.Fatalf("never applied tier = %+v", f)
	}
	if got[1].AppliedGeneration != 4 || got[1].ApplyError == nil {
		t.Fatalf("llama = %+v", got[1])
	}

	// The next good generation is applied and the error is gone.
	rt.Tiers().Apply(snapshot(6, nil))
	want := []Report{{Namespace: "default", Name: "llama", AppliedGeneration: 6, Members: []v1alpha1.MemberStatus{
		{ID: "gpu0", Ready: true, Phase: v1alpha1.MemberAdmitting},
		{ID: "gpu1", Ready: true, Phase: v1alpha1.MemberAdmitting},
	}}}
	if got := v.Reports(); !reflect.DeepEqual(got, want) {
		t.Fatalf("reports = %+v, want %+v", got, want)
	}

	// Files mode: an apply error without a generation is not reported.
	files := router.New(router.Options{})
	v = NewRouterView(adminserver.New(files.Tiers(), adminserver.Options{}))
	files.Tiers().Apply(snapshot(0, nil))
	files.Tiers().Apply(unusable(snapshot(0, nil)))
	if got := v.Reports(); len(got) != 0 {
		t.Fatalf("files-mode reports = %+v", got)
	}
}

// fakeState is a RouterState the test sets.
type fakeState struct {
	capacity adminapi.CapacityView
	applied  []adminapi.AppliedTier
}

func (f fakeState) Capacity() adminapi.CapacityView { return f.capacity }
func (f fakeState) Applied() []adminapi.AppliedTier { return f.applied }

func TestRouterViewProjection(t *testing.T) {
	long := strings.Repeat("é", v1alpha1.MaxApplyErrorMessageLength) // two bytes each.
	state := fakeState{
		capacity: adminapi.CapacityView{Tiers: []adminapi.TierCapacity{
			{Tier: "default/llama", Members: []adminapi.MemberCapacity{
				{ID: "gpu0", Ready: true, Phase: "Draining", State: "quiesced", Active: 1},
				{ID: "gpu1", Ready: false, Phase: "Admitting", State: "admitting"},
				{ID: "gpu2", Ready: true, Phase: "Admitting", State: "admitting"},
				{ID: "gpu9", Ready: false, Phase: "Draining", State: "removed", Active: 1},
			}},
			{Tier: "default/gone", Removed: true},
			{Tier: "default/unapplied"},
		}},
		applied: []adminapi.AppliedTier{
			{Key: "default/gone", Namespace: "default", Name: "gone", Generation: 3, Members: []string{"gpu0"}},
			{Key: "default/llama", Namespace: "default", Name: "llama", Generation: 2, Members: []string{"gpu0", "gpu1", "gpu9"},
				ApplyError: long, FailedGeneration: 3},
		},
	}
	v := NewRouterView(state)
	got := v.Reports()
	if len(got) != 1 {
		t.Fatalf("reports = %+v, want llama only (a tier missing from the capacity view waits)", got)
	}
	want := []v1alpha1.MemberStatus{
		{ID: "gpu0", Ready: true, Phase: v1alpha1.MemberDraining},
		{ID: "gpu1", Ready: false, Phase: v1alpha1.MemberAdmitting},
	}
	if r := got[0]; r.AppliedGeneration != 2 || !reflect.DeepEqual(r.Members, want) {
		t.Fatalf("report = %+v, want members %+v (only the members in force, removed ones left out)", r, want)
	}
	msg := got[0].ApplyError.Message
	if got[0].ApplyError.Generation != 3 || len(msg) > v1alpha1.MaxApplyErrorMessageLength || !utf8.ValidString(msg) ||
		!strings.HasSuffix(msg, "é...") {
		t.Fatalf("apply error = %d %q (%d bytes), want generation 3 cut on a rune boundary within the bound",
			got[0].ApplyError.Generation, msg, len(msg))
	}
}

// TestRouterViewQueue proves the report carries the capacity view's queue:
// nil without a bound, the oldest wait rounded down to whole seconds, and
// every number clamped to the API's bounds so a write never fails on them.
func TestRouterViewQueue(t *testing.T) {
	n := func(i int) *int { return &i }
	for _, tc := range []struct {
		name  string
		queue adminapi.TierQueue
		want  *v1alpha1.QueueStatus
	}{
		{"no queue", adminapi.TierQueue{}, nil},
		{"idle", adminapi.TierQueue{MaxRequests: n(64)}, &v1alpha1.QueueStatus{MaxRequests: 64}},
		{"rounded down", adminapi.TierQueue{MaxRequests: n(64), Waiting: 3, OldestWaitMillis: 12_999},
			&v1alpha1.QueueStatus{MaxRequests: 64, Waiting: 3, OldestWaitSeconds: 12}},
		{"under a second", adminapi.TierQueue{MaxRequests: n(64), Waiting: 1, OldestWaitMillis: 999},
			&v1alpha1.QueueStatus{MaxRequests: 64, Waiting: 1}},
		{"a deadline that fired late", adminapi.TierQueue{MaxRequests: n(v1alpha1.MaxQueueRequests), Waiting: v1alpha1.MaxQueueRequests + 1,
			OldestWaitMillis: int64(v1alpha1.MaxQueueWait/time.Millisecond) + 2500},
			&v1alpha1.QueueStatus{MaxRequests: v1alpha1.MaxQueueRequests, Waiting: v1alpha1.MaxQueueRequests, OldestWaitSeconds: v1alpha1.MaxQueueOldestWaitSeconds}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state := fakeState{
				capacity: adminapi.CapacityView{Tiers: []adminapi.TierCapacity{{Tier: "default/llama", Queue: tc.queue,
					Members: []adminapi.MemberCapacity{{ID: "gpu0", Ready: true, Phase: "Admitting", State: "admitting"}}}}},
				applied: []adminapi.AppliedTier{{Key: "default/llama", Namespace: "default", Name: "llama", Generation: 2, Members: []string{"gpu0"}}},
			}
			got := NewRouterView(state).Reports()
			if len(got) != 1 || !reflect.DeepEqual(got[0].Queue, tc.want) {
				t.Fatalf("reports = %+v, want queue %+v", got, tc.want)
			}
		})
	}
}

func TestTruncateMessage(t *testing.T) {
	tests := []struct {
		name, in string
		n        int
		want     string
	}{
		{name: "fits", in: "abc", n: 3, want: "abc"},
		{name: "ascii cut", in: "abcdefgh", n: 6, want: "abc..."},
		{name: "two-byte rune across the cut", in: "abé" + "defgh", n: 6, want: "ab..."},
		{name: "four-byte rune across the cut", in: "a😀bcdefgh", n: 6, want: "a..."},
		{name: "rune ending at the cut", in: "aé" + "bcdefgh", n: 6, want: "aé..."},
		{name: "invalid input made valid", in: "ab\xffcd", n: 16, want: "ab\uFFFDcd"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := truncateMessage(tc.in, tc.n)
			if got != tc.want || len(got) > tc.n || !utf8.ValidString(got) {
				t.Fatalf("truncateMessage(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
			}
		})
	}
}
