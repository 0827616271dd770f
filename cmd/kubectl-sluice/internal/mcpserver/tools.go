package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/transition"
)

// Tool names.
const (
	toolListTiers  = "list_tiers"
	toolTransition = "member_transition"
)

// schemaFor infers T's schema, panicking on failure: the types are this
// package's own, so a failure is a programming error every test catches.
func schemaFor[T any]() *jsonschema.Schema {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		panic(err)
	}
	return s
}

// listTiersTool is list_tiers' catalog entry.
func listTiersTool() *mcp.Tool {
	in := schemaFor[listTiersInput]()
	ns := in.Properties["namespace"]
	ns.Pattern, ns.MaxLength = namespacePattern, jsonschema.Ptr(maxNamespaceLength)
	out := schemaFor[listTiersOutput]()
	return &mcp.Tool{
		Name:  toolListTiers,
		Title: "List ReplicaTiers",
		Description: "List the ReplicaTiers of a namespace (sorted by name, at most " + fmt.Sprint(maxListedTiers) + ") with what an operator looks at first: " +
			"node, strategy, aliases, served model, concurrency ceilings, the manager's Accepted/Programmed/Ready conditions, " +
			"the tier's quiesce intent, and per member its quiesce reason and its readiness and phase (Admitting, Draining, Drained) " +
			"as the router on the node reports them. Read-only. Never returns member endpoints or credentials.",
		InputSchema:  in,
		OutputSchema: out,
		Annotations: &mcp.ToolAnnotations{
			Title:          "List ReplicaTiers",
			ReadOnlyHint:   true,
			IdempotentHint: true,
			OpenWorldHint:  jsonschema.Ptr(false),
		},
	}
}

// transitionTool is member_transition's catalog entry.
func transitionTool() *mcp.Tool {
	in := schemaFor[transitionInput]()
	p := in.Properties
	p["action"].Enum = make([]any, 0, len(actions))
	for _, a := range actions {
		p["action"].Enum = append(p["action"].Enum, a)
	}
	p["tier"].Pattern, p["tier"].MaxLength = tierPattern, jsonschema.Ptr(maxTierLength)
	p["member"].Pattern, p["member"].MaxLength = v1alpha1.MemberIDPattern, jsonschema.Ptr(v1alpha1.MaxMemberIDLength)
	p["reason"].Pattern, p["reason"].MaxLength = v1alpha1.QuiesceReasonPattern, jsonschema.Ptr(v1alpha1.MaxReasonLength)
	p["reason"].Description = fmt.Sprintf("why the scope is quiesced, a short lowercase word such as maintenance; required by quiesce, "+
		"optional for drain (default %s, and a scope already quiesced keeps its reason), refused for status and readmit", transition.DefaultDrainReason)
	p["timeout_seconds"].Minimum = jsonschema.Ptr(1.0)
	p["timeout_seconds"].Maximum = jsonschema.Ptr(float64(MaxDrainTimeoutSeconds))
	p["timeout_seconds"].Description = fmt.Sprintf("drain only: how long to wait for the scope to drain, in seconds (default %d, at most %d); "+
		"when it passes, the result's outcome is timeout and the scope stays quiesced", DefaultDrainTimeoutSeconds, MaxDrainTimeoutSeconds)
	out := schemaFor[transitionOutput]()
	out.Properties["outcome"].Enum = make([]any, 0, len(outcomes))
	for _, o := range outcomes {
		out.Properties["outcome"].Enum = append(out.Properties["outcome"].Enum, o)
	}
	return &mcp.Tool{
		Name:  toolTransition,
		Title: "Show, quiesce, readmit or drain a ReplicaTier or member",
		Description: "Change (or show) the admission intent of a ReplicaTier or one of its members through the Kubernetes API, " +
			"as kubectl sluice does. quiesce stops admitting new requests to the scope (requests in flight finish) and needs a reason; " +
			"readmit admits new requests again; drain quiesces the scope unless it already is, then waits until the router on the " +
			"tier's node reports every member of the scope Drained, or until timeout_seconds; status changes nothing. " +
			"A member transition changes only that member's intent, never the tier's, and the reverse. " +
			"Every argument is checked, and the tier and member are read, before any change: an unknown member, or a member of a " +
			"direct tier (one member, whose intent is the tier's), is refused. dry_run sends the change as a server-side dry run, " +
			"which stores nothing (resourceVersion stays the same). Never returns member endpoints or credentials.",
		InputSchema:  in,
		OutputSchema: out,
		Annotations: &mcp.ToolAnnotations{
			Title: "Member transition",
			// Quiescing takes serving capacity away: clients should
			// confirm before calling.
			DestructiveHint: jsonschema.Ptr(true),
			IdempotentHint:  true,
			OpenWorldHint:   jsonschema.Ptr(false),
		},
	}
}

// textResult is a tool result holding text; the SDK adds the structured
// output.
func textResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

// fail logs a refused call and returns its tool error.
func (s *server) fail(tool string, err error) error {
	safe := toolError(err)
	s.logger.Info("tool call refused", "tool", tool, "error", safe.Error())
	return safe
}

// listTiers is list_tiers.
func (s *server) listTiers(ctx context.Context, _ *mcp.CallToolRequest, in listTiersInput) (*mcp.CallToolResult, listTiersOutput, error) {
	if err := checkListTiers(in); err != nil {
		return nil, listTiersOutput{}, s.fail(toolListTiers, err)
	}
	ns := in.Namespace
	if ns == "" {
		ns = s.namespace
	}
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	tc := &transition.Client{Client: s.client, Namespace: ns}
	tiers, truncated, err := tc.List(ctx, maxListedTiers)
	if err != nil {
		return nil, listTiersOutput{}, s.fail(toolListTiers, err)
	}
	out := listTiersOutput{Namespace: ns, Tiers: make([]tierView, 0, len(tiers)), Truncated: truncated}
	names := make([]string, 0, len(tiers))
	for i := range tiers {
		out.Tiers = append(out.Tiers, newTierView(&tiers[i], ""))
	}
	slices.SortFunc(out.Tiers, func(a, b tierView) int { return strings.Compare(a.Name, b.Name) })
	for _, t := range out.Tiers {
		names = append(names, t.Name)
	}
	text := fmt.Sprintf("%d tiers in namespace %s", len(out.Tiers), ns)
	if len(names) > 0 {
		text += ": " + strings.Join(names, ", ")
	}
	if truncated {
		text += fmt.Sprintf(" (truncated at %d)", maxListedTiers)
	}
	s.logger.Info("tool call", "tool", toolListTiers, "namespace", ns, "tiers", len(out.Tiers))
	return textResult(text), out, nil
}

// memberTransition is member_transition.
func (s *server) memberTransition(ctx context.Context, _ *mcp.CallToolRequest, in transitionInput) (*mcp.CallToolResult, transitionOutput, error) {
	r, err := checkTransition(in)
	if err != nil {
		return nil, transitionOutput{}, s.fail(toolTransition, err)
	}
	out, err := s.transition(ctx, r)
	if err != nil {
		return nil, transitionOutput{}, s.fail(toolTransition, err)
	}
	s.logger.Info("tool call", "tool", toolTransition, "action", r.action, "namespace", r.namespace, "tier", r.name,
		"member", r.member, "dryRun", r.dryRun, "outcome", out.Outcome)
	return textResult(out.Message), out, nil
}

// transition runs a checked member_transition request.
func (s *server) transition(ctx context.Context, r transitionRequest) (transitionOutput, error) {
	out := transitionOutput{Action: r.action, Tier: r.namespace + "/" + r.name, Member: r.member, DryRun: r.dryRun}
	tc := &transition.Client{Client: s.client, Namespace: r.namespace, DryRun: r.dryRun}

	// Read the tier and check the scope before any change; the intent
	// read here tells a change from a request for what already is.
	readCtx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	before, err := tc.Get(readCtx, r.name)
	if err != nil {
		return out, err
	}
	if err := checkScope(before, r.member); err != nil {
		return out, err
	}
	was := transition.Intent(before, r.member)

	var (
		after *v1alpha1.ReplicaTier
		msg   string
	)
	switch r.action {
	case actionStatus:
		view := newTierView(before, r.member)
		out.Outcome, out.Message, out.Status = outcomeReported, statusLine(view, r.member), &view
		return out, nil
	case actionQuiesce:
		after, msg, err = tc.Quiesce(readCtx, r.name, r.member, r.reason)
		out.Outcome = changedOrNot(was != r.reason)
	case actionReadmit:
		after, msg, err = tc.Readmit(readCtx, r.name, r.member)
		out.Outcome = changedOrNot(was != "")
	case actionDrain:
		return s.drain(ctx, tc, r, out, was)
	}
	if err != nil {
		return out, err
	}
	view := newTierView(after, r.member)
	out.Message, out.Status = msg, &view
	return out, nil
}

// drain runs drain: a dry run reports the change it would make; otherwise
// it waits at most r.timeout and reports drained, or timeout with the tier
// as it is then.
func (s *server) drain(ctx context.Context, tc *transition.Client, r transitionRequest, out transitionOutput, was string) (transitionOutput, error) {
	reason := r.reason
	if reason == "" {
		reason = transition.DefaultDrainReason
	}
	dctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	after, msg, err := tc.DrainWithReason(dctx, r.name, r.member, reason, r.timeout)
	switch {
	case err == nil && r.dryRun:
		out.Outcome = changedOrNot(was == "")
	case err == nil:
		out.Outcome = outcomeDrained
	case errors.Is(err, transition.ErrDrainTimeout) && ctx.Err() == nil:
		out.Outcome = outcomeTimeout
		out.Message = err.Error() + "; the scope stays quiesced, call drain again to go on waiting"
		readCtx, cancel := context.WithTimeout(ctx, apiTimeout)
		defer cancel()
		if t, gerr := tc.Get(readCtx, r.name); gerr == nil {
			view := newTierView(t, r.member)
			out.Status = &view
		} else {
			s.logger.Info("tier not read after a drain timeout", "namespace", r.namespace, "tier", r.name, "error", toolError(gerr).Error())
		}
		return out, nil
	default:
		return out, err
	}
	view := newTierView(after, r.member)
	out.Message, out.Status = msg, &view
	return out, nil
}

// checkScope is transition.CheckScope with the direct tier's refusal
// worded for this tool's arguments.
func checkScope(t *v1alpha1.ReplicaTier, member string) error {
	err := transition.CheckScope(t, member)
	if errors.Is(err, transition.ErrDirectTier) {
		return fmt.Errorf("%w: %s/%s has one member, so its intent is the tier's; call member_transition for the whole tier (omit member)",
			transition.ErrDirectTier, t.Namespace, t.Name)
	}
	return err
}

// changedOrNot is outcomeChanged when changed, else outcomeUnchanged.
func changedOrNot(changed bool) string {
	if changed {
		return outcomeChanged
	}
	return outcomeUnchanged
}

// statusLine is status's one-line result: the scope's intent, each
// member's phase and the queue when the tier has one, for example
// "inference/llama: admitting; gpu0 Admitting, gpu1 Drained (quiesced:
// maintenance); queue 3/64 waiting, oldest 12s".
func statusLine(v tierView, member string) string {
	scope := v.Namespace + "/" + v.Name
	if member != "" {
		scope += " member " + member
	}
	intent := "admitting"
	if v.TierQuiesce != "" {
		intent = "tier quiesced: " + v.TierQuiesce
	}
	parts := make([]string, 0, len(v.Members))
	for _, m := range v.Members {
		p := m.ID + " " + m.Phase
		if m.Phase == "" {
			p = m.ID + " not reported"
		}
		if m.Quiesce != "" {
			p += " (quiesced: " + m.Quiesce + ")"
		}
		parts = append(parts, p)
	}
	line := scope + ": " + intent + "; " + strings.Join(parts, ", ")
	if q := v.Queue; q != nil {
		line += "; queue " + transition.QueueStatus{MaxRequests: q.MaxRequests, Waiting: q.Waiting, OldestWaitSeconds: q.OldestWaitSeconds}.String()
	}
	return line
}
