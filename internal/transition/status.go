package transition

import (
	"fmt"
	"strconv"

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
	// Queue is the tier's admission queue; absent when neither its spec nor
	// the router's report has one.
	Queue *QueueStatus `json:"queue,omitempty"`
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

// QueueStatus is a tier's admission queue in a Status: the router's coarse
// report (status.queue, at most about ten seconds old; the router's
// metrics and capacity view are exact).
type QueueStatus struct {
	// MaxRequests is the queue's bound: the router's when it reported one,
	// else spec.queue.maxRequests.
	MaxRequests int32 `json:"maxRequests"`
	// Waiting is how many requests the router reported waiting; null when
	// it reports no queue.
	Waiting *int32 `json:"waiting"`
	// OldestWaitSeconds is how long the oldest of them had waited, in whole
	// seconds; null when the router reports no queue.
	OldestWaitSeconds *int32 `json:"oldestWaitSeconds"`
}

// String describes the queue as the plugin prints it, such as "3/64
// waiting, oldest 12s", with dashes for what the router has not reported.
func (q QueueStatus) String() string {
	waiting, oldest := "-", "-"
	if q.Waiting != nil {
		waiting = strconv.FormatInt(int64(*q.Waiting), 10)
	}
	if q.OldestWaitSeconds != nil {
		oldest = strconv.FormatInt(int64(*q.OldestWaitSeconds), 10) + "s"
	}
	return fmt.Sprintf("%s/%d waiting, oldest %s", waiting, q.MaxRequests, oldest)
}

// newQueueStatus projects t's queue: the router's report when there is one,
// else the spec's bound with nothing reported, else nil.
func newQueueStatus(t *v1alpha1.ReplicaTier) *QueueStatus {
	if q := t.Status.Queue; q != nil {
		waiting, oldest := q.Waiting, q.OldestWaitSeconds
		return &QueueStatus{MaxRequests: q.MaxRequests, Waiting: &waiting, OldestWaitSeconds: &oldest}
	}
	if q := t.Spec.Queue; q != nil {
		return &QueueStatus{MaxRequests: q.MaxRequests}
	}
	return nil
}

// NewStatus projects t; member, when set, keeps only that member.
func NewStatus(t *v1alpha1.ReplicaTier, member string) Status {
	s := Status{
		Namespace:          t.Namespace,
		Name:               t.Name,
		Node:               t.Spec.NodeName,
		Strategy:           t.Spec.StrategyName(),
		Generation:         t.Generation,
		ObservedGeneration: t.Status.ObservedGeneration,
		Accepted:           ConditionStatus(t, v1alpha1.ConditionAccepted),
		Programmed:         ConditionStatus(t, v1alpha1.ConditionProgrammed),
		Ready:              ConditionStatus(t, v1alpha1.ConditionReady),
		TierQuiesce:        Intent(t, ""),
		Queue:              newQueueStatus(t),
		Members:            []MemberStatus{},
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
