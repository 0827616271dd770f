package plugin

import (
	"encoding/json"
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/sluice-dev/sluice/api/v1alpha1"
)

// TierStatus is what the verbs print: the tier's intent, the manager's
// conditions and the router's report. It is the -o json document.
type TierStatus struct {
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
	// Accepted, Programmed and Ready are the condition statuses, Unknown
	// when absent.
	Accepted string `json:"accepted"`
	// Programmed is the Programmed condition's status.
	Programmed string `json:"programmed"`
	// Ready is the Ready condition's status.
	Ready string `json:"ready"`
	// TierQuiesce is spec.quiesce.tier; empty when the tier admits.
	TierQuiesce string `json:"tierQuiesce,omitempty"`
	// Members are the spec's members (or the one asked for), sorted by id.
	Members []MemberStatus `json:"members"`
}

// MemberStatus is one member in a TierStatus.
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

// newTierStatus projects t; member, when set, keeps only that member.
func newTierStatus(t *v1alpha1.ReplicaTier, member string) TierStatus {
	s := TierStatus{
		Namespace:          t.Namespace,
		Name:               t.Name,
		Node:               t.Spec.NodeName,
		Strategy:           string(t.Spec.EffectiveStrategy()),
		Generation:         t.Generation,
		ObservedGeneration: t.Status.ObservedGeneration,
		Accepted:           conditionStatus(t, v1alpha1.ConditionAccepted),
		Programmed:         conditionStatus(t, v1alpha1.ConditionProgrammed),
		Ready:              conditionStatus(t, v1alpha1.ConditionReady),
		TierQuiesce:        intent(t, ""),
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
		ms := MemberStatus{ID: id, Quiesce: intent(t, id)}
		if r, ok := reported[id]; ok {
			ready := r.Ready
			ms.Ready, ms.Phase = &ready, string(r.Phase)
		}
		s.Members = append(s.Members, ms)
	}
	return s
}

// conditionStatus returns a condition's status, Unknown when absent.
func conditionStatus(t *v1alpha1.ReplicaTier, ct v1alpha1.ConditionType) string {
	if c := meta.FindStatusCondition(t.Status.Conditions, string(ct)); c != nil {
		return string(c.Status)
	}
	return "Unknown"
}

// dash stands in for an empty cell.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// print writes msg (a verb's one-line result, if any) and s as a table, or
// s alone as JSON.
func (c *cli) print(s TierStatus, msg string) error {
	if c.output == outputJSON {
		enc := json.NewEncoder(c.streams.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(s)
	}
	if msg != "" {
		if _, err := fmt.Fprintln(c.streams.Out, msg); err != nil {
			return err
		}
		if len(s.Members) == 0 {
			return nil
		}
	}
	w := printers.GetNewTabWriter(c.streams.Out)
	applied := "-"
	if s.AppliedGeneration != nil {
		applied = strconv.FormatInt(*s.AppliedGeneration, 10)
	}
	fmt.Fprintln(w, "TIER\tNODE\tSTRATEGY\tGENERATION\tAPPLIED\tACCEPTED\tPROGRAMMED\tREADY\tQUIESCED")
	fmt.Fprintf(w, "%s/%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", s.Namespace, s.Name, s.Node, s.Strategy, s.Generation,
		applied, s.Accepted, s.Programmed, s.Ready, dash(s.TierQuiesce))
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(c.streams.Out)
	w = printers.GetNewTabWriter(c.streams.Out)
	fmt.Fprintln(w, "MEMBER\tREADY\tPHASE\tQUIESCED")
	for _, m := range s.Members {
		ready := "-"
		if m.Ready != nil {
			ready = strconv.FormatBool(*m.Ready)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", m.ID, ready, dash(m.Phase), dash(m.Quiesce))
	}
	return w.Flush()
}
