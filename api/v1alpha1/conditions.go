package v1alpha1

// ConditionType is the type of a ReplicaTier condition.
type ConditionType string

// The condition types of a ReplicaTier.
const (
	// ConditionAccepted is True when the manager validated the spec and the
	// tier holds all of its aliases on its node.
	ConditionAccepted ConditionType = "Accepted"
	// ConditionProgrammed is True when the router on spec.nodeName applies
	// the tier's current generation.
	ConditionProgrammed ConditionType = "Programmed"
	// ConditionReady is True when at least one member is ready and admitting.
	ConditionReady ConditionType = "Ready"
)

// ConditionReason is the machine-readable reason of a ReplicaTier condition.
type ConditionReason string

// Reasons of the Accepted condition.
const (
	// ReasonAccepted means the spec is valid and owns its aliases.
	ReasonAccepted ConditionReason = "Accepted"
	// ReasonInvalidSpec means the spec breaks a validation rule; the message
	// names the first broken rules.
	ReasonInvalidSpec ConditionReason = "InvalidSpec"
	// ReasonAliasConflict means an older tier on the same node claims one of
	// this tier's aliases.
	ReasonAliasConflict ConditionReason = "AliasConflict"
)

// Reasons of the Programmed condition.
const (
	// ReasonApplied means the router applies the current generation.
	ReasonApplied ConditionReason = "Applied"
	// ReasonPending means the router has not yet applied the current
	// generation.
	ReasonPending ConditionReason = "Pending"
	// ReasonNoRouter means no router has reported on the tier yet.
	ReasonNoRouter ConditionReason = "NoRouter"
	// ReasonApplyFailed means the router received the current generation
	// but cannot apply it; the message says why, and the router keeps
	// applying the generation it applied before, if any.
	ReasonApplyFailed ConditionReason = "ApplyFailed"
)

// Reasons of the Ready condition.
const (
	// ReasonMembersAdmitting means at least one member is ready and admitting.
	ReasonMembersAdmitting ConditionReason = "MembersAdmitting"
	// ReasonNoMemberAdmitting means the router reports no member that is both
	// ready and admitting.
	ReasonNoMemberAdmitting ConditionReason = "NoMemberAdmitting"
	// ReasonNotAccepted means the tier is not accepted, so no router serves it.
	ReasonNotAccepted ConditionReason = "NotAccepted"
)
