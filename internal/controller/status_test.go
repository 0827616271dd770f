package controller

import (
	"strings"
	"testing"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sluicev1 "github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/api/v1alpha1/validationtable"
)

var (
	t0 = metav1.Unix(1000, 0)
	t1 = metav1.Unix(2000, 0)
)

func cond(s managerStatus, ct sluicev1.ConditionType) metav1.Condition {
	c := meta.FindStatusCondition(s.conditions, string(ct))
	if c == nil {
		return metav1.Condition{}
	}
	return *c
}

func TestDesiredStatusAcceptsValidSpecAndCopiesIntent(t *testing.T) {
	tier := validationtable.Base()
	tier.Generation = 3
	tier.Spec.Quiesce = &sluicev1.QuiesceSpec{Tier: "maint", Members: map[string]sluicev1.QuiesceReason{"gpu1": "a", "gpu0": "b"}}
	got := desiredStatus(tier, nil, t0)

	if got.observedGeneration != 3 || got.memberCount != 2 {
		t.Fatalf("observedGeneration/memberCount = %d/%d", got.observedGeneration, got.memberCount)
	}
	want := &sluicev1.AdmissionStatus{
		Tier: sluicev1.TierAdmission{Quiesced: true, Reason: "maint"},
		Members: []sluicev1.MemberAdmission{
			{ID: "gpu0", Quiesced: true, Reason: "b"},
			{ID: "gpu1", Quiesced: true, Reason: "a"},
		},
	}
	if !equalAdmission(got.admission, want) {
		t.Fatalf("admission = %+v, want %+v", got.admission, want)
	}
	if c := cond(got, sluicev1.ConditionAccepted); c.Status != metav1.ConditionTrue || c.ObservedGeneration != 3 {
		t.Errorf("Accepted = %+v", c)
	}
	if c := cond(got, sluicev1.ConditionProgrammed); c.Reason != string(sluicev1.ReasonNoRouter) {
		t.Errorf("Programmed = %+v", c)
	}
	if c := cond(got, sluicev1.ConditionReady); c.Reason != string(sluicev1.ReasonNoRouter) {
		t.Errorf("Ready = %+v", c)
	}
}

func TestDesiredStatusInvalidSpecKeepsLastValidIntent(t *testing.T) {
	tier := validationtable.Base()
	tier.Generation = 5
	last := &sluicev1.AdmissionStatus{Members: []sluicev1.MemberAdmission{{ID: "gpu1", Quiesced: true, Reason: "old"}}}
	tier.Status.Admission = last.DeepCopy()
	tier.Status.MemberCount = 2
	// An object stored before a rule existed: the API server would reject it now.
	tier.Spec.Members[1].ID = "BAD"
	tier.Spec.Quiesce = &sluicev1.QuiesceSpec{Tier: "new"}

	got := desiredStatus(tier, nil, t0)
	if !equalAdmission(got.admission, last) {
		t.Fatalf("admission = %+v, want the last valid %+v", got.admission, last)
	}
	if got.memberCount != 2 {
		t.Errorf("memberCount = %d, want the last valid 2", got.memberCount)
	}
	c := cond(got, sluicev1.ConditionAccepted)
	if c.Status != metav1.ConditionFalse || c.Reason != string(sluicev1.ReasonInvalidSpec) || c.ObservedGeneration != 5 {
		t.Fatalf("Accepted = %+v", c)
	}
	if want := "spec.members[1].id"; !contains(c.Message, want) {
		t.Errorf("message %q does not name %q", c.Message, want)
	}
	for _, ct := range []sluicev1.ConditionType{sluicev1.ConditionProgrammed, sluicev1.ConditionReady} {
		if c := cond(got, ct); c.Status != metav1.ConditionFalse || c.Reason != string(sluicev1.ReasonNotAccepted) {
			t.Errorf("%s = %+v", ct, c)
		}
	}
}

func TestDesiredStatusProgrammedAndReadyFollowRouter(t *testing.T) {
	for _, tc := range []struct {
		desc                    string
		router                  *sluicev1.RouterStatus
		members                 []sluicev1.MemberStatus
		programmed, ready       metav1.ConditionStatus
		programmedWhy, readyWhy sluicev1.ConditionReason
	}{
		{"no router", nil, nil, metav1.ConditionFalse, metav1.ConditionFalse, sluicev1.ReasonNoRouter, sluicev1.ReasonNoRouter},
		{"old generation", &sluicev1.RouterStatus{Node: "n", AppliedGeneration: 1},
			[]sluicev1.MemberStatus{{ID: "gpu0", Ready: true, Phase: sluicev1.MemberAdmitting}},
			metav1.ConditionFalse, metav1.ConditionTrue, sluicev1.ReasonPending, sluicev1.ReasonMembersAdmitting},
		{"applied, one admitting", &sluicev1.RouterStatus{Node: "n", AppliedGeneration: 2},
			[]sluicev1.MemberStatus{{ID: "gpu0", Ready: true, Phase: sluicev1.MemberAdmitting}, {ID: "gpu1", Phase: sluicev1.MemberAdmitting}},
			metav1.ConditionTrue, metav1.ConditionTrue, sluicev1.ReasonApplied, sluicev1.ReasonMembersAdmitting},
		{"ready members all drained", &sluicev1.RouterStatus{Node: "n", AppliedGeneration: 2},
			[]sluicev1.MemberStatus{{ID: "gpu0", Ready: true, Phase: sluicev1.MemberDrained}, {ID: "gpu1", Ready: true, Phase: sluicev1.MemberDraining}},
			metav1.ConditionTrue, metav1.ConditionFalse, sluicev1.ReasonApplied, sluicev1.ReasonNoMemberAdmitting},
		{"admitting member no longer in spec", &sluicev1.RouterStatus{Node: "n", AppliedGeneration: 2},
			[]sluicev1.MemberStatus{{ID: "gone", Ready: true, Phase: sluicev1.MemberAdmitting}},
			metav1.ConditionTrue, metav1.ConditionFalse, sluicev1.ReasonApplied, sluicev1.ReasonNoMemberAdmitting},
		{"current generation failed to apply", &sluicev1.RouterStatus{Node: "n", AppliedGeneration: 1,
			ApplyError: &sluicev1.ApplyError{Generation: 2, Message: "m"}},
			[]sluicev1.MemberStatus{{ID: "gpu0", Ready: true, Phase: sluicev1.MemberAdmitting}},
			metav1.ConditionFalse, metav1.ConditionTrue, sluicev1.ReasonApplyFailed, sluicev1.ReasonMembersAdmitting},
		{"first generation failed to apply", &sluicev1.RouterStatus{Node: "n", AppliedGeneration: 0,
			ApplyError: &sluicev1.ApplyError{Generation: 2, Message: "m"}}, nil,
			metav1.ConditionFalse, metav1.ConditionFalse, sluicev1.ReasonApplyFailed, sluicev1.ReasonNoMemberAdmitting},
		{"an older generation failed to apply", &sluicev1.RouterStatus{Node: "n", AppliedGeneration: 0,
			ApplyError: &sluicev1.ApplyError{Generation: 1, Message: "m"}}, nil,
			metav1.ConditionFalse, metav1.ConditionFalse, sluicev1.ReasonPending, sluicev1.ReasonNoMemberAdmitting},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			tier := validationtable.Base()
			tier.Generation = 2
			tier.Status.Router = tc.router
			tier.Status.Members = tc.members
			got := desiredStatus(tier, nil, t0)
			if c := cond(got, sluicev1.ConditionProgrammed); c.Status != tc.programmed || c.Reason != string(tc.programmedWhy) {
				t.Errorf("Programmed = %s/%s, want %s/%s", c.Status, c.Reason, tc.programmed, tc.programmedWhy)
			}
			if c := cond(got, sluicev1.ConditionReady); c.Status != tc.ready || c.Reason != string(tc.readyWhy) {
				t.Errorf("Ready = %s/%s, want %s/%s", c.Status, c.Reason, tc.ready, tc.readyWhy)
			}
		})
	}
}

// TestDesiredStatusApplyFailedMessage proves the ApplyFailed message names
// the router, the generation, the generation still in force and the
// router's reason, and stays within the bound and valid UTF-8.
func TestDesiredStatusApplyFailedMessage(t *testing.T) {
	tier := validationtable.Base()
	tier.Generation = 5
	tier.Status.Router = &sluicev1.RouterStatus{Node: "gpu-node-1", AppliedGeneration: 4,
		ApplyError: &sluicev1.ApplyError{Generation: 5, Message: "router: tier cannot be applied: member gpu0 has an unusable endpoint"}}
	c := cond(desiredStatus(tier, nil, t0), sluicev1.ConditionProgrammed)
	want := "router on gpu-node-1 cannot apply generation 5 (it still applies generation 4): " +
		"router: tier cannot be applied: member gpu0 has an unusable endpoint"
	if c.Message != want {
		t.Fatalf("message = %q, want %q", c.Message, want)
	}
	tier.Status.Router.AppliedGeneration = 0
	tier.Status.Router.ApplyError.Message = strings.Repeat("é", sluicev1.MaxApplyErrorMessageLength/2)
	c = cond(desiredStatus(tier, nil, t0), sluicev1.ConditionProgrammed)
	if !strings.Contains(c.Message, "(it applies no generation of this tier)") || len(c.Message) > maxConditionMessage ||
		!utf8.ValidString(c.Message) {
		t.Fatalf("message = %q (%d bytes)", c.Message, len(c.Message))
	}
}

func TestDesiredStatusIsStableAndStampsOnlyTransitions(t *testing.T) {
	tier := validationtable.Base()
	tier.Generation = 1
	first := desiredStatus(tier, nil, t0)
	tier.Status.ObservedGeneration = first.observedGeneration
	tier.Status.MemberCount = first.memberCount
	tier.Status.Conditions = first.conditions
	tier.Status.Admission = first.admission

	again := desiredStatus(tier, nil, t1)
	if !managerStatusEqual(&tier.Status, again) {
		t.Fatal("an unchanged tier produced a different status")
	}

	tier.Status.Router = &sluicev1.RouterStatus{Node: "n", AppliedGeneration: 1}
	moved := desiredStatus(tier, nil, t1)
	if c := cond(moved, sluicev1.ConditionProgrammed); !c.LastTransitionTime.Equal(&t1) {
		t.Errorf("Programmed transition at %v, want %v", c.LastTransitionTime, t1)
	}
	if c := cond(moved, sluicev1.ConditionAccepted); !c.LastTransitionTime.Equal(&t0) {
		t.Errorf("Accepted transition moved to %v", c.LastTransitionTime)
	}
}

func TestDesiredStatusAliasConflict(t *testing.T) {
	older := *validationtable.Base()
	older.Namespace, older.Name, older.UID = "a", "older", "u1"
	older.CreationTimestamp = t0
	tier := validationtable.Base()
	tier.Namespace, tier.Name, tier.UID = "b", "newer", "u2"
	tier.CreationTimestamp = t1
	tier.Spec.Aliases = []string{"solo", "chat"}
	got := desiredStatus(tier, []sluicev1.ReplicaTier{older, *tier}, t1)
	c := cond(got, sluicev1.ConditionAccepted)
	if c.Reason != string(sluicev1.ReasonAliasConflict) || c.Message != `alias "chat" is held by a/older` {
		t.Fatalf("Accepted = %+v", c)
	}
	if got.admission == nil {
		t.Error("a valid spec in conflict still carries its admission intent")
	}
}

func TestTruncateBoundsMessages(t *testing.T) {
	long := strings.Repeat("x", 5000)
	// "é" is 2 bytes, "€" 3, "😀" 4; n = 10 keeps at most 7 bytes before "...".
	tests := []struct {
		name, in string
		n        int
		want     string
	}{
		{name: "short", in: "short", n: maxConditionMessage, want: "short"},
		{name: "exactly n", in: "0123456789", n: 10, want: "0123456789"},
		{name: "ascii", in: long, n: maxConditionMessage, want: long[:maxConditionMessage-3] + "..."},
		{name: "two-byte rune across the cut", in: "012345é9abc", n: 10, want: "012345..."},
		{name: "two-byte rune ending at the cut", in: "01234é789abc", n: 10, want: "01234é..."},
		{name: "three-byte rune across the cut", in: "012345€9abc", n: 10, want: "012345..."},
		{name: "three-byte rune starting one before", in: "0123456€abc", n: 10, want: "0123456..."},
		{name: "four-byte rune across the cut", in: "01234😀9abc", n: 10, want: "01234..."},
		{name: "only multi-byte runes", in: strings.Repeat("😀", 3), n: 10, want: "😀..."},
		{name: "invalid bytes are replaced", in: "ab\xffcd", n: 10, want: "ab\uFFFDcd"},
		{name: "invalid bytes before the cut", in: "0123\xff6789abc", n: 10, want: "0123\uFFFD..."},
		{name: "bound below the ellipsis", in: "é1234", n: 2, want: "é"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := truncate(tc.in, tc.n)
			if got != tc.want || len(got) > tc.n || !utf8.ValidString(got) {
				t.Fatalf("truncate(%q, %d) = %q (%d bytes), want %q", tc.in, tc.n, got, len(got), tc.want)
			}
		})
	}
}

func equalAdmission(a, b *sluicev1.AdmissionStatus) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.Tier != b.Tier || len(a.Members) != len(b.Members) {
		return false
	}
	for i := range a.Members {
		if a.Members[i] != b.Members[i] {
			return false
		}
	}
	return true
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
