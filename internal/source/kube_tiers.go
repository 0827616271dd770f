package source

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sluice-dev/sluice/api/v1alpha1"
)

// defaultQuiesceReason stands in for an empty reason on a quiesced scope of
// status.admission: the admission owner takes a non-empty reason to mean
// quiesced. The manager always writes a reason; this covers hand-written
// status.
const defaultQuiesceReason = "quiesced"

// kubeTiers decides what the kube source serves. It remembers, per tier, the
// last version it applied, so a tier whose newest generation the manager has
// not accepted (yet) keeps that version. It is pure: no I/O, no clock, no
// lock; the Kube source's Run goroutine owns it.
type kubeTiers struct {
	node    string
	applied map[string]*appliedTier // key → last applied version.
}

// appliedTier is one applied version of a tier.
type appliedTier struct {
	uid types.UID
	// tier holds the object metadata that alias precedence needs and the
	// composed spec: defaulted, with quiesce intent from status.admission.
	tier v1alpha1.ReplicaTier
}

func newKubeTiers(node string) *kubeTiers {
	return &kubeTiers{node: node, applied: map[string]*appliedTier{}}
}

// update takes every ReplicaTier the watch currently holds and returns the
// Snapshot to serve:
//
//   - a tier whose current generation the manager accepted
//     (status.observedGeneration == metadata.generation and Accepted=True
//     for that generation) is applied at that generation, with the quiesce
//     intent of status.admission in place of spec.quiesce;
//   - any other tier keeps the version last applied for the same object
//     (same UID), and is rejected as NotAccepted when there is none;
//   - tiers of other nodes and tiers being deleted are not served;
//   - among the tiers to serve, alias conflicts are resolved again with
//     v1alpha1.ByCreation (the manager's rule), which matters only while an
//     older applied version and a newer accepted tier overlap;
//   - at most MaxMembers members are served, older tiers first.
//
// The objects are only read; the Snapshot shares nothing with them.
func (k *kubeTiers) update(objs []*v1alpha1.ReplicaTier) Snapshot {
	var s Snapshot
	present := map[string]bool{}
	for _, o := range objs {
		if o.Spec.NodeName != k.node || !o.DeletionTimestamp.IsZero() {
			continue
		}
		key := o.Namespace + "/" + o.Name
		present[key] = true
		composed, why := acceptedVersion(o)
		if why == "" {
			k.applied[key] = &appliedTier{uid: o.UID, tier: *composed}
			continue
		}
		if a := k.applied[key]; a != nil && a.uid == o.UID {
			continue // keeps its last applied version.
		}
		delete(k.applied, key)
		s.Rejected = append(s.Rejected, Rejection{Tier: kubeTier(o, o.Spec), Reason: ReasonNotAccepted, Message: why})
	}
	for key := range k.applied {
		if !present[key] {
			delete(k.applied, key)
		}
	}

	candidates := make([]v1alpha1.ReplicaTier, 0, len(k.applied))
	for _, a := range k.applied {
		candidates = append(candidates, a.tier)
	}
	slices.SortFunc(candidates, func(a, b v1alpha1.ReplicaTier) int {
		switch {
		case v1alpha1.ByCreation(&a, &b):
			return -1
		case v1alpha1.ByCreation(&b, &a):
			return 1
		}
		return 0
	})
	members := 0
	for i := range candidates {
		t := &candidates[i]
		if lost := v1alpha1.LostAliases(t, candidates, v1alpha1.ByCreation); len(lost) > 0 {
			parts := make([]string, len(lost))
			for j, l := range lost {
				parts[j] = fmt.Sprintf("alias %q is held by %s", l.Alias, l.Holder)
			}
			s.Rejected = append(s.Rejected, Rejection{Tier: kubeTier(t, t.Spec), Reason: ReasonAliasConflict, Message: strings.Join(parts, "; ")})
			continue
		}
		if members+len(t.Spec.Members) > MaxMembers {
			s.Rejected = append(s.Rejected, Rejection{Tier: kubeTier(t, t.Spec), Reason: ReasonMemberLimit,
				Message: fmt.Sprintf("the router serves at most %d members", MaxMembers)})
			continue
		}
		members += len(t.Spec.Members)
		s.Tiers = append(s.Tiers, kubeTier(t, t.Spec))
	}
	slices.SortFunc(s.Tiers, func(a, b Tier) int { return cmp.Compare(a.Key, b.Key) })
	slices.SortStableFunc(s.Rejected, func(a, b Rejection) int { return cmp.Compare(a.Tier.Key, b.Tier.Key) })
	return s
}

// acceptedVersion returns the version of o to apply when the manager
// accepted o's current generation: a copy with the spec defaulted and the
// quiesce intent taken from status.admission. Otherwise it returns why not,
// without quoting field values.
func acceptedVersion(o *v1alpha1.ReplicaTier) (*v1alpha1.ReplicaTier, string) {
	gen := o.Generation
	if o.Status.ObservedGeneration != gen {
		return nil, fmt.Sprintf("the manager has not reconciled generation %d yet", gen)
	}
	c := meta.FindStatusCondition(o.Status.Conditions, string(v1alpha1.ConditionAccepted))
	switch {
	case c == nil || (c.ObservedGeneration != 0 && c.ObservedGeneration != gen):
		return nil, fmt.Sprintf("the manager has not accepted generation %d yet", gen)
	case c.Status != metav1.ConditionTrue:
		return nil, fmt.Sprintf("generation %d is not accepted: %s: %s", gen, c.Reason, c.Message)
	}
	t := &v1alpha1.ReplicaTier{ObjectMeta: metav1.ObjectMeta{
		Namespace:         o.Namespace,
		Name:              o.Name,
		UID:               o.UID,
		Generation:        gen,
		CreationTimestamp: o.CreationTimestamp,
	}}
	t.Spec = *o.Spec.DeepCopy()
	t.Spec.Quiesce = admissionIntent(o.Status.Admission)
	v1alpha1.Default(t)
	if errs := v1alpha1.Validate(t); len(errs) > 0 {
		return nil, fmt.Sprintf("generation %d is accepted but fails the router's validation: %s", gen, describe(errs))
	}
	return t, ""
}

// admissionIntent converts the manager's validated admission status into
// the quiesce intent the router applies; nil when nothing is quiesced.
func admissionIntent(a *v1alpha1.AdmissionStatus) *v1alpha1.QuiesceSpec {
	if a == nil {
		return nil
	}
	q := &v1alpha1.QuiesceSpec{}
	if a.Tier.Quiesced {
		q.Tier = cmp.Or(a.Tier.Reason, defaultQuiesceReason)
	}
	for _, m := range a.Members {
		if !m.Quiesced {
			continue
		}
		if q.Members == nil {
			q.Members = map[string]v1alpha1.QuiesceReason{}
		}
		q.Members[m.ID] = v1alpha1.QuiesceReason(cmp.Or(m.Reason, defaultQuiesceReason))
	}
	if q.Tier == "" && q.Members == nil {
		return nil
	}
	return q
}

// kubeTier makes a Tier of t with spec, deep-copied.
func kubeTier(t *v1alpha1.ReplicaTier, spec v1alpha1.ReplicaTierSpec) Tier {
	return Tier{
		Key:        t.Namespace + "/" + t.Name,
		Namespace:  t.Namespace,
		Name:       t.Name,
		Generation: t.Generation,
		Spec:       *spec.DeepCopy(),
	}
}
