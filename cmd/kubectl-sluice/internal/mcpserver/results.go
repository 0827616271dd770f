package mcpserver

import (
	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/transition"
)

// Outcomes of member_transition.
const (
	// outcomeReported: status read the tier and changed nothing.
	outcomeReported = "reported"
	// outcomeChanged: quiesce, readmit or (with dry_run) drain changed the
	// scope's intent, or with dry_run would have.
	outcomeChanged = "changed"
	// outcomeUnchanged: the scope's intent was already what was asked;
	// nothing was sent.
	outcomeUnchanged = "unchanged"
	// outcomeDrained: the router reports every member of the scope Drained
	// for the tier's current generation.
	outcomeDrained = "drained"
	// outcomeTimeout: drain's wait ended before the scope drained; the
	// scope stays quiesced.
	outcomeTimeout = "timeout"
)

// outcomes are member_transition's outcomes, in the order the catalog
// lists them.
var outcomes = []string{outcomeReported, outcomeChanged, outcomeUnchanged, outcomeDrained, outcomeTimeout}

// tierView is a tier as the tools return it: spec fields an operator looks
// at first, the manager's conditions and the router's report. It never
// holds a member endpoint, metrics location or anything secret.
type tierView struct {
	Namespace          string       `json:"namespace" jsonschema:"the tier's namespace"`
	Name               string       `json:"name" jsonschema:"the tier's name"`
	Node               string       `json:"node" jsonschema:"spec.nodeName: the node whose router owns the tier"`
	Strategy           string       `json:"strategy" jsonschema:"Direct (one member), RoundRobin or Capacity"`
	Aliases            []string     `json:"aliases" jsonschema:"the model names callers send that route to the tier"`
	ServedModel        string       `json:"servedModel" jsonschema:"the model id every member must serve to count as ready"`
	MaxConcurrency     *int32       `json:"maxConcurrency" jsonschema:"the tier's aggregate ceiling of requests in flight; null means the sum of the member ceilings"`
	Generation         int64        `json:"generation" jsonschema:"metadata.generation"`
	ObservedGeneration int64        `json:"observedGeneration" jsonschema:"the generation the manager last reconciled"`
	AppliedGeneration  *int64       `json:"appliedGeneration" jsonschema:"the generation the router reports it applies; null before any router reported"`
	Accepted           string       `json:"accepted" jsonschema:"the Accepted condition's status: True, False or Unknown"`
	Programmed         string       `json:"programmed" jsonschema:"the Programmed condition's status: True, False or Unknown"`
	Ready              string       `json:"ready" jsonschema:"the Ready condition's status: True, False or Unknown"`
	TierQuiesce        string       `json:"tierQuiesce" jsonschema:"spec.quiesce.tier: the reason the whole tier is quiesced; empty when it admits"`
	MemberCount        int          `json:"memberCount" jsonschema:"how many members the tier has"`
	Queue              *queueView   `json:"queue" jsonschema:"the tier's admission queue as the router last reported it (status.queue, up to about 10 s old; the router's metrics and capacity view are exact); null when the tier has no queue"`
	Members            []memberView `json:"members" jsonschema:"the members (only the one asked about, for a member transition), sorted by id"`
}

// queueView is a tier's admission queue in a tierView.
type queueView struct {
	MaxRequests       int32  `json:"maxRequests" jsonschema:"the queue's bound: the router's when it reported one, else spec.queue.maxRequests"`
	Waiting           *int32 `json:"waiting" jsonschema:"how many requests the router reported waiting; null when it has not reported the queue"`
	OldestWaitSeconds *int32 `json:"oldestWaitSeconds" jsonschema:"how long the oldest waiting request had waited, in whole seconds (0 when none waits); null when the router has not reported the queue"`
}

// memberView is one member in a tierView.
type memberView struct {
	ID             string `json:"id" jsonschema:"the member id"`
	Ready          *bool  `json:"ready" jsonschema:"whether the router finds the member serving the tier's model; null when it reports nothing"`
	Phase          string `json:"phase" jsonschema:"Admitting, Draining or Drained as the router reports it; empty when it reports nothing"`
	Quiesce        string `json:"quiesce" jsonschema:"spec.quiesce.members[id]: the reason the member is quiesced; empty when it admits"`
	MaxConcurrency *int32 `json:"maxConcurrency" jsonschema:"the member's ceiling of requests in flight; null when it has none"`
}

// listTiersOutput is list_tiers' structured result.
type listTiersOutput struct {
	Namespace string     `json:"namespace" jsonschema:"the namespace listed"`
	Tiers     []tierView `json:"tiers" jsonschema:"the tiers, sorted by name"`
	Truncated bool       `json:"truncated" jsonschema:"true when the namespace holds more tiers than one answer lists; ask member_transition about a tier by name"`
}

// transitionOutput is member_transition's structured result.
type transitionOutput struct {
	Action  string    `json:"action" jsonschema:"the action performed"`
	Tier    string    `json:"tier" jsonschema:"the tier as namespace/name"`
	Member  string    `json:"member" jsonschema:"the member, empty for the whole tier"`
	DryRun  bool      `json:"dryRun" jsonschema:"true when the change was a server-side dry run: nothing was stored"`
	Outcome string    `json:"outcome" jsonschema:"reported (status), changed (the intent changed, or would have with dry_run), unchanged (it already was as asked; nothing was sent), drained (the router reports the scope Drained) or timeout (drain's wait ended first; the scope stays quiesced)"`
	Message string    `json:"message" jsonschema:"the one-line result, as kubectl sluice prints it"`
	Status  *tierView `json:"status" jsonschema:"the tier after the action (as the API server would store it, for a dry run); null when it could not be read after a drain timeout"`
}

// newTierView projects t; member, when set, keeps only that member.
func newTierView(t *v1alpha1.ReplicaTier, member string) tierView {
	s := transition.NewStatus(t, member)
	v := tierView{
		Namespace:          s.Namespace,
		Name:               s.Name,
		Node:               s.Node,
		Strategy:           s.Strategy,
		Aliases:            append([]string{}, t.Spec.Aliases...),
		ServedModel:        t.Spec.ServedModel,
		MaxConcurrency:     t.Spec.MaxConcurrency,
		Generation:         s.Generation,
		ObservedGeneration: s.ObservedGeneration,
		AppliedGeneration:  s.AppliedGeneration,
		Accepted:           s.Accepted,
		Programmed:         s.Programmed,
		Ready:              s.Ready,
		TierQuiesce:        s.TierQuiesce,
		MemberCount:        len(t.Spec.Members),
		Members:            make([]memberView, 0, len(s.Members)),
	}
	if q := s.Queue; q != nil {
		v.Queue = &queueView{MaxRequests: q.MaxRequests, Waiting: q.Waiting, OldestWaitSeconds: q.OldestWaitSeconds}
	}
	ceilings := make(map[string]*int32, len(t.Spec.Members))
	for _, m := range t.Spec.Members {
		ceilings[m.ID] = m.MaxConcurrency
	}
	for _, m := range s.Members {
		v.Members = append(v.Members, memberView{ID: m.ID, Ready: m.Ready, Phase: m.Phase, Quiesce: m.Quiesce, MaxConcurrency: ceilings[m.ID]})
	}
	return v
}
