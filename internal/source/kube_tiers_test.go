package source

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/api/v1alpha1/validationtable"
)

// kubeObj returns a valid tier of gpu-node-1 at generation gen, created at
// second created, with the manager's status for that generation: accepted
// with quiesce intent copied from the spec, as the manager writes it.
func kubeObj(name string, gen int64, created int, aliases ...string) *v1alpha1.ReplicaTier {
	t := validationtable.Base()
	t.Namespace, t.Name = "inference", name
	t.UID = types.UID("uid-" + name)
	t.Generation = gen
	t.CreationTimestamp = metav1.NewTime(time.Unix(1_700_000_000+int64(created), 0))
	if len(aliases) > 0 {
		t.Spec.Aliases = aliases
	}
	setAccepted(t, metav1.ConditionTrue, v1alpha1.ReasonAccepted)
	return t
}

// setAccepted writes the manager's status for the tier's current generation.
func setAccepted(t *v1alpha1.ReplicaTier, status metav1.ConditionStatus, reason v1alpha1.ConditionReason) {
	t.Status.ObservedGeneration = t.Generation
	t.Status.Conditions = []metav1.Condition{{
		Type: string(v1alpha1.ConditionAccepted), Status: status, Reason: string(reason),
		Message: "by the manager", ObservedGeneration: t.Generation,
	}}
	a := &v1alpha1.AdmissionStatus{}
	if q := t.Spec.Quiesce; q != nil {
		a.Tier = v1alpha1.TierAdmission{Quiesced: q.Tier != "", Reason: q.Tier}
		for _, id := range []string{"gpu0", "gpu1"} {
			if r, ok := q.Members[id]; ok {
				a.Members = append(a.Members, v1alpha1.MemberAdmission{ID: id, Quiesced: true, Reason: string(r)})
			}
		}
	}
	t.Status.Admission = a
}

// served formats the served tiers as key@generation.
func served(s Snapshot) string {
	var out []string
	for _, t := range s.Tiers {
		out = append(out, fmt.Sprintf("%s@%d", t.Name, t.Generation))
	}
	return strings.Join(out, ",")
}

// rejected formats the rejections as name:reason.
func rejected(s Snapshot) string {
	var out []string
	for _, r := range s.Rejected {
		out = append(out, r.Tier.Name+":"+string(r.Reason))
	}
	return strings.Join(out, ",")
}

func TestKubeTiersAppliesOnlyAcceptedGenerations(t *testing.T) {
	k := newKubeTiers("gpu-node-1")

	// Generation 1 accepted: served.
	a1 := kubeObj("a", 1, 0)
	s := k.update([]*v1alpha1.ReplicaTier{a1})
	if served(s) != "a@1" || rejected(s) != "" {
		t.Fatalf("gen 1: served %q rejected %q", served(s), rejected(s))
	}

	// Generation 2 not reconciled yet: generation 1 stays.
	a2 := a1.DeepCopy()
	a2.Generation = 2
	a2.Spec.Aliases = []string{"renamed"}
	s = k.update([]*v1alpha1.ReplicaTier{a2})
	if served(s) != "a@1" || s.Tiers[0].Spec.Aliases[0] != "llama-70b" {
		t.Fatalf("gen 2 pending: served %q aliases %v", served(s), s.Tiers[0].Spec.Aliases)
	}

	// Generation 2 rejected by the manager: generation 1 still stays.
	setAccepted(a2, metav1.ConditionFalse, v1alpha1.ReasonAliasConflict)
	s = k.update([]*v1alpha1.ReplicaTier{a2})
	if served(s) != "a@1" {
		t.Fatalf("gen 2 rejected: served %q", served(s))
	}

	// Generation 3 accepted: served.
	a3 := a2.DeepCopy()
	a3.Generation = 3
	setAccepted(a3, metav1.ConditionTrue, v1alpha1.ReasonAccepted)
	s = k.update([]*v1alpha1.ReplicaTier{a3})
	if served(s) != "a@3" || s.Tiers[0].Spec.Aliases[0] != "renamed" {
		t.Fatalf("gen 3: served %q", served(s))
	}

	// Deleted from the watch: gone.
	if s = k.update(nil); served(s) != "" || rejected(s) != "" {
		t.Fatalf("deleted: served %q rejected %q", served(s), rejected(s))
	}
}

func TestKubeTiersNotAccepted(t *testing.T) {
	tests := []struct {
		desc    string
		mutate  func(o *v1alpha1.ReplicaTier)
		message string
	}{
		{
			desc:    "not reconciled",
			mutate:  func(o *v1alpha1.ReplicaTier) { o.Status = v1alpha1.ReplicaTierStatus{} },
			message: "the manager has not reconciled generation 1 yet",
		},
		{
			desc:    "no Accepted condition",
			mutate:  func(o *v1alpha1.ReplicaTier) { o.Status.Conditions = nil },
			message: "the manager has not accepted generation 1 yet",
		},
		{
			desc: "Accepted for an older generation",
			mutate: func(o *v1alpha1.ReplicaTier) {
				o.Generation = 2
				o.Status.ObservedGeneration = 2
			},
			message: "the manager has not accepted generation 2 yet",
		},
		{
			desc: "rejected",
			mutate: func(o *v1alpha1.ReplicaTier) {
				setAccepted(o, metav1.ConditionFalse, v1alpha1.ReasonAliasConflict)
			},
			message: "generation 1 is not accepted: AliasConflict: by the manager",
		},
		{
			desc: "accepted but invalid here",
			mutate: func(o *v1alpha1.ReplicaTier) {
				o.Spec.Members[0].Endpoint = "http://user:secret@10.0.0.1:1"
			},
			message: "fails the router's validation: spec.members[0].endpoint",
		},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			o := kubeObj("a", 1, 0)
			tt.mutate(o)
			s := newKubeTiers("gpu-node-1").update([]*v1alpha1.ReplicaTier{o})
			if served(s) != "" || rejected(s) != "a:NotAccepted" {
				t.Fatalf("served %q rejected %q", served(s), rejected(s))
			}
			if msg := s.Rejected[0].Message; !strings.Contains(msg, tt.message) || strings.Contains(msg, "secret") {
				t.Fatalf("message %q, want %q and no field values", msg, tt.message)
			}
		})
	}
}

func TestKubeTiersQuiesceFromAdmissionStatus(t *testing.T) {
	o := kubeObj("a", 1, 0)
	// The spec says one thing, the manager's admission status another: the
	// router applies status.admission.
	o.Spec.Quiesce = &v1alpha1.QuiesceSpec{Members: map[string]v1alpha1.QuiesceReason{"gpu0": "spec-only"}}
	o.Status.Admission = &v1alpha1.AdmissionStatus{
		Tier:    v1alpha1.TierAdmission{Quiesced: true, Reason: "maintenance"},
		Members: []v1alpha1.MemberAdmission{{ID: "gpu1", Quiesced: true, Reason: "driver-upgrade"}, {ID: "gpu0", Quiesced: false}},
	}
	s := newKubeTiers("gpu-node-1").update([]*v1alpha1.ReplicaTier{o})
	q := s.Tiers[0].Spec.Quiesce
	if q == nil || q.Tier != "maintenance" || len(q.Members) != 1 || q.Members["gpu1"] != "driver-upgrade" {
		t.Fatalf("quiesce = %+v, want the admission status", q)
	}

	// Quiesced without reasons (hand-written status) still quiesces.
	o.Status.Admission = &v1alpha1.AdmissionStatus{
		Tier:    v1alpha1.TierAdmission{Quiesced: true},
		Members: []v1alpha1.MemberAdmission{{ID: "gpu1", Quiesced: true}},
	}
	s = newKubeTiers("gpu-node-1").update([]*v1alpha1.ReplicaTier{o})
	if q := s.Tiers[0].Spec.Quiesce; q.Tier != defaultQuiesceReason || q.Members["gpu1"] != defaultQuiesceReason {
		t.Fatalf("quiesce = %+v, want default reasons", q)
	}

	// No admission status: nothing quiesced, whatever the spec says.
	o.Status.Admission = nil
	s = newKubeTiers("gpu-node-1").update([]*v1alpha1.ReplicaTier{o})
	if q := s.Tiers[0].Spec.Quiesce; q != nil {
		t.Fatalf("quiesce = %+v, want none", q)
	}
	// Defaults are filled in as the files source does.
	if s.Tiers[0].Spec.Upstream == nil || s.Tiers[0].Spec.Upstream.IdleTimeout.Duration != v1alpha1.DefaultIdleTimeout {
		t.Fatalf("upstream = %+v, want defaults", s.Tiers[0].Spec.Upstream)
	}
}

func TestKubeTiersIgnoresOtherNodesAndDeletions(t *testing.T) {
	k := newKubeTiers("gpu-node-1")
	far := kubeObj("far", 1, 0, "far")
	far.Spec.NodeName = "gpu-node-2"
	going := kubeObj("going", 1, 1, "going")
	s := k.update([]*v1alpha1.ReplicaTier{far, going})
	if served(s) != "going@1" {
		t.Fatalf("served %q", served(s))
	}
	now := metav1.Now()
	going = going.DeepCopy()
	going.DeletionTimestamp = &now
	if s = k.update([]*v1alpha1.ReplicaTier{far, going}); served(s) != "" || rejected(s) != "" {
		t.Fatalf("being deleted: served %q rejected %q", served(s), rejected(s))
	}
}

func TestKubeTiersRecreatedTierForgetsOldVersion(t *testing.T) {
	k := newKubeTiers("gpu-node-1")
	k.update([]*v1alpha1.ReplicaTier{kubeObj("a", 1, 0)})
	again := kubeObj("a", 1, 5)
	again.UID = "uid-a-again"
	again.Status = v1alpha1.ReplicaTierStatus{}
	if s := k.update([]*v1alpha1.ReplicaTier{again}); served(s) != "" || rejected(s) != "a:NotAccepted" {
		t.Fatalf("served %q rejected %q", served(s), rejected(s))
	}
}

// TestKubeTiersResolvesOverlapByCreation covers the window in which a tier
// keeps an applied version claiming an alias the manager has since given to
// an older tier: the older tier wins, as the manager decides.
func TestKubeTiersResolvesOverlapByCreation(t *testing.T) {
	k := newKubeTiers("gpu-node-1")
	newer := kubeObj("newer", 1, 10, "shared")
	k.update([]*v1alpha1.ReplicaTier{newer})

	older := kubeObj("older", 1, 0, "shared", "other")
	newer2 := newer.DeepCopy()
	setAccepted(newer2, metav1.ConditionFalse, v1alpha1.ReasonAliasConflict)
	s := k.update([]*v1alpha1.ReplicaTier{older, newer2})
	if served(s) != "older@1" || rejected(s) != "newer:AliasConflict" {
		t.Fatalf("served %q rejected %q", served(s), rejected(s))
	}
	if want := `alias "shared" is held by inference/older`; s.Rejected[0].Message != want {
		t.Fatalf("message %q, want %q", s.Rejected[0].Message, want)
	}
}

func TestKubeTiersMemberLimit(t *testing.T) {
	var objs []*v1alpha1.ReplicaTier
	// 129 tiers of two members: the newest does not fit in 256.
	for i := range MaxMembers/2 + 1 {
		objs = append(objs, kubeObj(fmt.Sprintf("t%03d", i), 1, i, fmt.Sprintf("alias-%d", i)))
	}
	s := newKubeTiers("gpu-node-1").update(objs)
	if len(s.Tiers) != MaxMembers/2 || rejected(s) != fmt.Sprintf("t%03d:MemberLimit", MaxMembers/2) {
		t.Fatalf("served %d, rejected %q", len(s.Tiers), rejected(s))
	}
}

func TestKubeTiersSnapshotSharesNothing(t *testing.T) {
	o := kubeObj("a", 1, 0)
	s := newKubeTiers("gpu-node-1").update([]*v1alpha1.ReplicaTier{o})
	o.Spec.Aliases[0] = "mutated"
	o.Spec.Members[0].ID = "mutated"
	if s.Tiers[0].Spec.Aliases[0] != "llama-70b" || s.Tiers[0].Spec.Members[0].ID != "gpu0" {
		t.Fatalf("the snapshot aliases its input: %+v", s.Tiers[0].Spec)
	}
}
