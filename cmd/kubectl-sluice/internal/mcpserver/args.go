package mcpserver

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/sluice-dev/sluice/api/v1alpha1"
)

// Actions of member_transition.
const (
	actionStatus  = "status"
	actionQuiesce = "quiesce"
	actionReadmit = "readmit"
	actionDrain   = "drain"
)

// actions are member_transition's actions, in the order the catalog lists
// them.
var actions = []string{actionStatus, actionQuiesce, actionReadmit, actionDrain}

// Bounds of drain's wait, in seconds.
const (
	// DefaultDrainTimeoutSeconds is drain's wait when timeout_seconds is
	// absent: the plugin's default (five minutes), long enough for typical
	// streams to finish.
	DefaultDrainTimeoutSeconds = 300
	// MaxDrainTimeoutSeconds is the longest wait a caller may ask for: a
	// drain that takes longer than 30 minutes waits on a stuck request a
	// person should look at, and an agent's turn should not hang longer.
	// Calling drain again resumes the wait without a second change.
	MaxDrainTimeoutSeconds = 1800
)

// Bounds of names, from the Kubernetes name rules.
const (
	// maxNamespaceLength is a DNS-1123 label's length bound.
	maxNamespaceLength = validation.DNS1123LabelMaxLength
	// maxTierLength is a namespace, the slash and a DNS-1123 subdomain.
	maxTierLength = validation.DNS1123LabelMaxLength + 1 + validation.DNS1123SubdomainMaxLength
)

// Patterns of the input schemas. The Go checks below use the Kubernetes
// validation functions; these repeat their grammar for clients, and the
// tests run both on the same cases.
const (
	namespacePattern = `^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`
	tierPattern      = `^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?/[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
)

// errInvalidArgument marks arguments refused before any request.
var errInvalidArgument = errors.New("invalid argument")

var (
	memberIDRE = regexp.MustCompile(v1alpha1.MemberIDPattern)
	reasonRE   = regexp.MustCompile(v1alpha1.QuiesceReasonPattern)
)

// listTiersInput is list_tiers' arguments.
type listTiersInput struct {
	Namespace string `json:"namespace,omitempty" jsonschema:"the namespace to list; absent means the kubeconfig's namespace"`
}

// transitionInput is member_transition's arguments.
type transitionInput struct {
	Action         string `json:"action" jsonschema:"status shows the tier or member and changes nothing; quiesce stops admitting new requests (requests in flight finish); readmit admits new requests again; drain quiesces when needed and waits until the router reports the scope Drained"`
	Tier           string `json:"tier" jsonschema:"the ReplicaTier as namespace/name"`
	Member         string `json:"member,omitempty" jsonschema:"a member id of the tier; absent means the whole tier. Refused on a direct tier (one member), whose intent is the tier's"`
	Reason         string `json:"reason,omitempty" jsonschema:"why the scope is quiesced (the catalog's text is set in transitionTool)"`
	DryRun         bool   `json:"dry_run,omitempty" jsonschema:"true sends the change as a server-side dry run: the API server validates it and stores nothing, and drain does not wait"`
	TimeoutSeconds int    `json:"timeout_seconds,omitempty" jsonschema:"how long drain waits (the catalog's text is set in transitionTool)"`
}

// transitionRequest is a checked member_transition call.
type transitionRequest struct {
	action, namespace, name, member, reason string
	dryRun                                  bool
	timeout                                 time.Duration
}

// invalid wraps errInvalidArgument with a message.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errInvalidArgument, fmt.Sprintf(format, args...))
}

// checkNamespace checks a namespace with the Kubernetes name rules.
func checkNamespace(what, ns string) error {
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return invalid("%s %q is not a valid namespace: %s", what, ns, strings.Join(errs, "; "))
	}
	return nil
}

// checkListTiers checks list_tiers' arguments.
func checkListTiers(in listTiersInput) error {
	if in.Namespace == "" {
		return nil
	}
	if len(in.Namespace) > maxNamespaceLength {
		return invalid("namespace is %d bytes long, at most %d are allowed", len(in.Namespace), maxNamespaceLength)
	}
	return checkNamespace("namespace", in.Namespace)
}

// checkMember checks a member id against the ReplicaTier API's grammar:
// ASCII, bounded, lowercase letters, digits and inner dashes.
func checkMember(id string) error {
	switch {
	case len(id) > v1alpha1.MaxMemberIDLength:
		return invalid("member is %d bytes long, at most %d are allowed", len(id), v1alpha1.MaxMemberIDLength)
	case !isASCII(id):
		return invalid("member %q is not ASCII: member ids are lowercase ASCII letters, digits and dashes", id)
	case !memberIDRE.MatchString(id):
		return invalid("member %q does not match %s", id, v1alpha1.MemberIDPattern)
	}
	return nil
}

// checkReason checks a quiesce reason against the ReplicaTier API's
// grammar.
func checkReason(reason string) error {
	switch {
	case len(reason) > v1alpha1.MaxReasonLength:
		return invalid("reason is %d bytes long, at most %d are allowed", len(reason), v1alpha1.MaxReasonLength)
	case !isASCII(reason):
		return invalid("reason %q is not ASCII: use lowercase ASCII letters, digits and dashes", reason)
	case !reasonRE.MatchString(reason):
		return invalid("reason %q does not match %s", reason, v1alpha1.QuiesceReasonPattern)
	}
	return nil
}

// isASCII reports whether s holds ASCII only.
func isASCII(s string) bool {
	for i := range len(s) {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// checkTransition checks member_transition's arguments and returns the
// request they make. Nothing is sent before it returns without error.
func checkTransition(in transitionInput) (transitionRequest, error) {
	r := transitionRequest{action: in.Action, member: in.Member, reason: in.Reason, dryRun: in.DryRun}
	switch in.Action {
	case actionStatus, actionQuiesce, actionReadmit, actionDrain:
	case "":
		return r, invalid("action is required: one of %s", strings.Join(actions, ", "))
	default:
		return r, invalid("action %q is not one of %s", in.Action, strings.Join(actions, ", "))
	}
	if in.Tier == "" {
		if in.Member != "" {
			return r, invalid("member %q needs its tier: give tier as namespace/name", in.Member)
		}
		return r, invalid("tier is required, as namespace/name")
	}
	if len(in.Tier) > maxTierLength {
		return r, invalid("tier is %d bytes long, at most %d are allowed", len(in.Tier), maxTierLength)
	}
	ns, name, ok := strings.Cut(in.Tier, "/")
	if !ok || strings.Contains(name, "/") {
		return r, invalid("tier %q is not namespace/name", in.Tier)
	}
	if err := checkNamespace("tier namespace", ns); err != nil {
		return r, err
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return r, invalid("tier name %q is not a valid object name: %s", name, strings.Join(errs, "; "))
	}
	r.namespace, r.name = ns, name
	if in.Member != "" {
		if err := checkMember(in.Member); err != nil {
			return r, err
		}
	}
	switch {
	case in.Action == actionQuiesce && in.Reason == "":
		return r, invalid("quiesce needs a reason, such as maintenance")
	case in.Reason != "" && in.Action != actionQuiesce && in.Action != actionDrain:
		return r, invalid("reason applies to quiesce and drain, not to %s", in.Action)
	case in.Reason != "":
		if err := checkReason(in.Reason); err != nil {
			return r, err
		}
	}
	switch {
	case in.TimeoutSeconds != 0 && in.Action != actionDrain:
		return r, invalid("timeout_seconds applies to drain, not to %s", in.Action)
	case in.TimeoutSeconds < 0 || in.TimeoutSeconds > MaxDrainTimeoutSeconds:
		return r, invalid("timeout_seconds %d is outside 1..%d", in.TimeoutSeconds, MaxDrainTimeoutSeconds)
	case in.TimeoutSeconds == 0:
		r.timeout = DefaultDrainTimeoutSeconds * time.Second
	default:
		r.timeout = time.Duration(in.TimeoutSeconds) * time.Second
	}
	return r, nil
}
