package transition

import (
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/sluice-dev/sluice/api/v1alpha1"
)

// Status is a tier's intent, the manager's conditions and the router's
// report, as the plugin prints it (it is the plugin's -o json document). It
// holds no endpoint and nothing secret.
type Status struct {
	// Namespace is the tier's namespace.
	Namespace string `json:"namespace"`
	// Name is the tier's name.
	Name string `json:"name"`
	// Node is spec.nodeName.
	Node string `json:"node"`
	// Strategy is Direct, RoundRobin or Capacity.
	Strategy string `json:"strategy"`
	// Generation is metadata.generation.
	Generation int64 `json:"generation"`
	// ObservedGeneration is the generation the manager last reconciled.
	ObservedGeneration int64 `json:"observedGeneration"`
	// AppliedGeneration is the generation the router reports it applies;
	// null before any router reported.
	AppliedGeneration *int64 `json:"appliedGeneration"`
	// RouterNode is the node of the router that reported; empty before.
	RouterNode string `json:"routerNode,omitempty"`
	// Accepted is the Accepted condition's status, Unknown when absent.
	Accepted string `json:"accepted"`
	// Programmed is the Programmed condition's status, Unknown when absent.
	Programmed string `json:"programmed"`
	// Ready is the Ready condition's status, Unknown when absent.
	Ready string `json:"ready"`
	// TierQuiesce is spec.quiesce.tier; empty when the tier admits.
	TierQuiesce string `json:"tierQuiesce,omitempty"`
	// Members are the spec's members (or the one asked for), sorted by id.
	Members []MemberStatus `json:"members"`
}

// MemberStatus is one member in a Status.
type MemberStatus struct {
	// ID is the member id.
	ID string `json:"id"`
	// Quiesce is spec.quiesce.members[id]; empty when the member admits.
	Quiesce string `json:"quiesce,omitempty"`
	// Ready is what the router reports; null when it reports nothing.
	Ready *bool `json:"ready"`
	// Phase is Admitting, Draining or Drained as the router reports it;
	// empty when it reports nothing.
	Phase string `json:"phase,omitempty"`
}

// NewStatus projects t; member, when set, keeps only that member.
func NewStatus(t *v1alpha1.ReplicaTier, member string) Status {
	s := Status{
		Namespace:          t.Namespace,
		Name:               t.Name,
		Node:               t.Spec.NodeName,
		Strategy:           string(t.Spec.EffectiveStrategy()),
		Generation:         t.Generation,
		ObservedGeneration: t.Status.ObservedGeneration,
		Accepted:           ConditionStatus(t, v1alpha1.ConditionAccepted),
		Programmed:         ConditionStatus(t, v1alpha1.ConditionProgrammed),
		Ready:              ConditionStatus(t, v1alpha1.ConditionReady),
		TierQuiesce:        Intent(t, ""),
		Members:            []MemberStatus{},
	}
	if s.Strategy == "" {
		s.Strategy = "Direct"
	}
	if r := t.Status.Router; r != nil {
		gen := r.AppliedGeneration
		s.AppliedGeneration, s.RouterNode = &gen, r.Node
	}
	reported := map[string]v1alpha1.MemberStatus{}
	for _, m := range t.Status.Members {
		reported[m.ID] = m
	}
	for _, id := range scopeMembers(t, member) {
		ms := MemberStatus{ID: id, Quiesce: Intent(t, id)}
		if r, ok := reported[id]; ok {
			ready := r.Ready
			ms.Ready, ms.Phase = &ready, string(r.Phase)
		}
		s.Members = append(s.Members, ms)
	}
	return s
}

// ConditionStatus returns the status of t's condition ct, Unknown when
// absent.
func ConditionStatus(t *v1alpha1.ReplicaTier, ct v1alpha1.ConditionType) string {
	if c := meta.FindStatusCondition(t.Status.Conditions, string(ct)); c != nil {
		return string(c.Status)
	}
	return "Unknown"
}
